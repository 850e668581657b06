// The page after an answer: 'u' undoes it (the form posts to the server, which decides whether it still may).
(function () {
  "use strict";
  const form = document.getElementById("undo-form");
  if (!form) return;
  document.addEventListener("keydown", function (e) {
    const t = e.target;
    if (t && ["INPUT", "SELECT", "TEXTAREA"].includes(t.tagName) && t.type !== "radio" && t.type !== "checkbox") return;
    if (e.key === "u" && !e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); form.requestSubmit(); }
  });
})();
