// The document page: each layer's checkbox shows or hides it.
document.querySelectorAll("#layers input[data-layer]").forEach(function (box) {
  box.addEventListener("change", function () {
    document.getElementById("doc-text").classList.toggle("show-" + box.dataset.layer, box.checked);
  });
});
// What covers a passage, in words below the layers: on a tap, a click or the keyboard's focus as well as on hover
// (the title), so that a phone or a keyboard reaches it too (UX review #15).
(function () {
  const info = document.getElementById("seg-info");
  const text = document.getElementById("doc-text");
  if (!info || !text) return;
  const say = function (e) {
    const seg = e.target.closest && e.target.closest(".seg[title]");
    if (seg) info.textContent = "\u201c" + seg.textContent + "\u201d: " + seg.title;
  };
  text.addEventListener("click", say);
  text.addEventListener("focusin", say);
})();
