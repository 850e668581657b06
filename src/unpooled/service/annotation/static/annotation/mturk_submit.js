// The answer is stored: hand the assignment back to Mechanical Turk (the form's action is one of its two hosts).
(function () {
  "use strict";
  const form = document.getElementById("turk");
  // the answer's draft, kept while it was on its way (annotate.js), goes
  try { if (form) window.localStorage.removeItem("unpooled-draft:" + form.dataset.answered); } catch (err) { /* no storage */ }
  if (form) HTMLFormElement.prototype.submit.call(form);
})();
