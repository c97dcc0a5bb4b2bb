// accel-sim HTML report: sortable tables and a zoomable timeline. No external resources.
(function () {
  "use strict";

  function cellValue(cell) {
    var v = cell.getAttribute("data-v");
    if (v !== null) return parseFloat(v);
    return cell.textContent.trim().toLowerCase();
  }

  function makeSortable(table) {
    var headers = table.querySelectorAll("thead th");
    headers.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        if (!body) return;
        var asc = !th.classList.contains("sorted-asc");
        headers.forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(asc ? "sorted-asc" : "sorted-desc");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a.cells[col]), y = cellValue(b.cells[col]);
          if (x < y) return asc ? -1 : 1;
          if (x > y) return asc ? 1 : -1;
          return 0;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  // A time axis's unit and round ticks, as svg.py's time_ticks writes them: the unit from the
  // span shown, evenly spaced round values in it, each written with the decimals the step needs.
  var SI_PREFIXES = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];

  function stepDecimals(step) {
    step = Math.abs(step);
    for (var d = 0; d < 13; d++) {
      var scaled = step * Math.pow(10, d);
      if (Math.abs(scaled - Math.round(scaled)) <= 1e-6 * Math.max(scaled, 1e-300)) return d;
    }
    return 12;
  }

  function niceStep(raw) {
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * mag >= raw * (1 - 1e-9)) return steps[i] * mag;
    return 10 * mag;
  }

  function tickLabels(ticks) {
    if (!ticks.length) return [];
    var step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : (Math.abs(ticks[0]) || 1);
    var largest = Math.max.apply(null, ticks.map(Math.abs));
    var factor = 1, prefix = "";
    if (largest >= 1e4) {
      for (var i = 0; i < SI_PREFIXES.length; i++) {
        if (largest >= SI_PREFIXES[i][0]) { factor = SI_PREFIXES[i][0]; prefix = SI_PREFIXES[i][1]; break; }
      }
    }
    var d = stepDecimals(step / factor);
    return ticks.map(function (t) {
      var v = t / factor;
      if (Math.abs(v) < step / factor * 1e-9) v = 0;
      if (v === 0 && prefix) return "0";
      return v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }) + (prefix ? " " + prefix : "");
    });
  }

  function timeTicks(t0s, t1s) {
    var span = t1s - t0s;
    var factor = span >= 1 ? 1 : span >= 1e-3 ? 1e3 : 1e6;
    while (factor > 1 && t1s * factor >= 1e4) factor /= 1e3;  // no 10,000 us: ms
    var unit = factor === 1 ? "s" : factor === 1e3 ? "ms" : "µs";
    var lo = t0s * factor, hi = t1s * factor;
    var step = niceStep((hi - lo) / 6);
    var ticks = [];
    for (var i = Math.ceil(lo / step - 1e-9); i <= Math.floor(hi / step + 1e-9); i++) {
      ticks.push(parseFloat((i * step).toFixed(12)));
    }
    return { unit: unit, seconds: ticks.map(function (t) { return t / factor; }), labels: tickLabels(ticks) };
  }

  // A timeline: wheel zooms around the pointer, drag pans, double-click resets.
  function makeZoomable(svg) {
    var inner = svg.querySelector("svg.zoom");
    var ticks = svg.querySelector("g.time-ticks");
    if (!inner || !ticks) return;
    var total = parseFloat(svg.getAttribute("data-total-us"));
    var plotX = parseFloat(svg.getAttribute("data-plot-x"));
    var plotW = parseFloat(svg.getAttribute("data-plot-w"));
    var height = inner.viewBox.baseVal.height;
    var view = { t0: 0, t1: total };

    var title = svg.querySelector(":scope > text.x-label");
    var tickY = parseFloat(ticks.getAttribute("data-y")) + 15;

    function redraw() {
      inner.setAttribute("viewBox", view.t0 + " 0 " + (view.t1 - view.t0) + " " + height);
      var axis = timeTicks(view.t0 / 1e6, view.t1 / 1e6);
      while (ticks.firstChild) ticks.removeChild(ticks.firstChild);
      axis.seconds.forEach(function (t, k) {
        var text = document.createElementNS("http://www.w3.org/2000/svg", "text");
        text.setAttribute("class", "tick x-tick");
        text.setAttribute("x", (plotX + plotW * (t * 1e6 - view.t0) / (view.t1 - view.t0)).toFixed(2));
        text.setAttribute("y", tickY);
        text.setAttribute("text-anchor", "middle");
        text.textContent = axis.labels[k];
        ticks.appendChild(text);
      });
      if (title) title.textContent = "time (" + axis.unit + ")";
    }

    function toUs(clientX) {
      var box = svg.getBoundingClientRect();
      var scale = box.width / svg.viewBox.baseVal.width;
      var x = (clientX - box.left) / scale - plotX;
      return view.t0 + (view.t1 - view.t0) * Math.min(Math.max(x / plotW, 0), 1);
    }

    svg.addEventListener("wheel", function (e) {
      e.preventDefault();
      var at = toUs(e.clientX);
      var f = e.deltaY < 0 ? 0.8 : 1.25;
      var w = Math.min(total, Math.max((view.t1 - view.t0) * f, total * 1e-6));
      var t0 = at - (at - view.t0) * w / (view.t1 - view.t0);
      t0 = Math.min(Math.max(t0, 0), total - w);
      view = { t0: t0, t1: t0 + w };
      redraw();
    }, { passive: false });

    var drag = null;
    svg.addEventListener("mousedown", function (e) { drag = { x: e.clientX, t0: view.t0, t1: view.t1 }; });
    window.addEventListener("mouseup", function () { drag = null; });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var box = svg.getBoundingClientRect();
      var scale = box.width / svg.viewBox.baseVal.width;
      var dt = (e.clientX - drag.x) / scale / plotW * (drag.t1 - drag.t0);
      var w = drag.t1 - drag.t0;
      var t0 = Math.min(Math.max(drag.t0 - dt, 0), total - w);
      view = { t0: t0, t1: t0 + w };
      redraw();
    });
    svg.addEventListener("dblclick", function () { view = { t0: 0, t1: total }; redraw(); });
  }

  document.querySelectorAll("table.sortable").forEach(makeSortable);
  document.querySelectorAll("svg.lanes").forEach(makeZoomable);
  document.body.setAttribute("data-report-ready", "1");
})();
