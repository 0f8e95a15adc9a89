// The console's live updates (sagalog.services.gateway.console.live): one EventSource per
// page, on the address the page's <body data-live> names. A "changed" message lists the
// workflows the read model just changed (or says everything did); each region of the page
// that shows one of them (data-live-workflow) or shows them all (no data-live-workflow)
// gets the htmx event "live", and fetches itself again (its hx-get, hx-trigger="live");
// a growing list (data-live-arrivals) appends the rows of changed workflows it lacked.
// No inline script: the console's Content-Security-Policy allows script from 'self' only.
(function () {
  "use strict";
  var address = document.body.getAttribute("data-live");
  if (!address || !window.EventSource || !window.htmx) {
    return;
  }
  function refresh(change) {
    var shown = {};
    document.querySelectorAll("[data-live-region]").forEach(function (region) {
      var watched = region.getAttribute("data-live-workflow");
      if (watched !== null) {
        shown[watched] = true;
      }
      if (change.everything || watched === null ||
          change.workflows.indexOf(watched) >= 0) {
        window.htmx.trigger(region, "live");
      }
    });
    arrivals(change, shown);
  }
  // A list that grows as workflows arrive (the gates inbox: data-live-arrivals names where
  // to ask) asks for the changed workflows it does not show yet, and appends their rows.
  function arrivals(change, shown) {
    document.querySelectorAll("[data-live-arrivals]").forEach(function (list) {
      if (change.everything) {
        window.htmx.ajax("GET", window.location.href,
                         {target: "#inbox", select: "#inbox", swap: "outerHTML"});
        return;
      }
      var unseen = change.workflows.filter(function (id) { return !shown[id]; });
      if (unseen.length === 0) {
        return;
      }
      var address = list.getAttribute("data-live-arrivals");
      var query = unseen.map(function (id) {
        return "workflow=" + encodeURIComponent(id);
      }).join("&");
      window.htmx.ajax("GET", address + (address.indexOf("?") >= 0 ? "&" : "?") + query,
                       {target: "#" + list.id, swap: "beforeend"});
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
