// unpooled task pages: how long the item stays yours. The lease ends at #task's data-expires (the server's clock,
// data-now its time when it drew the page, so a wrong clock in this computer does not matter). From WARN before the
// end the page shows the time left; at the end it says what happens: the answer is still taken until another
// annotator takes the item (then the server says so and keeps nothing).
(function () {
  "use strict";
  const root = document.getElementById("task");
  const el = document.getElementById("lease-clock");
  if (!root || !el) return;
  const end = Date.parse(root.dataset.expires), serverNow = Date.parse(root.dataset.now);
  if (isNaN(end) || isNaN(serverNow)) return;
  const WARN = 5 * 60 * 1000;
  const skew = Date.now() - serverNow;  // this computer's clock minus the server's
  let state = "";
  function tick() {
    const left = end - (Date.now() - skew);
    if (left > WARN) { el.hidden = true; return; }
    el.hidden = false;
    if (left > 0) {
      const s = Math.ceil(left / 1000);
      el.querySelector(".left").textContent = Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
      if (state !== "warn") {  // said once to a screen reader, not every second
        state = "warn";
        el.classList.remove("over");
        el.querySelector(".what").textContent = " left on this item; after that it may go to another annotator.";
      }
    } else if (state !== "over") {
      state = "over";
      clearInterval(timer);
      el.classList.add("over");
      el.setAttribute("role", "alert");
      el.querySelector(".left").textContent = "";
      el.querySelector(".what").textContent = "Your time on this item has run out: send your answer now. It is " +
        "still taken unless another annotator has taken the item meanwhile.";
    }
  }
  const timer = setInterval(tick, 1000);
  tick();
})();
