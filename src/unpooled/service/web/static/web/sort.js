// Sortable tables and the "rows without draws" toggle (no inline script: the Content-Security-Policy forbids it).
// A table.sortable's header cells with data-sort="num"|"text" hold a button; clicking it sorts the tbody's rows by
// that column's cells' data-v (or their text), descending first for numbers, then toggles.
(function () {
  function key(row, i, kind) {
    const cell = row.cells[i];
    if (!cell) return kind === "num" ? -Infinity : "";
    const v = cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim();
    if (kind === "num") { const x = parseFloat(v); return isNaN(x) ? -Infinity : x; }
    return v.toLowerCase();
  }
  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = Array.from(table.tHead ? table.tHead.rows[0].cells : []);
    heads.forEach(function (th, i) {
      const kind = th.dataset.sort, btn = th.querySelector("button");
      if (!kind || !btn) return;
      btn.addEventListener("click", function () {
        const was = th.getAttribute("aria-sort");
        // numbers: largest first (rank: smallest first, marked ascending from the start)
        const asc = was ? was === "descending" : kind !== "num";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows).filter(function (r) { return !r.classList.contains("all"); });
        const fixed = Array.from(body.rows).filter(function (r) { return r.classList.contains("all"); });
        rows.sort(function (a, b) {
          const x = key(a, i, kind), y = key(b, i, kind);
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        for (const r of rows.concat(fixed)) body.appendChild(r);
      });
    });
  }
  for (const btn of document.querySelectorAll("button.toggle-empty")) {
    const table = document.getElementById(btn.dataset.table);
    if (!table) continue;
    const n = table.querySelectorAll("tr.nodraw").length;
    const label = function () {
      btn.textContent = table.classList.contains("hide-empty") ? "show the " + n + " rows without draws"
        : "hide the " + n + " rows without draws";
    };
    if (!n) { btn.hidden = true; continue; }
    label();
    btn.addEventListener("click", function () { table.classList.toggle("hide-empty"); label(); });
  }
})();
