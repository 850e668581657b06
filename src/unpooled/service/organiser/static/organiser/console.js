// The organiser console: choosing a corpus shows its pages at once.
(function () {
  "use strict";
  const select = document.getElementById("corpus");
  if (select && select.form) select.addEventListener("change", function () { select.form.submit(); });
  // an action that cannot be taken back asks first (the form's data-confirm says what it does)
  document.addEventListener("submit", function (e) {
    const form = e.target;
    if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) e.preventDefault();
  });
})();
