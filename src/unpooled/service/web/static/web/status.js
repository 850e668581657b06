// Live progress: reload the figures every 2 s until the submission is published or failed.
(function () {
  const box = document.getElementById("status");
  if (box.dataset.done === "1") return;
  const set = (id, v) => { const el = document.getElementById(id); if (el) el.textContent = v; };
  async function poll() {
    try {
      const r = await fetch(box.dataset.url, {headers: {"Accept": "application/json"}});
      if (r.ok) {
        const p = await r.json();
        if (p.done || p.status !== box.dataset.status && Object.keys(p.scores).length) { window.location.reload(); return; }
        set("stage", p.status_label);
        set("levels", p.levels.map((l) => l.state === "scored" ? l.level + " ✓" : l.level + ": " + l.label).join(" · ") || "not planned yet"); set("labels-received", p.labels_received); set("labels-needed", p.labels_needed);
        set("outstanding", p.answers_outstanding); set("cost", p.cost + (p.budget ? " of " + p.budget : ""));
        set("eta", p.eta_seconds === null ? "unknown (nobody has answered in the last 10 minutes)" : p.eta_seconds + " s");
        const bar = document.getElementById("labels-bar"); bar.max = Math.max(1, p.labels_needed); bar.value = p.labels_received;
        for (const s of p.steps) { const li = document.querySelector(`#steps li[data-stage="${s.stage}"]`); if (li) li.className = s.state; }
      }
    } catch (e) { /* network hiccup: try again */ }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
})();
