// A "Copy" button beside a secret shown once (a new API token) or a code to pass on: <button data-copy="ID"> copies
// the text of the element ID to the clipboard and says so; where the clipboard is refused (no secure context), the
// text is selected for Ctrl+C and the button says that instead.
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    const target = document.getElementById(button.dataset.copy);
    const said = document.getElementById(button.dataset.copy + "-copied");
    if (!target) return;
    button.hidden = false;  // without this script the button would do nothing: it stays hidden
    const say = function (text) { if (said) said.textContent = text; };
    const select = function () {
      const range = document.createRange();
      range.selectNodeContents(target);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    };
    button.addEventListener("click", function () {
      const text = target.textContent.trim();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { say("Copied."); },
          function () { select(); say("Selected: press Ctrl+C (or \u2318C) to copy."); });
      } else { select(); say("Selected: press Ctrl+C (or \u2318C) to copy."); }
    });
  });
})();
