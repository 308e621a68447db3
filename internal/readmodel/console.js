// pgoutbox operator console. Two small jobs, no library, no external request:
//  1. the overview's live part (#live) is re-fetched from /console/live every data-interval
//     seconds (server-rendered HTML from the same read functions) - paused while the tab is
//     hidden and while the operator is filling in a form inside it;
//  2. "copy command" buttons put the outboxctl equivalent of an action on the clipboard.
// Without JavaScript every page is complete: reload to refresh, select the command to copy.
(function () {
  "use strict";

  // copy buttons (event delegation: they also work inside the re-fetched live part)
  function showCopyButtons(root) {
    var bs = root.querySelectorAll("button.copy");
    for (var i = 0; i < bs.length; i++) { bs[i].hidden = false; }
  }
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest ? ev.target.closest("button.copy") : null;
    if (!b) { return; }
    var text = b.getAttribute("data-copy") || "";
    var done = function () { b.textContent = "copied"; window.setTimeout(function () { b.textContent = "copy command"; }, 2000); };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () { b.textContent = "select the text to copy"; });
    } else {
      b.textContent = "select the text to copy";
    }
  });
  showCopyButtons(document);

  var live = document.getElementById("live");
  if (!live || !window.fetch) { return; }
  var status = document.getElementById("refresh-status");
  var seconds = parseInt(live.getAttribute("data-interval"), 10) || 5;
  var busy = false;
  function say(text) { if (status) { status.textContent = text; } }
  function editing() {
    var a = document.activeElement;
    if (a && live.contains(a) && a.closest && a.closest("form")) { return true; }
    return live.querySelector("details[open] form") !== null;
  }
  function refresh(force) {
    if (busy || document.hidden || (!force && editing())) { return; }
    busy = true;
    fetch("/console/live", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        showCopyButtons(live);
        say("live: updates every " + seconds + " s");
      })
      .catch(function (e) {
        say("live update failed (" + e.message + "); showing the last data - see the as-of time");
      })
      .then(function () { busy = false; });
  }
  say("live: updates every " + seconds + " s");
  var button = document.getElementById("refresh-now");
  if (button) { button.hidden = false; button.addEventListener("click", function () { refresh(true); }); }
  window.setInterval(refresh, seconds * 1000);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
})();
