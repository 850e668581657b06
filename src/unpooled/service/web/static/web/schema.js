// The schema page: filter the relations table by name, meaning or argument type as you type.
(function () {
  "use strict";
  const input = document.getElementById("schema-filter");
  const table = document.getElementById("schema-table");
  if (!input || !table) return;
  const rows = Array.from(table.querySelectorAll("tr[data-search]"));
  const count = document.getElementById("schema-count");
  const hay = rows.map((r) => r.dataset.search.toLowerCase());
  function apply() {
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    rows.forEach((r, i) => {
      const ok = words.every((w) => hay[i].includes(w));
      r.hidden = !ok;
      if (ok) shown += 1;
    });
    count.textContent = words.length ? shown + " of " + rows.length + " relations" : "";
  }
  input.addEventListener("input", apply);
  if (location.hash.startsWith("#q=")) { input.value = decodeURIComponent(location.hash.slice(3)); apply(); }
})();
