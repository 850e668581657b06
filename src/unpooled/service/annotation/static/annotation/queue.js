// The work queue: the number of a task type starts it.
(function () {
  "use strict";
  document.addEventListener("keydown", function (e) {
    const a = document.querySelector('.queue a[data-key="' + e.key + '"]');
    if (a) { e.preventDefault(); a.click(); }
  });
})();
