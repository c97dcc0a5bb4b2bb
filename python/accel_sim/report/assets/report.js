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

  function formatTime(us) {
    if (us >= 1e6) return (us / 1e6).toPrecision(3) + " s";
    if (us >= 1e3) return (us / 1e3).toPrecision(3) + " ms";
    return us.toPrecision(3) + " µs";
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

    function redraw() {
      inner.setAttribute("viewBox", view.t0 + " 0 " + (view.t1 - view.t0) + " " + height);
      var labels = ticks.querySelectorAll("text");
      for (var k = 0; k < labels.length; k++) {
        var t = view.t0 + (view.t1 - view.t0) * k / (labels.length - 1);
        labels[k].textContent = formatTime(t);
      }
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
