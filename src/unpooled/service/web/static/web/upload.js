// Upload with a progress bar (falls back to the plain form without JavaScript).
(function () {
  const form = document.getElementById("upload-form");
  // the corpus's Participate page follows the corpus chosen
  const corpus = document.getElementById("id_corpus"), participate = document.getElementById("participate-link");
  if (corpus && participate) {
    const follow = function () { participate.href = "/corpora/" + encodeURIComponent(corpus.value) + "/participate/"; };
    corpus.addEventListener("change", follow); follow();
  }
  const bar = document.getElementById("upload-progress"), pct = document.getElementById("upload-percent");
  form.addEventListener("submit", function (ev) {
    if (!window.XMLHttpRequest || !window.FormData) return;
    ev.preventDefault();
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.action || window.location.href);
    xhr.setRequestHeader("X-Requested-With", "fetch");
    bar.hidden = false;
    xhr.upload.onprogress = function (e) {
      if (e.lengthComputable) { bar.value = Math.round(100 * e.loaded / e.total); pct.textContent = bar.value + "% sent"; }
    };
    xhr.onload = function () {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
      if (xhr.status === 202 && body.status_url) { window.location.href = body.status_url; return; }
      if (xhr.status === 400 && body.errors) {
        pct.textContent = "";
        bar.hidden = true;
        const msgs = Object.entries(body.errors).map(([k, v]) => (k === "__all__" ? "" : k + ": ") + v.join(" "));
        let p = document.getElementById("upload-errors");
        if (!p) { p = document.createElement("p"); p.id = "upload-errors"; p.className = "error"; p.setAttribute("role", "alert"); form.prepend(p); }
        p.textContent = msgs.join(" · ");
        return;
      }
      document.open(); document.write(xhr.responseText); document.close();
    };
    xhr.onerror = function () { pct.textContent = "the upload failed: the server could not be reached"; };
    xhr.send(new FormData(form));
  });
})();
