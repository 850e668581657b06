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

  // Minutes of work are not lost when the page is left (UX review #2, #8): a draft of the answer per lease in this
  // browser (the page's path names the lease), restored on the next visit, dropped when the item is skipped; while
  // has() says there is work, leaving the page asks first.  Sending the answer keeps the draft: the network may
  // fail or the server answer 5xx on the way, and coming back restores it; the page after the server took the
  // answer drops it (undo.js).
  function keepDraft(has) {
    const key = "unpooled-draft:" + location.pathname;
    const store = (() => { try { return window.localStorage; } catch (err) { return null; } })();
    let leaving = false;
    const drop = () => { leaving = true; try { if (store) store.removeItem(key); } catch (err) { /* nothing kept */ } };
    window.addEventListener("beforeunload", (e) => { if (!leaving && has()) { e.preventDefault(); e.returnValue = ""; } });
    // an answer this lease can never send (409: its slot went to someone else) keeps no draft: nothing would clear it
    const refused = root.dataset.refused === "1";
    if (refused) drop();
    window.addEventListener("pageshow", (e) => { if (e.persisted && !refused) leaving = false; });  // back after a failed send
    const skipForm = document.querySelector("form.skip");
    if (skipForm) skipForm.addEventListener("submit", drop);
    return {
      save(value) {
        if (!store || leaving) return;  // nothing after the answer is sent (a key's keyup comes after its submit)
        try { if (has()) store.setItem(key, JSON.stringify(value)); else store.removeItem(key); }
        catch (err) { /* storage full or refused: the warning on leaving still holds */ }
      },
      load() { try { return store ? JSON.parse(store.getItem(key) || "null") : null; } catch (err) { return null; } },
      drop,
      sending() { leaving = true; },  // the draft as it is, kept until the server has the answer
    };
  }

  document.addEventListener("keydown", (e) => {
    if (e.key === "?" && !typing(e)) { guide.open = !guide.open; e.preventDefault(); }
  });

  // u (and Backspace on a verification item) undoes the last answer, while the server still allows it (undo.js);
  // not on the clustering page, where u is a group's letter (its Undo button still works)
  let picking = false;  // the entity task's group picker is open: it has the keys
  document.addEventListener("keydown", (e) => {
    if (typing(e) || picking || e.ctrlKey || e.metaKey || e.altKey) return;
    if ((e.key === "u" && kind !== "clusters") || (e.key === "Backspace" && kind === "verify")) { if (window.unpooledUndo()) e.preventDefault(); }
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
    const draft = keepDraft(() => value() !== null);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const v = value();
      if (!v) { alert("Choose holds (1), another relation (2) or no relation (3)."); return; }
      draft.sending();
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
    // the keys set the inputs without a change event: save after every key and every click alike
    ["keyup", "change"].forEach((type) => document.addEventListener(type, () => draft.save(value())));
    // a rejected or withdrawn answer comes back from the server first, else this browser's draft: all of it, the
    // mention checks included
    const restore = previous || draft.load();
    if (restore && radios.some((r) => r.value === restore.relation)) {
      set(restore.relation);
      if (restore.other_predicate && Array.from(other.options).some((o) => o.value === restore.other_predicate)) other.value = restore.other_predicate;
      ["subject_ok", "object_ok", "link_ok"].forEach((id) => {
        const el = document.getElementById(id);
        if (el && typeof restore[id] === "boolean") el.checked = restore[id];
      });
      if (!previous) document.getElementById("verify-status").textContent = "Restored the answer you chose here before leaving the page (not sent yet).";
    }
  }

  // ------------------------------------------------------------------ entities
  if (kind === "entities") {
    const doc = document.getElementById("doc");
    const types = JSON.parse(doc.dataset.types);
    const toks = Array.from(doc.querySelectorAll(".tok"));
    const summary = document.getElementById("summary");
    const status = document.getElementById("ent-status");
    const picker = document.getElementById("group-picker");
    let cursor = 0, anchor = 0;
    let mentions = []; // {a, b (token indices, inclusive), type, cluster, link}
    const draft = keepDraft(() => mentions.length > 0);
    let nextCluster = 1;
    let lastMade = null;   // the mention just marked: g acts on it when the cursor is on no mention
    let choices = [], chosen = 0, target = null;
    const sel = () => [Math.min(cursor, anchor), Math.max(cursor, anchor)];
    const at = (i) => mentions.findIndex((m) => m.a <= i && i <= m.b);
    const text = (m) => toks.slice(m.a, m.b + 1).map((t) => t.textContent).join(" ");
    const colour = (type) => "c-" + (types.indexOf(type) + 1);
    const say = (msg) => { status.textContent = msg; };
    function render() {
      const [a, b] = sel();
      toks.forEach((t, i) => {
        t.className = "tok" + (i >= a && i <= b ? " sel" : "") + (i === cursor ? " cur" : "");
        t.removeAttribute("data-label"); t.removeAttribute("title");
      });
      mentions.forEach((m) => {
        for (let i = m.a; i <= m.b; i++) {
          toks[i].classList.add("m", colour(m.type));
          if (i === m.a) { toks[i].classList.add("m-first"); if (m.link) toks[i].title = "link: " + m.link; }
          if (i === m.b) { toks[i].classList.add("m-last"); toks[i].dataset.label = m.type + " " + m.cluster; }
        }
        if (m === lastMade) toks[m.b].classList.add("m-new");
      });
      summary.textContent = mentions.length + " mention" + (mentions.length === 1 ? "" : "s") + " in " +
        new Set(mentions.map((m) => m.cluster)).size + " group(s). Selected: " + toks.slice(a, b + 1).map((t) => t.textContent).join(" ");
      if (toks.length) toks[cursor].scrollIntoView({ block: "nearest" });
      draft.save(answer());
    }
    function mark(type) {
      if (!toks.length) return;
      const [a, b] = sel();
      const same = mentions.find((m) => m.a === a && m.b === b);
      if (same) { same.type = type; lastMade = same; }
      else {
        mentions = mentions.filter((m) => m.b < a || m.a > b); // no nesting: a new span replaces overlapped ones
        lastMade = { a, b, type, cluster: nextCluster++ };
        mentions.push(lastMade);
        mentions.sort((x, y) => x.a - y.a);
      }
      anchor = cursor = Math.min(b + 1, toks.length - 1);
      say("Marked " + text(lastMade) + " as " + type + ". g puts it in a group.");
      render();
    }
    // ---- the group picker: the groups the mention may join, nearest earlier group of its type first
    function openPicker() {
      const k = at(cursor);
      target = k >= 0 ? mentions[k] : (lastMade && mentions.includes(lastMade) ? lastMade : null);
      if (!target) { say("g: no mention here. Mark one first (its type's key), or move onto one with [ ]."); return; }
      const groups = new Map();
      mentions.forEach((m) => {
        if (m.cluster === target.cluster) return;
        const g = groups.get(m.cluster) || { cluster: m.cluster, mentions: [], type: m.type };
        g.mentions.push(m); groups.set(m.cluster, g);
      });
      const distance = (g) => Math.min(...g.mentions.map((m) => (m.b < target.a ? target.a - m.b : 100000 + m.a - target.b)));
      choices = Array.from(groups.values()).sort((x, y) =>
        (x.type === target.type ? 0 : 1) - (y.type === target.type ? 0 : 1) || distance(x) - distance(y));
      if (!choices.length) { say("g: there is no other group to join yet."); return; }
      chosen = 0; picking = true; drawPicker();
      picker.hidden = false;
    }
    function drawPicker() {
      picker.textContent = "";
      const head = document.createElement("p");
      head.textContent = "Put \u201c" + text(target) + "\u201d (" + target.type + ") in the group of:";
      picker.appendChild(head);
      const ol = document.createElement("ol");
      choices.slice(0, 9).forEach((g, i) => {
        const li = document.createElement("li");
        li.className = "choice " + colour(g.type) + (i === chosen ? " chosen" : "");
        li.dataset.i = String(i);
        const names = Array.from(new Set(g.mentions.map(text)));
        li.textContent = (i + 1) + "  " + names.slice(0, 3).join(" · ") + (names.length > 3 ? " …" : "") + "  (" + g.type + ", group " + g.cluster + ")";
        li.addEventListener("mousedown", (e) => { e.preventDefault(); pick(i); });
        ol.appendChild(li);
      });
      picker.appendChild(ol);
      const foot = document.createElement("p");
      foot.className = "muted";
      foot.textContent = "Enter or g: the highlighted group · 1\u20139: that group · \u2191 \u2193: move · Esc: none";
      picker.appendChild(foot);
    }
    function closePicker() { picking = false; picker.hidden = true; }
    function pick(i) {
      const g = choices[i];
      closePicker();
      if (!g || !target) return;
      target.cluster = g.cluster;
      say("\u201c" + text(target) + "\u201d joined group " + g.cluster + " (" + Array.from(new Set(g.mentions.map(text))).slice(0, 2).join(", ") + ").");
      render();
    }
    // the mouse (or a touch screen) does what the keys do: a type's button in the legend marks the selection, the
    // Group and Remove buttons are g and Backspace; pressing one leaves the focus where it was
    function remove() {
      const k = at(cursor);
      if (k >= 0) { const gone = mentions.splice(k, 1)[0]; if (gone === lastMade) lastMade = null; say("Removed " + text(gone) + "."); render(); }
      else say("Backspace: no mention under the cursor.");
    }
    // Extend adds the next word to the selection, as Shift+→ does (on a touch screen each tap starts a new one)
    const extend = () => { const [a, b] = sel(); anchor = a; cursor = Math.min(toks.length - 1, b + 1); render(); };
    const tools = [[document.getElementById("ent-extend"), extend], [document.getElementById("ent-group"), openPicker],
                   [document.getElementById("ent-remove"), remove]];
    document.querySelectorAll(".legend .tag[data-type]").forEach((b) => tools.push([b, () => mark(b.dataset.type)]));
    tools.forEach(([b, act]) => {
      b.addEventListener("mousedown", (e) => e.preventDefault());
      b.addEventListener("click", () => { if (!picking) act(); });
    });
    doc.addEventListener("mousedown", (e) => { const i = toks.indexOf(e.target); if (i >= 0) { anchor = cursor = i; render(); } });
    doc.addEventListener("mouseup", (e) => { const i = toks.indexOf(e.target); if (i >= 0) { cursor = i; render(); } });
    document.addEventListener("keydown", (e) => {
      if (picking) {
        e.preventDefault();
        if (e.key === "Escape") { closePicker(); say("Not grouped."); }
        else if (e.key === "Enter" || e.key === "g") pick(chosen);
        else if (/^[1-9]$/.test(e.key) && Number(e.key) <= Math.min(9, choices.length)) pick(Number(e.key) - 1);
        else if (e.key === "ArrowDown") { chosen = Math.min(choices.length - 1, Math.min(8, chosen + 1)); drawPicker(); }
        else if (e.key === "ArrowUp") { chosen = Math.max(0, chosen - 1); drawPicker(); }
        return;
      }
      if (typing(e) || activates(e) || e.ctrlKey || e.metaKey || e.altKey) return;
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
      } else if (e.key === "g") { openPicker(); e.preventDefault(); }
      else if (e.key === "k") {  // optional KB link of the mention under the cursor
        const k = at(cursor);
        if (k >= 0) {
          const v = window.prompt("KB link of this mention (e.g. a Wikidata id such as Q90); empty for none", mentions[k].link || "");
          if (v !== null) { mentions[k].link = v.trim(); render(); }
        } else say("k: no mention under the cursor.");
        e.preventDefault();
      }
      else if (e.key === "Backspace" || e.key === "Delete") { remove(); e.preventDefault(); } else if (e.key === "Enter") { e.preventDefault(); form.requestSubmit(); }
    });
    const answer = () => ({ mentions: mentions.map((m) => ({ start: Number(toks[m.a].dataset.s), end: Number(toks[m.b].dataset.e),
                                                              type: m.type, cluster: m.cluster, link: m.link || "" })) });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const value = answer();
      draft.sending();
      submit(value);
    });
    // the server's copy of a refused or withdrawn answer comes first, then this browser's draft
    const restore = previous || draft.load(), fromDraft = !previous && !!restore;
    if (restore && Array.isArray(restore.mentions)) {
      const byStart = new Map(toks.map((t, i) => [Number(t.dataset.s), i]));
      const byEnd = new Map(toks.map((t, i) => [Number(t.dataset.e), i]));
      restore.mentions.forEach((m) => {
        if (byStart.has(m.start) && byEnd.has(m.end)) mentions.push({ a: byStart.get(m.start), b: byEnd.get(m.end), type: m.type, cluster: m.cluster, link: m.link || "" });
      });
      nextCluster = Math.max(0, ...mentions.map((m) => m.cluster)) + 1;
      if (fromDraft && mentions.length) say("Restored " + mentions.length + " mark(s) you made here before leaving the page.");
    }
    render();
  }

  // ------------------------------------------------------------------ relations
  if (kind === "relations") {
    const list = document.getElementById("pairs");
    const pairs = Array.from(list.querySelectorAll(".pair"));
    const relations = JSON.parse(list.dataset.relations);   // [code, meaning, subject types, object types]
    const checked = list.dataset.typeCheck !== "off";
    const chosen = pairs.map(() => new Set());
    const confirmEl = document.getElementById("confirm-empty");
    const status = document.getElementById("rel-status");
    const draft = keepDraft(() => chosen.some((s) => s.size > 0));
    const answer = () => { const out = {}; chosen.forEach((s, i) => { out[String(i)] = Array.from(s); }); return out; };
    let cur = 0, confirmArmed = false;
    const label = (code) => {
      const r = relations.find((x) => x[0] === code.slice(3));
      return (code.startsWith("ab:") ? "A → B: " : "B → A: ") + (r ? r[1] : code.slice(3));
    };
    // every (direction, relation) a pair may take: A → B when A's type is a subject type and B's an object type
    const options = pairs.map((p) => {
      const ta = p.dataset.aType, tb = p.dataset.bType, out = [];
      relations.forEach((r, order) => {
        const fitAB = !checked || r[2].includes(ta + ">" + tb);  // the relation's usual type pairs
        const fitBA = !checked || r[2].includes(tb + ">" + ta);
        out.push({ code: "ab:" + r[0], text: "A → B: " + r[1] + " (" + r[0] + ")", meaning: r[1].toLowerCase(), name: r[0].toLowerCase(), fits: fitAB, order: 2 * order });
        out.push({ code: "ba:" + r[0], text: "B → A: " + r[1] + " (" + r[0] + ")", meaning: r[1].toLowerCase(), name: r[0].toLowerCase(), fits: fitBA, order: 2 * order + 1 });
      });
      return out;
    });
    // matches of a query: every word must occur in the meaning or the code; a word that starts a word of the
    // meaning, or the code itself, ranks first; "a>" / "b>" (or "ab:" / "ba:") keep one direction
    function matches(i, query) {
      let q = query.trim().toLowerCase(), dir = null;
      const m = /^(a\s*(?:→|->|>)|ab:|b\s*(?:→|->|>)|ba:)\s*/.exec(q);
      if (m) { dir = m[1].startsWith("a") ? "ab:" : "ba:"; q = q.slice(m[0].length); }
      const words = q.split(/\s+/).filter(Boolean);
      const score = (o) => {
        let s = 0;
        for (const w of words) {
          if (o.name === w) s += 0;
          else if ((" " + o.meaning).includes(" " + w)) s += 1;
          else if (o.meaning.includes(w) || o.name.includes(w)) s += 2;
          else return null;
        }
        return s;
      };
      const all = options[i].filter((o) => !chosen[i].has(o.code) && (!dir || o.code.startsWith(dir)))
        .map((o) => ({ o, s: score(o) })).filter((x) => x.s !== null)
        .sort((x, y) => x.s - y.s || x.o.order - y.o.order).map((x) => x.o);
      const fitting = all.filter((o) => o.fits);
      return { fitting, others: fitting.length ? [] : all.filter((o) => !o.fits) };
    }
    function render() {
      pairs.forEach((p, i) => {
        p.classList.toggle("current", i === cur);
        const chips = p.querySelector(".chips");
        chips.textContent = "";
        if (!chosen[i].size) { chips.textContent = "no relation"; chips.classList.add("none"); }
        else {
          chips.classList.remove("none");
          chosen[i].forEach((c) => {  // a button: pressing it takes the relation back (x clears the whole pair)
            const s = document.createElement("button");
            s.type = "button"; s.className = "chip"; s.dataset.code = c; s.textContent = label(c);
            s.setAttribute("aria-label", "remove " + label(c));
            s.addEventListener("click", () => { chosen[i].delete(c); status.textContent = "Removed " + label(c) + "."; render(); });
            chips.appendChild(s);
          });
        }
      });
      pairs[cur].scrollIntoView({ block: "nearest" });
      draft.save({ pairs: answer() });
    }
    pairs.forEach((p, i) => {
      const input = p.querySelector(".rel-search");
      const box = p.querySelector(".suggest");
      let shown = [], hi = 0, moved = false;  // moved: the arrows chose a match (Enter then takes even one off type)
      function draw() {
        const { fitting, others } = matches(i, input.value);
        shown = (fitting.length ? fitting : others).slice(0, 8);
        hi = Math.min(hi, Math.max(0, shown.length - 1));
        box.textContent = "";
        if (!fitting.length) {
          const li = document.createElement("li");
          li.className = "none";
          li.textContent = "No relation for " + p.dataset.aType + " and " + p.dataset.bType +
            (input.value.trim() ? " matches \u201c" + input.value.trim() + "\u201d" : "") + (others.length ? "; relations for other types (\u2193 then Enter to take one anyway):" : ".");
          box.appendChild(li);
        }
        shown.forEach((o, k) => {
          const li = document.createElement("li");
          li.className = "option" + (k === hi && (o.fits || moved) ? " hi" : "") + (o.fits ? "" : " off-type");
          li.setAttribute("role", "option");
          li.dataset.code = o.code;
          li.textContent = o.text;
          li.addEventListener("mousedown", (e) => { e.preventDefault(); add(o); });
          box.appendChild(li);
        });
        box.hidden = false;
        input.setAttribute("aria-expanded", "true");
      }
      function add(o) {
        chosen[i].add(o.code); input.value = ""; hi = 0; confirmArmed = false; confirmEl.hidden = true;
        render(); draw();
      }
      input.addEventListener("focus", () => { cur = i; render(); draw(); });
      input.addEventListener("input", () => { hi = 0; moved = false; draw(); });
      input.addEventListener("blur", () => { box.hidden = true; input.setAttribute("aria-expanded", "false"); });
      input.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && !e.ctrlKey) {
          e.preventDefault();
          if (shown.length && (shown[hi].fits || moved)) { add(shown[hi]); moved = false; }
        } else if (e.key === "ArrowDown") { e.preventDefault(); hi = Math.min(shown.length - 1, hi + 1); moved = true; draw(); }
        else if (e.key === "ArrowUp") { e.preventDefault(); hi = Math.max(0, hi - 1); moved = true; draw(); }
        else if (e.key === "Escape") { input.blur(); }
      });
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && e.ctrlKey) { e.preventDefault(); form.requestSubmit(); return; }
      if (typing(e) || e.ctrlKey || e.metaKey || e.altKey) return;
      if (e.key === "j" || e.key === "ArrowDown") { cur = Math.min(pairs.length - 1, cur + 1); render(); e.preventDefault(); }
      else if (e.key === "k" || e.key === "ArrowUp") { cur = Math.max(0, cur - 1); render(); e.preventDefault(); }
      else if (e.key === "/") { pairs[cur].querySelector(".rel-search").focus(); e.preventDefault(); }
      else if (e.key === "x") { chosen[cur].clear(); render(); }
    });
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const none = chosen.every((s) => !s.size);
      if (none && pairs.length && !confirmArmed) {  // a document with no relation at all: ask once
        confirmArmed = true;
        confirmEl.textContent = (pairs.length === 1 ? "No relation chosen for the pair. Submit \u201cno relation\u201d?"
          : "No relation chosen for any of the " + pairs.length + " pairs. Submit \u201cno relation\u201d for all of them?") +
          " Press Ctrl+Enter (or Submit) again to confirm.";
        confirmEl.hidden = false;
        return;
      }
      const out = answer();
      draft.sending();
      submit({ pairs: out });
    });
    // the server's copy of a refused or withdrawn answer comes first, then this browser's draft; only the
    // (direction, relation) codes this page offers for the pair are taken back
    const restore = previous || draft.load(), fromDraft = !previous;
    if (restore && restore.pairs && typeof restore.pairs === "object") {
      Object.entries(restore.pairs).forEach(([k, v]) => {
        const i = Number(k);
        if (!chosen[i] || !Array.isArray(v)) return;
        v.forEach((c) => { if (options[i].some((o) => o.code === c)) chosen[i].add(c); });
      });
      const n = chosen.reduce((t, s) => t + s.size, 0);
      if (fromDraft && n) status.textContent = "Restored " + n + " relation" + (n === 1 ? "" : "s") + " you chose here before leaving the page.";
    }
    if (pairs.length) render();
  }
  // ------------------------------------------------------------------ clusters
  if (kind === "clusters") {
    const items = Array.from(document.querySelectorAll(".cluster-item"));
    const summary = document.getElementById("cluster-summary");
    const status = document.getElementById("cluster-status");
    const review = document.getElementById("cluster-review");
    const names = items.map((li) => li.querySelector(".name").textContent);
    const quoted = (i) => "\u201c" + names[i] + "\u201d";
    const group = items.map(() => null);  // a letter per item, or null (an entity of its own)
    const draft = keepDraft(() => group.some(Boolean));
    let cur = 0, reviewing = false;
    // the groups of two or more lines (in the order of their first line) and the lines alone
    function grouping() {
      const byLetter = new Map();
      group.forEach((g, i) => { if (g) { if (!byLetter.has(g)) byLetter.set(g, []); byLetter.get(g).push(i); } });
      const many = Array.from(byLetter.entries()).filter(([, lines]) => lines.length > 1);
      const alone = group.map((g, i) => i).filter((i) => !group[i] || byLetter.get(group[i]).length === 1);
      return { many, alone };
    }
    function render() {
      items.forEach((li, i) => {
        li.classList.toggle("current", i === cur);
        li.querySelector(".group-tag").textContent = group[i] || "\u00b7";
        li.dataset.group = group[i] || "";
      });
      const { many, alone } = grouping();
      summary.textContent = many.length + " group" + (many.length === 1 ? "" : "s") + " of two or more lines chosen; " +
        alone.length + " line" + (alone.length === 1 ? "" : "s") + " alone.";
      drawTools();
      items[cur].scrollIntoView({ block: "nearest" });
      draft.save({ letters: group });
    }
    // the chosen line's buttons, for the mouse and touch screens: a new group, each group made so far, alone
    const LETTERS = "abcdefghilmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";  // j and k move
    const tools = document.createElement("div");
    tools.className = "cluster-tools"; tools.setAttribute("role", "group"); tools.setAttribute("aria-label", "group of this line");
    function put(letter) { if (reviewing) return; group[cur] = letter; say(cur); render(); }
    function drawTools() {
      // a button pressed from the keyboard is redrawn: the focus goes to its successor, not to the page's body
      const had = tools.contains(document.activeElement) ? document.activeElement.getAttribute("aria-label") : null;
      tools.textContent = "";
      const used = Array.from(new Set(group.filter(Boolean)));
      const fresh = Array.from(LETTERS).find((l) => !used.includes(l));
      const add = (text, name, act) => {
        const b = document.createElement("button");
        b.type = "button"; b.textContent = text; b.setAttribute("aria-label", name);
        b.addEventListener("mousedown", (e) => e.preventDefault());  // the focus stays: the keys go on working
        b.addEventListener("click", act);
        tools.appendChild(b);
      };
      if (fresh) add("+ new group", "new group", () => put(fresh));
      used.filter((l) => l !== group[cur]).forEach((l) => add(l + ": " + names[group.indexOf(l)], "group " + l, () => put(l)));
      if (group[cur]) add("alone", "alone", () => put(null));
      items[cur].appendChild(tools);
      if (had !== null) {
        const buttons = Array.from(tools.querySelectorAll("button"));
        const again = buttons.find((b) => b.getAttribute("aria-label") === had) || buttons[0];
        if (again) again.focus({ preventScroll: true });
      }
    }
    function say(i) {  // what the line is grouped with, after a letter or Backspace
      const others = group.map((g, k) => (g && g === group[i] && k !== i ? quoted(k) : null)).filter(Boolean);
      status.textContent = "Line " + (i + 1) + " " + quoted(i) + (!group[i] ? " is alone." : " is in group " + group[i] +
        (others.length ? " with " + others.join(", ") + "." : "; no other line has that letter yet."));
    }
    // Enter shows the groups before they are sent (UX review #8): Enter again sends, Esc goes back to editing
    function openReview() {
      const { many, alone } = grouping();
      review.textContent = "";
      const add = (tag, text, cls) => { const el = document.createElement(tag); el.textContent = text; if (cls) el.className = cls; review.appendChild(el); return el; };
      add("h2", "Check your groups before sending");
      add("p", many.length + " group" + (many.length === 1 ? "" : "s") + " of two or more lines; " + alone.length +
        " line" + (alone.length === 1 ? "" : "s") + " alone (each an entity of its own).");
      const ul = add("ul", "");
      many.forEach(([letter, lines]) => {
        const li = document.createElement("li");
        li.textContent = letter + ": " + lines.map((i) => names[i] + " (" + (i + 1) + ")").join(" \u00b7 ");
        ul.appendChild(li);
      });
      if (alone.length) add("p", "Alone: " + alone.map((i) => names[i] + " (" + (i + 1) + ")").join(" \u00b7 "), "alone");
      const send = add("button", "Send these groups (Enter)");
      send.type = "button"; send.id = "send-groups";
      send.addEventListener("click", () => form.requestSubmit());
      const back = add("button", "Back to editing (Esc)");
      back.type = "button"; back.id = "back-to-editing";
      back.addEventListener("click", closeReview);
      reviewing = true; review.hidden = false;
      review.scrollIntoView({ block: "nearest" });
    }
    function closeReview() { reviewing = false; review.hidden = true; status.textContent = "Back to editing."; }
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
    items.forEach((li, i) => li.addEventListener("click", () => { if (!reviewing) { cur = i; render(); } }));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!reviewing) { openReview(); return; }
      const v = value();
      draft.sending();
      submit(v);
    });
    document.addEventListener("keydown", (e) => {
      if (typing(e) || activates(e) || e.ctrlKey || e.metaKey || e.altKey) return;
      if (reviewing) {  // only Enter (send) and Esc (back) while the groups are shown
        if (e.key === "Enter") form.requestSubmit();
        else if (e.key === "Escape") closeReview();
        e.preventDefault();
        return;
      }
      if (e.key === "j" || e.key === "ArrowDown") { cur = Math.min(items.length - 1, cur + 1); }
      else if (e.key === "k" || e.key === "ArrowUp") { cur = Math.max(0, cur - 1); }
      else if (e.key === "Backspace") { group[cur] = null; say(cur); }
      else if (e.key === "Enter") { e.preventDefault(); form.requestSubmit(); return; }
      else if (/^[a-zA-Z]$/.test(e.key) && e.key !== "j" && e.key !== "k") {  // with Shift: 26 more groups
        group[cur] = group[cur] === e.key ? null : e.key;  // the cursor stays: j moves on
        say(cur);
      } else return;
      e.preventDefault();
      render();
    });
    // the server's copy of a refused or withdrawn answer comes first, then this browser's draft
    const kept = previous ? null : draft.load();
    if (previous && Array.isArray(previous.groups)) {
      const letters = "abcdefghilmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
      let n = 0;
      previous.groups.forEach((g) => { if (g.length > 1) { const l = letters[n++ % letters.length]; g.forEach((i) => { if (i < group.length) group[i] = l; }); } });
    } else if (kept && Array.isArray(kept.letters) && kept.letters.length === group.length) {
      kept.letters.forEach((l, i) => { group[i] = typeof l === "string" && /^[a-zA-Z]$/.test(l) ? l : null; });
      if (group.some(Boolean)) status.textContent = "Restored the groups you made here before leaving the page.";
    }
    if (items.length) render();
  }
})();
