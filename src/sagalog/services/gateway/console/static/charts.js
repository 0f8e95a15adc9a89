// The console's charts: each <canvas data-chart="..."> holds a Chart.js configuration
// (data only, written by the server from the numbers its table shows); this draws it.
// A file, not an inline script, so the Content-Security-Policy stays script-src 'self'.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  if (typeof Chart === "undefined") {
    return; // the tables beside each chart still say everything
  }
  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
    new Chart(canvas, JSON.parse(canvas.dataset.chart));
  });
});
