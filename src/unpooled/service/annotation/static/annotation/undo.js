// Undo of the last answer, on the page after it (a task page or the empty queue's page): the form posts to the
// server, which decides whether it still may; with no form, the note saying why the answer can no longer be
// undone flashes (an undo key that silently did nothing was UX review #3).  annotate.js calls it from its own
// keys; elsewhere 'u' does.
(function () {
  "use strict";
  window.unpooledUndo = function () {
    const form = document.getElementById("undo-form");
    if (form) { form.requestSubmit(); return true; }
    const note = document.getElementById("saved-final");
    if (note) { note.classList.remove("flash"); void note.offsetWidth; note.classList.add("flash"); }
    return false;
  };
  // the server has the last answer: its task page's draft (annotate.js keeps it while the answer is on its way) goes
  document.querySelectorAll("[data-answered]").forEach(function (el) {
    try { window.localStorage.removeItem("unpooled-draft:" + el.dataset.answered); } catch (err) { /* no storage */ }
  });
  if (document.getElementById("task")) return;  // a task page: its keys are annotate.js's
  document.addEventListener("keydown", function (e) {
    const t = e.target;
    if (t && ["INPUT", "SELECT", "TEXTAREA"].includes(t.tagName) && t.type !== "radio" && t.type !== "checkbox") return;
    if (e.key === "u" && !e.ctrlKey && !e.metaKey && !e.altKey && window.unpooledUndo()) e.preventDefault();
  });
})();
