// The document page: each layer's checkbox shows or hides it.
document.querySelectorAll("#layers input[data-layer]").forEach(function (box) {
  box.addEventListener("change", function () {
    document.getElementById("doc-text").classList.toggle("show-" + box.dataset.layer, box.checked);
  });
});
