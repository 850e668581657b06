// unpooled annotation pages: keyboard-first answers for verify, entities and relations tasks.
// The answer is composed here and posted as JSON in the form field "answer"; the server validates it.
(function () {
  "use strict";
  const root = document.getElementById("task");
  if (!root) return;
  const kind = root.dataset.kind;
  const form = document.getElementById("answer-form");
  const started = performance.now();
  const previousEl = document.getElementById("previous-answer");
  const previous = previousEl ? JSON.parse(previousEl.textContent) : null;
  const typing = (e) => ["INPUT", "SELECT", "TEXTAREA"].includes(e.target.tagName) && e.target.type !== "radio" && e.target.type !== "checkbox";
  // Enter on a focused button, link or summary (Skip, sign out, the instructions) activates it; it does not submit the answer
  const activates = (e) => e.key === "Enter" && e.target instanceof Element && e.target.closest("button, a[href], summary") !== null;
  const guide = document.querySelector("details.guide");

  function submit(value) {
    document.getElementById("answer").value = JSON.stringify(value);
    document.getElementById("seconds").value = ((performance.now() - started) / 1000).toFixed(1);
    HTMLFormElement.prototype.submit.call(form);  // not form.submit: a control named "submit" would shadow it
  }

  document.addEventListener("keydown", (e) => {
    if (e.key === "?" && !typing(e)) { guide.open = !guide.open; e.preventDefault(); }
  });

  // ------------------------------------------------------------------ verify
  if (kind === "verify") {
    const radios = Array.from(document.querySelectorAll('input[name="relation"]'));
    const other = document.getElementById("other_predicate");
    const set = (v) => { radios.forEach((r) => { r.checked = r.value === v; }); other.disabled = v !== "other"; if (v === "other") other.focus(); };
    radios.forEach((r) => r.addEventListener("change", () => set(r.value)));
    const toggle = (id) => { const el = document.getElementById(id); if (el) el.checked = !el.checked; };
    const value = () => {
      const chosen = radios.find((r) => r.checked);
      if (!chosen) return null;
      const link = document.getElementById("link_ok");
      const v = { relation: chosen.value, subject_ok: document.getElementById("subject_ok").checked,
                  object_ok: document.getElementById("object_ok").checked, link_ok: link ? link.checked : null };
      if (chosen.value === "other") v.other_predicate = other.value;
      return v;
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const v = value();
      if (!v) { alert("Choose holds (1), another relation (2) or no relation (3)."); return; }
      submit(v);
    });
    document.addEventListener("keydown", (e) => {
      if (e.target === other && e.key !== "Enter") return;
      if ((typing(e) && e.target !== other) || activates(e)) return;
      const map = { "1": "holds", "2": "other", "3": "none" };
      if (map[e.key]) { set(map[e.key]); e.preventDefault(); }
      else if (e.key === "s") toggle("subject_ok");
      else if (e.key === "o") toggle("object_ok");
      else if (e.key === "l") toggle("link_ok");
      else if (e.key === "Enter") { e.preventDefault(); form.requestSubmit(); }
    });
    if (previous) {  // a rejected answer comes back: restore all of it, the mention checks included
      set(previous.relation); if (previous.other_predicate) other.value = previous.other_predicate;
      ["subject_ok", "object_ok", "link_ok"].forEach((id) => {
        const el = document.getElementById(id);
        if (el && typeof previous[id] === "boolean") el.checked = previous[id];
      });
    }
  }

  // ------------------------------------------------------------------ entities
  if (kind === "entities") {
    const doc = document.getElementById("doc");
    const types = JSON.parse(doc.dataset.types);
    const toks = Array.from(doc.querySelectorAll(".tok"));
    const summary = document.getElementById("summary");
    let cursor = 0, anchor = 0;
    let mentions = []; // {a, b (token indices, inclusive), type, cluster}
    let nextCluster = 1;
    const sel = () => [Math.min(cursor, anchor), Math.max(cursor, anchor)];
    const at = (i) => mentions.findIndex((m) => m.a <= i && i <= m.b);
    function render() {
      const [a, b] = sel();
      toks.forEach((t, i) => {
        t.className = "tok" + (i >= a && i <= b ? " sel" : "") + (i === cursor ? " cur" : "");
        t.removeAttribute("data-type"); t.removeAttribute("data-cluster");
      });
      mentions.forEach((m) => {
        for (let i = m.a; i <= m.b; i++) {
          toks[i].classList.add("m", "t-" + m.type);
          if (i === m.a) { toks[i].classList.add("m-first"); toks[i].dataset.cluster = m.cluster; if (m.link) toks[i].title = "link: " + m.link; }
          if (i === m.b) toks[i].classList.add("m-last");
        }
      });
      summary.textContent = mentions.length + " mention" + (mentions.length === 1 ? "" : "s") + " in " +
        new Set(mentions.map((m) => m.cluster)).size + " group(s). Selected: " + toks.slice(a, b + 1).map((t) => t.textContent).join(" ");
      if (toks.length) toks[cursor].scrollIntoView({ block: "nearest" });
    }
    function mark(type) {
      if (!toks.length) return;
      const [a, b] = sel();
      const same = mentions.find((m) => m.a === a && m.b === b);
      if (same) { same.type = type; }
      else {
        mentions = mentions.filter((m) => m.b < a || m.a > b); // no nesting: a new span replaces overlapped ones
        mentions.push({ a, b, type, cluster: nextCluster++ });
        mentions.sort((x, y) => x.a - y.a);
      }
      anchor = cursor = Math.min(b + 1, toks.length - 1);
      render();
    }
    function joinPrevious() {  // the mention under the cursor joins the previous mention's group
      const k = at(cursor);
      if (k <= 0) return;
      mentions[k].cluster = mentions[k - 1].cluster; render();
    }
    doc.addEventListener("mousedown", (e) => { const i = toks.indexOf(e.target); if (i >= 0) { anchor = cursor = i; render(); } });
    doc.addEventListener("mouseup", (e) => { const i = toks.indexOf(e.target); if (i >= 0) { cursor = i; render(); } });
    document.addEventListener("keydown", (e) => {
      if (typing(e) || activates(e)) return;
      const n = toks.length;
      if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
        const d = e.key === "ArrowRight" ? 1 : -1;
        cursor = Math.max(0, Math.min(n - 1, cursor + d));
        if (!e.shiftKey) anchor = cursor;
        e.preventDefault(); render();
      } else if (/^[1-9]$/.test(e.key) && Number(e.key) <= types.length) {
        mark(types[Number(e.key) - 1]); e.preventDefault();
      } else if (e.key === "[" || e.key === "]") {
        const list = e.key === "]" ? mentions.filter((m) => m.a > cursor) : mentions.filter((m) => m.b < cursor).reverse();
        if (list.length) { cursor = anchor = list[0].a; render(); }
        e.preventDefault();
      } else if (e.key === "g") { joinPrevious(); e.preventDefault(); }
      else if (e.key === "k") {  // optional KB link of the mention under the cursor
        const k = at(cursor);
        if (k >= 0) {
          const v = window.prompt("KB link of this mention (e.g. a Wikidata id such as Q90); empty for none", mentions[k].link || "");
          if (v !== null) { mentions[k].link = v.trim(); render(); }
        }
        e.preventDefault();
      }
      else if (e.key === "Backspace" || e.key === "Delete") {
        const k = at(cursor); if (k >= 0) { mentions.splice(k, 1); render(); } e.preventDefault();
      } else if (e.key === "Enter") { e.preventDefault(); form.requestSubmit(); }
    });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      submit({ mentions: mentions.map((m) => ({ start: Number(toks[m.a].dataset.s), end: Number(toks[m.b].dataset.e),
                                                  type: m.type, cluster: m.cluster, link: m.link || "" })) });
    });
    if (previous && Array.isArray(previous.mentions)) {
      const byStart = new Map(toks.map((t, i) => [Number(t.dataset.s), i]));
      const byEnd = new Map(toks.map((t, i) => [Number(t.dataset.e), i]));
      previous.mentions.forEach((m) => {
        if (byStart.has(m.start) && byEnd.has(m.end)) mentions.push({ a: byStart.get(m.start), b: byEnd.get(m.end), type: m.type, cluster: m.cluster, link: m.link || "" });
      });
      nextCluster = Math.max(0, ...mentions.map((m) => m.cluster)) + 1;
    }
    render();
  }

  // ------------------------------------------------------------------ relations
  if (kind === "relations") {
    const list = document.getElementById("pairs");
    const pairs = Array.from(list.querySelectorAll(".pair"));
    const relations = JSON.parse(list.dataset.relations);
    const chosen = pairs.map(() => new Set());
    let cur = 0;
    const parse = (text) => {
      const m = /^(A → B|B → A): .*\(([^()]+)\)\s*$/.exec(text.trim());
      if (!m || !relations.some((r) => r[0] === m[2])) return null;
      return (m[1] === "A → B" ? "ab:" : "ba:") + m[2];
    };
    const label = (code) => {
      const r = relations.find((x) => x[0] === code.slice(3));
      return (code.startsWith("ab:") ? "A → B: " : "B → A: ") + (r ? r[1] : code.slice(3));
    };
    function render() {
      pairs.forEach((p, i) => {
        p.classList.toggle("current", i === cur);
        const chips = p.querySelector(".chips");
        chips.textContent = "";
        if (!chosen[i].size) { chips.textContent = "no relation"; chips.classList.add("none"); }
        else {
          chips.classList.remove("none");
          chosen[i].forEach((c) => { const s = document.createElement("span"); s.className = "chip"; s.dataset.code = c; s.textContent = label(c); chips.appendChild(s); });
        }
      });
      pairs[cur].scrollIntoView({ block: "nearest" });
    }
    pairs.forEach((p, i) => {
      const input = p.querySelector(".rel-search");
      input.addEventListener("focus", () => { cur = i; render(); });
      input.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && !e.ctrlKey) {
          e.preventDefault();
          const code = parse(input.value);
          if (code) { chosen[i].add(code); input.value = ""; render(); }
          else input.setCustomValidity("choose a relation from the list"), input.reportValidity(), input.setCustomValidity("");
        } else if (e.key === "Escape") { input.blur(); }
      });
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && e.ctrlKey) { e.preventDefault(); form.requestSubmit(); return; }
      if (typing(e)) return;
      if (e.key === "j" || e.key === "ArrowDown") { cur = Math.min(pairs.length - 1, cur + 1); render(); e.preventDefault(); }
      else if (e.key === "k" || e.key === "ArrowUp") { cur = Math.max(0, cur - 1); render(); e.preventDefault(); }
      else if (e.key === "/") { pairs[cur].querySelector(".rel-search").focus(); e.preventDefault(); }
      else if (e.key === "x") { chosen[cur].clear(); render(); }
    });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const out = {};
      chosen.forEach((s, i) => { out[String(i)] = Array.from(s); });
      submit({ pairs: out });
    });
    if (previous && previous.pairs) Object.entries(previous.pairs).forEach(([k, v]) => { if (chosen[Number(k)]) v.forEach((c) => chosen[Number(k)].add(c)); });
    if (pairs.length) render();
  }
  // ------------------------------------------------------------------ clusters
  if (kind === "clusters") {
    const items = Array.from(document.querySelectorAll(".cluster-item"));
    const summary = document.getElementById("cluster-summary");
    const group = items.map(() => null);  // a letter per item, or null (an entity of its own)
    let cur = 0;
    function render() {
      items.forEach((li, i) => {
        li.classList.toggle("current", i === cur);
        li.querySelector(".group-tag").textContent = group[i] || "·";
        li.dataset.group = group[i] || "";
      });
      const used = new Set(group.filter((g) => g));
      summary.textContent = used.size + " group" + (used.size === 1 ? "" : "s") + " of two or more lines chosen; " +
        group.filter((g) => !g).length + " lines alone.";
      items[cur].scrollIntoView({ block: "nearest" });
    }
    function value() {
      const byLetter = new Map();
      const groups = [];
      group.forEach((g, i) => {
        if (!g) { groups.push([i]); return; }
        if (!byLetter.has(g)) { byLetter.set(g, []); groups.push(byLetter.get(g)); }
        byLetter.get(g).push(i);
      });
      return { groups: groups };
    }
    items.forEach((li, i) => li.addEventListener("click", () => { cur = i; render(); }));
    form.addEventListener("submit", (e) => { e.preventDefault(); submit(value()); });
    document.addEventListener("keydown", (e) => {
      if (typing(e) || activates(e) || e.ctrlKey || e.metaKey || e.altKey) return;
      if (e.key === "j" || e.key === "ArrowDown") { cur = Math.min(items.length - 1, cur + 1); }
      else if (e.key === "k" || e.key === "ArrowUp") { cur = Math.max(0, cur - 1); }
      else if (e.key === "Backspace") { group[cur] = null; }
      else if (e.key === "Enter") { e.preventDefault(); form.requestSubmit(); return; }
      else if (/^[a-z]$/.test(e.key) && e.key !== "j" && e.key !== "k") {
        group[cur] = group[cur] === e.key ? null : e.key;
        cur = Math.min(items.length - 1, cur + 1);
      } else return;
      e.preventDefault();
      render();
    });
    if (previous && Array.isArray(previous.groups)) {  // a rejected answer comes back
      const letters = "abcdefghilmnopqrstuvwxyz";
      let n = 0;
      previous.groups.forEach((g) => { if (g.length > 1) { const l = letters[n++ % letters.length]; g.forEach((i) => { if (i < group.length) group[i] = l; }); } });
    }
    if (items.length) render();
  }
})();
