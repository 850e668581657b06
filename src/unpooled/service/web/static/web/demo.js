// The "loading the demo" banner: ask /demo/status.json every 3 s and show the step and the levels ready.
(function () {
  const box = document.getElementById("demo-banner");
  if (!box || box.classList.contains("failed")) return;
  const summary = document.getElementById("demo-summary");
  const bar = document.getElementById("demo-bar");
  async function poll() {
    try {
      const r = await fetch(box.dataset.url, {headers: {"Accept": "application/json"}});
      if (r.ok) {
        const p = await r.json();
        summary.textContent = p.summary;
        const board = document.getElementById("demo-board");
        if (board && p.corpus && board.hidden) {
          board.href = "/corpora/" + encodeURIComponent(p.corpus) + "/leaderboard/"; board.hidden = false;
        }
        if (p.steps) { bar.max = p.steps; bar.value = p.state === "ready" ? p.steps : p.step; }
        box.className = "demo-banner " + p.state;
        if (p.state === "ready" || p.state === "none" || p.state === "stopped") {
          box.querySelector("strong").textContent = p.state === "ready" ? "Demo loaded" : "Demo";
          const note = box.querySelector(".muted"); if (note) note.remove();
          const a = document.createElement("a");
          a.href = window.location.href; a.textContent = " Reload this page to see it.";
          summary.appendChild(a);
          return;
        }
        if (p.state === "failed") { box.querySelector("strong").textContent = "Demo not loaded"; return; }
      }
    } catch (e) { /* the server is busy or restarting: try again */ }
    setTimeout(poll, 3000);
  }
  setTimeout(poll, 3000);
})();
