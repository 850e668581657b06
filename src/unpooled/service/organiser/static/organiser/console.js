// The organiser console: choosing a corpus shows its pages at once.
(function () {
  "use strict";
  const select = document.getElementById("corpus");
  if (select && select.form) select.addEventListener("change", function () { select.form.submit(); });
})();
