"""The HTML reports opened in a real headless Chromium (tests/browser.py): no console errors,
nothing fetched from outside the file, every chart drawn with the points it should hold, and the
page's script (zoom, sorting) working. Screenshots are kept in build/test-artifacts/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_sim.cli.main import main
from browser import keep_screenshot

pytestmark = pytest.mark.browser


def _write(capsys, *args: str) -> dict | None:
    code = main(list(args))
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out) if "--json" in args else None


def _assert_clean(page) -> None:
    assert page.console_errors == [], page.console_errors
    assert page.external_requests == [], page.external_requests
    assert page.evaluate("document.body.getAttribute('data-report-ready')") == "1"  # the script ran to its end


def _box(page, selector: str) -> dict:
    return page.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                         " return {w: r.width, h: r.height}; })()")


def test_simulate_report_renders_roofline_timeline_and_memory(capsys, tmp_path: Path, chromium):
    report = tmp_path / "simulate.html"
    d = _write(capsys, "simulate", "--model", "llama3-8b", "--device", "h100", "--seq", "1024", "--html", str(report),
               "--json")
    roofline_ops = sum(1 for o in d["ops"] if o["flops"] > 0 and o["bytes_read"] + o["bytes_written"] > 0
                       and o["time_s"] > 0 and o["op_class"] != "communication")
    timed_ops = sum(1 for o in d["ops"] if o["time_s"] > 0)
    with chromium.open(report) as page:
        _assert_clean(page)
        # Roofline: a circle per op with FLOPs, inside the plot, and the device's ceilings.
        assert page.evaluate("document.querySelectorAll('svg.roofline circle.pt').length") == roofline_ops
        assert page.evaluate("document.querySelectorAll('svg.roofline polyline.ceiling').length") >= 1
        box = _box(page, "svg.roofline")
        assert box["w"] > 300 and box["h"] > 200
        inside = page.evaluate("""(() => {
            const svg = document.querySelector('svg.roofline');
            const plot = svg.querySelector('line.axis').getBBox();  // the x axis: the plot's width
            return Array.from(svg.querySelectorAll('circle.pt')).every(c => {
                const x = c.cx.baseVal.value; return x >= plot.x - 1 && x <= plot.x + plot.width + 1; });
        })()""")
        assert inside
        # Timeline: a rect per op that takes time on the compute stream, drawn with a width.
        assert page.evaluate("document.querySelectorAll('svg.timeline g.lane[data-lane=\"compute stream\"] rect.span').length") == timed_ops
        assert page.evaluate("document.querySelector('svg.timeline svg.zoom').getBoundingClientRect().width") > 500
        # Memory: the step line with its samples, the device limit and the peak marker.
        n = page.evaluate("document.querySelector('svg.memory polyline.series').points.numberOfItems")
        samples = int(page.evaluate("document.querySelector('svg.memory polyline.series').getAttribute('data-points')"))
        assert samples >= 2 and n == 2 * samples - 1  # a step: one corner between two samples
        assert page.evaluate("document.querySelectorAll('svg.memory line.ref').length") == 2
        assert page.evaluate("document.querySelectorAll('svg.memory circle.pt').length") == 1
        assert page.evaluate("document.querySelector('svg.memory').getAttribute('data-peak-bytes')") == str(d["peak_memory_bytes"])
        # Breakdowns: one bar per op class the report lists.
        assert page.evaluate("document.querySelectorAll('svg.breakdown-op_class g.bar').length") == len(d["breakdown"]["op_class"])
        # The script: the wheel zooms the timeline in, a double-click resets it.
        before = page.evaluate("document.querySelector('svg.timeline svg.zoom').getAttribute('viewBox')")
        page.evaluate("""(() => { const svg = document.querySelector('svg.timeline'); const r = svg.getBoundingClientRect();
            svg.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width / 2, clientY: r.top + 40,
                                                       bubbles: true, cancelable: true})); })()""")
        zoomed = page.evaluate("document.querySelector('svg.timeline svg.zoom').getAttribute('viewBox')")
        assert float(zoomed.split()[2]) == pytest.approx(0.8 * float(before.split()[2]), rel=1e-6)
        page.evaluate("document.querySelector('svg.timeline').dispatchEvent(new MouseEvent('dblclick', {bubbles: true}))")
        assert page.evaluate("document.querySelector('svg.timeline svg.zoom').getAttribute('viewBox')") == before
        # Sorting the slowest ops by time, ascending.
        page.evaluate("document.querySelectorAll('table.top-ops th')[5].click()")
        times = page.evaluate("Array.from(document.querySelectorAll('table.top-ops tbody tr')).map(r => parseFloat(r.cells[5].dataset.v))")
        assert times == sorted(times) and len(times) == 30
        assert page.console_errors == []
        keep_screenshot(page, "report-simulate")


def test_compare_train_plan_and_serve_reports_render(capsys, tmp_path: Path, chromium):
    pages = {
        "compare": ["compare", "--model", "llama3-70b", "--devices", "a100,h100,h200,mi300x", "--phase", "decode"],
        "train": ["train", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "16", "--tp", "2", "--pp", "4",
                  "--dp", "2", "--seq", "4096", "--microbatch", "1", "--global-batch", "16"],
        "plan": ["plan", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8,16", "--seq", "4096",
                 "--global-batch", "64", "--top", "3", "--quiet"],
        "serve": ["serve", "--model", "llama-3-8b", "--devices", "h100,a100", "--qps", "4", "--requests", "200", "--quiet"],
    }
    for name, args in pages.items():
        report = tmp_path / f"{name}.html"
        _write(capsys, *args, "--html", str(report))
        with chromium.open(report) as page:
            _assert_clean(page)
            charts = page.evaluate("Array.from(document.querySelectorAll('svg.chart')).map(s => "
                                   "[s.getAttribute('class'), s.getBoundingClientRect().width, s.children.length])")
            assert charts and all(w > 100 and k > 2 for _, w, k in charts), (name, charts)
            if name == "compare":
                assert page.evaluate("document.querySelectorAll('svg.roofline').length") == 4
                assert page.evaluate("document.querySelectorAll('svg.compare-stacked rect').length") >= 4
            elif name == "train":
                # 1F1B, 4 stages, 8 micro-batches: 16 passes per stage lane.
                assert page.evaluate("document.querySelectorAll('svg.pipeline g.lane[data-lane=\"stage 0\"] rect.span').length") == 16
            elif name == "serve":
                # Two devices' CDFs of 200 requests each, rising from left to right.
                pts = page.evaluate("Array.from(document.querySelectorAll('svg.cdf-ttft polyline.series')).map(p => p.points.numberOfItems)")
                assert pts == [200, 200]
                rising = page.evaluate("""Array.from(document.querySelectorAll('svg.cdf-ttft polyline.series')).every(p => {
                    const a = Array.from({length: p.points.numberOfItems}, (_, i) => p.points.getItem(i));
                    return a.every((q, i) => i === 0 || (q.x >= a[i - 1].x - 1e-3 && q.y <= a[i - 1].y + 1e-3)); })""")
                assert rising
            keep_screenshot(page, f"report-{name}")
