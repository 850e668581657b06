// The answer is stored: hand the assignment back to Mechanical Turk (the form's action is one of its two hosts).
(function () {
  "use strict";
  const form = document.getElementById("turk");
  if (form) HTMLFormElement.prototype.submit.call(form);
})();
