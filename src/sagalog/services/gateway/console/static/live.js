// The console's live updates (sagalog.services.gateway.console.live): one EventSource per
// page, on the address the page's <body data-live> names. A "changed" message lists the
// workflows the read model just changed (or says everything did); each region of the page
// that shows one of them (data-live-workflow) or shows them all (no data-live-workflow)
// gets the htmx event "live", and fetches itself again (its hx-get, hx-trigger="live").
// No inline script: the console's Content-Security-Policy allows script from 'self' only.
(function () {
  "use strict";
  var address = document.body.getAttribute("data-live");
  if (!address || !window.EventSource || !window.htmx) {
    return;
  }
  function refresh(change) {
    document.querySelectorAll("[data-live-region]").forEach(function (region) {
      var watched = region.getAttribute("data-live-workflow");
      if (change.everything || watched === null ||
          change.workflows.indexOf(watched) >= 0) {
        window.htmx.trigger(region, "live");
      }
    });
  }
  // The address names the change the page was rendered at (since=): the server sends
  // at once what landed after it, on the first connection and on every reconnection.
  var source = new EventSource(address);
  source.addEventListener("changed", function (message) {
    refresh(JSON.parse(message.data));
  });
  window.addEventListener("pagehide", function () {
    source.close();
  });
})();
