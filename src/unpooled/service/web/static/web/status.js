// Live progress: every 2 s the status page's live part, rendered afresh by the server, until the submission is
// published or failed (then the whole page, with its leaderboard link or the stage's error).
(function () {
  const box = document.getElementById("status");
  if (box.dataset.done === "1") return;
  const live = document.getElementById("status-live");
  async function poll() {
    try {
      const r = await fetch(box.dataset.url, {headers: {"Accept": "application/json"}});
      if (r.ok) {
        const p = await r.json();
        if (p.done) { window.location.reload(); return; }
        live.innerHTML = p.html;
      }
    } catch (e) { /* network hiccup: try again */ }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
})();
