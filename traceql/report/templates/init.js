// traceql: draw every chart container ([data-chart]) from the inlined specs with vega-embed (SVG renderer).
// The specs are the JSON of the element #traceql-specs (type application/json); nothing is fetched.
(function () {
  "use strict";
  var specs = JSON.parse(document.getElementById("traceql-specs").textContent);
  var views = {};
  window.traceqlViews = views; // for people (and tests) poking at the charts from the console
  var jobs = [];
  var nodes = document.querySelectorAll("[data-chart]");
  for (var i = 0; i < nodes.length; i++) {
    (function (el) {
      var spec = specs[el.getAttribute("data-chart")];
      if (!spec) {
        el.setAttribute("data-rendered", "missing");
        el.textContent = "missing chart: " + el.getAttribute("data-chart");
        return;
      }
      jobs.push(
        vegaEmbed(el, spec, {
          mode: "vega-lite",
          renderer: "svg",
          // export to SVG/PNG works offline; no "open in editor" (a web site) and no source views
          actions: { export: true, source: false, compiled: false, editor: false },
        }).then(function (res) {
          views[el.id] = res.view;
          el.setAttribute("data-rendered", "ok");
        }).catch(function (err) {
          el.setAttribute("data-rendered", "error");
          el.textContent = "This chart could not be drawn: " + err;
          console.error("traceql chart " + el.id + ": " + err);
        })
      );
    })(nodes[i]);
  }
  Promise.all(jobs).then(function () {
    document.body.setAttribute("data-charts", "done");
  });
})();
