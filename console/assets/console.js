// Live updates for the review console; every page works without this file.
// When the queue changes (a call held or decided, here or in any other process), the
// parts of the page marked data-live-part are fetched again from the page's own address
// (meta live-url: a GET, also after a form post) and replaced. The page carries the
// queue's mark from when it was made (meta live-mark), so a change between making the
// page and opening the event stream is not missed. Only markup the server rendered (and
// escaped) is inserted; nothing is evaluated.
(function () {
  "use strict";
  var parts = document.querySelectorAll("[data-live-part]");
  var url = document.querySelector('meta[name="live-url"]');
  var mark = document.querySelector('meta[name="live-mark"]');
  if (!parts.length || !url || !mark || !window.EventSource) { return; }
  var last = mark.getAttribute("content");
  var source = new EventSource("/events");
  source.addEventListener("queue", function (event) {
    if (event.data === last) { return; }
    last = event.data;
    refresh();
  });
  function refresh() {
    fetch(url.getAttribute("content"), { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text === null) { return; }
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live-part]").forEach(function (part) {
          var next = fresh.getElementById(part.id);
          if (next && next.innerHTML !== part.innerHTML) {
            part.replaceWith(document.importNode(next, true));
            document.body.setAttribute("data-updated", String(Date.now()));
          }
        });
      })
      .catch(function () { /* the next change tries again */ });
  }
})();
