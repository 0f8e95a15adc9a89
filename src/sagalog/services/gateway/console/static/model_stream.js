// A workflow's model output as the model writes it (/console/model-stream, server-sent
// events of delta, end and interrupted records). Text is set with textContent only.
(function () {
  "use strict";
  var section = document.querySelector("[data-model-stream]");
  if (!section || !window.EventSource) { return; }
  var text = section.querySelector("[data-model-stream-text]");
  var state = section.querySelector("[data-model-stream-state]");
  var current = null;
  var source = new EventSource(section.getAttribute("data-model-stream"));
  function record(event) {
    section.hidden = false;
    return JSON.parse(event.data);
  }
  source.addEventListener("delta", function (event) {
    var r = record(event);
    var attempt = r.call + "#" + r.attempt;
    if (attempt !== current) {
      if (current !== null) { text.textContent += "\n\n"; }
      current = attempt;
    }
    text.textContent += r.text;
    state.textContent = r.step + ": writing (attempt " + r.attempt + ")";
  });
  source.addEventListener("end", function (event) {
    var r = record(event);
    if (r.seq > 0) { state.textContent = r.step + ": written (attempt " + r.attempt + ")"; }
  });
  source.addEventListener("interrupted", function (event) {
    var r = record(event);
    text.textContent += "\n[attempt " + r.attempt + " interrupted]";
    state.textContent = r.step + ": attempt " + r.attempt + " interrupted, retrying";
  });
})();
