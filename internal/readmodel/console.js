// pgoutbox operator console: refreshes the activity section without a full page reload by
// fetching the server-rendered fragment /console/activity every 15 seconds (paused while the
// tab is hidden). No library, no external request. Without JavaScript the page is complete;
// reload it to refresh.
(function () {
  "use strict";
  var box = document.getElementById("activity");
  if (!box || !window.fetch) { return; }
  var status = document.getElementById("refresh-status");
  var busy = false;
  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch("/console/activity", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        box.innerHTML = html;
        if (status) { status.textContent = "auto-refresh every 15 s: on"; }
      })
      .catch(function (e) {
        if (status) { status.textContent = "auto-refresh failed (" + e.message + "); showing the last data - see the as-of time"; }
      })
      .then(function () { busy = false; });
  }
  if (status) { status.textContent = "auto-refresh every 15 s: on"; }
  var button = document.getElementById("refresh-now");
  if (button) { button.hidden = false; button.addEventListener("click", refresh); }
  window.setInterval(refresh, 15000);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
})();
