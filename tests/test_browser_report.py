"""The HTML reports opened in a real headless Chromium (tests/browser.py): no console errors,
nothing fetched from outside the file, every chart drawn with the points it should hold, and the
page's script (zoom, sorting) working. Every chart's axes are read back as drawn: each tick label
must be a number (no milli prefix), sit where its value belongs, and the ticks must bound the
data, which must read back, through those labels, as the figures the command prints with --json.
Screenshots are kept in build/test-artifacts/."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from accel_sim.cli.main import main
from browser import keep_screenshot

pytestmark = pytest.mark.browser

_GIB = 1024.0**3

# Every chart with axes, as drawn: its ticks (position, label), axis titles, the plot area (the
# axis lines), its series' vertices, markers and reference lines, all in the chart's own
# coordinates (a tick's position is its grid line's). A chart is the parent of a g.axes: an svg.chart of a page, or a g.panel of a file
# holding several charts.
_READ_CHARTS = """(() => Array.from(document.querySelectorAll('g.axes')).map(axes => {
    const box = axes.parentNode, num = (el, a) => parseFloat(el.getAttribute(a));
    const [xAxis, yAxis] = Array.from(axes.querySelectorAll(':scope > line.axis'));
    // A tick is its grid line (its exact position) and its label, in the order drawn.
    const grid = Array.from(axes.querySelectorAll(':scope > line.grid')), ticks = Array.from(axes.querySelectorAll(':scope > text.tick'));
    const labels = Array.from(axes.querySelectorAll(':scope > text.label'));
    const pair = (at, texts) => at.length === texts.length ? texts.map((t, i) => [at[i], t.textContent]) : texts.map(t => [NaN, t.textContent]);
    const points = p => Array.from({length: p.points.numberOfItems}, (_, i) => [p.points.getItem(i).x, p.points.getItem(i).y]);
    return {
        cls: box.getAttribute('class'),
        xScale: axes.getAttribute('data-x-scale'), yScale: axes.getAttribute('data-y-scale'),
        plot: {x0: num(xAxis, 'x1'), x1: num(xAxis, 'x2'), y0: num(yAxis, 'y2'), y1: num(yAxis, 'y1')},
        xTicks: pair(grid.filter(l => num(l, 'x1') === num(l, 'x2')).map(l => num(l, 'x1')), ticks.filter(t => t.getAttribute('text-anchor') === 'middle')),
        yTicks: pair(grid.filter(l => num(l, 'y1') === num(l, 'y2')).map(l => num(l, 'y1')), ticks.filter(t => t.getAttribute('text-anchor') === 'end')),
        xLabel: labels.length > 0 ? labels[0].textContent : '',
        yLabel: labels.length > 1 ? labels[1].textContent : '',
        series: Array.from(box.querySelectorAll(':scope > polyline.series')).map(p => ({name: p.dataset.series, points: points(p)})),
        markers: Array.from(box.querySelectorAll('circle.pt')).map(c => [c.cx.baseVal.value, c.cy.baseVal.value]),
        refs: Array.from(box.querySelectorAll(':scope > line.ref')).map(l => num(l, 'y1')),
    };
}))()"""

# A timeline (svg.lanes): its time ticks, title, plot span and the view its zoom shows (in us).
_READ_LANES = """(() => Array.from(document.querySelectorAll('svg.lanes')).map(svg => {
    const view = svg.querySelector('svg.zoom').getAttribute('viewBox').split(' ').map(parseFloat);
    return {cls: svg.getAttribute('class'), plotX: parseFloat(svg.dataset.plotX), plotW: parseFloat(svg.dataset.plotW),
            totalUs: parseFloat(svg.dataset.totalUs), viewUs: [view[0], view[0] + view[2]],
            ticks: Array.from(svg.querySelectorAll('g.time-ticks text.x-tick')).map(t => [parseFloat(t.getAttribute('x')), t.textContent]),
            label: (svg.querySelector(':scope > text.x-label') || {}).textContent || ''};
}))()"""

_TICK = re.compile(r"^(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?:e([+-]\d+))?(?: ([kMGTP]))?$")
_SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_UNITS = {"s": 1.0, "ms": 1e3, "µs": 1e6}


def tick_value(text: str) -> float:
    """A tick label's number: 0.25 · 2,500 · 20 k · 1e-05; milli or micro prefixes are refused."""
    m = _TICK.match(text)
    assert m, f"the tick label {text!r} is not a number (with an SI prefix from k up at most)"
    return float(m.group(1).replace(",", "")) * 10 ** int(m.group(2) or 0) * _SI.get(m.group(3), 1.0)


def time_factor(label: str) -> float:
    """The unit an axis title names, '(ms)', as its factor from seconds."""
    m = re.search(r"\((s|ms|µs)\)$", label)
    assert m, f"the axis title {label!r} names no time unit"
    return _TIME_UNITS[m.group(1)]


class Axis:
    """An axis as drawn: the values its labels say, at their pixels. Every label must sit where
    its value belongs on one linear (or log: `scale`, else whichever fits) map, which then reads
    any pixel back as a value."""

    def __init__(self, ticks: list, scale: str | None, what: str):
        assert len(ticks) >= 2, f"{what}: {len(ticks)} tick labels {ticks}"
        self.what = what
        self.values = [tick_value(text) for _, text in ticks]
        self.pixels = [p for p, _ in ticks]
        assert len(set(self.values)) == len(self.values), f"{what}: repeated labels {ticks}"
        assert self.values == sorted(self.values), f"{what}: labels out of order {ticks}"
        for self.log in ([scale == "log"] if scale else [False] + ([True] if self.values[0] > 0 else [])):
            self.p0, self.u0 = self.pixels[0], self._u(self.values[0])
            self.slope = (self.pixels[-1] - self.p0) / (self._u(self.values[-1]) - self.u0)
            misplaced = [(text, p, self.pixel(v)) for (p, text), v in zip(ticks, self.values) if not abs(self.pixel(v) - p) < 0.1]
            if not misplaced:
                break
        assert not misplaced, f"{what}: labels drawn away from where their values belong: (label, at, belongs at) {misplaced}"

    def _u(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def pixel(self, v: float) -> float:
        return self.p0 + (self._u(v) - self.u0) * self.slope

    def value(self, p: float) -> float:
        u = self.u0 + (p - self.p0) / self.slope
        return 10**u if self.log else u

    @property
    def lo(self) -> float:
        return self.values[0]

    @property
    def hi(self) -> float:
        return self.values[-1]

    def bounds(self, values: list) -> None:
        """The first and last ticks bound these values."""
        span = self.hi - self.lo
        assert self.lo <= min(values) + 1e-9 * span and max(values) <= self.hi + 1e-9 * span, \
            f"{self.what}: ticks {self.lo:g}..{self.hi:g} do not bound the data {min(values):g}..{max(values):g}"


def read_charts(page) -> list[dict]:
    return page.evaluate(_READ_CHARTS)


def the_chart(charts: list[dict], cls: str) -> dict:
    (c,) = [c for c in charts if c["cls"] == cls]
    return c


def check_chart(c: dict) -> tuple[Axis, Axis]:
    """Titled axes with numeric, consistent ticks inside the plot; every point inside it too."""
    name = c["cls"]
    assert c["xLabel"].strip() and c["yLabel"].strip(), (name, c["xLabel"], c["yLabel"])
    x = Axis(c["xTicks"], c["xScale"], f"{name}: x axis")
    y = Axis(c["yTicks"], c["yScale"], f"{name}: y axis")
    plot = c["plot"]
    assert all(plot["x0"] - 0.01 <= p <= plot["x1"] + 0.01 for p in x.pixels), (name, x.pixels, plot)
    assert all(plot["y1"] - 0.01 <= p <= plot["y0"] + 0.01 for p in y.pixels), (name, y.pixels, plot)
    points = [q for s in c["series"] for q in s["points"]] + c["markers"]
    outside = [q for q in points if not (plot["x0"] - 0.5 <= q[0] <= plot["x1"] + 0.5 and plot["y1"] - 0.5 <= q[1] <= plot["y0"] + 0.5)]
    assert not outside, f"{name}: {len(outside)} points outside the axes, e.g. {outside[:3]} (plot {plot})"
    assert all(plot["y1"] - 0.5 <= r <= plot["y0"] + 0.5 for r in c["refs"]), (name, c["refs"], plot)
    return x, y


def series_values(c: dict, name: str, x: Axis, y: Axis) -> list[tuple[float, float]]:
    """A series' vertices read back through the axes' labels."""
    s = next(s for s in c["series"] if s["name"] == name)
    return [(x.value(px), y.value(py)) for px, py in s["points"]]


def check_lanes(t: dict, total_s: float | None = None) -> None:
    """A timeline's time axis: a unit in its title, numeric ticks, each at the time it says in
    the view shown (all of it, or the zoomed part); the whole spans `total_s` where given."""
    factor = time_factor(t["label"])
    if total_s is not None:
        assert t["totalUs"] == pytest.approx(total_s * 1e6, rel=1e-9)
    t0, t1 = (v / 1e6 for v in t["viewUs"])
    assert len(t["ticks"]) >= 4, t
    for px, text in t["ticks"]:
        at = t0 + (px - t["plotX"]) / t["plotW"] * (t1 - t0)
        # (positions are written to 0.01 px)
        assert tick_value(text) / factor == pytest.approx(at, abs=0.01 / t["plotW"] * (t1 - t0)), (t["cls"], text, px)
        assert t0 - 1e-9 * t1 <= at <= t1 * (1 + 1e-9)


def _write(capsys, *args: str) -> dict | None:
    capsys.readouterr()  # what came before (a screenshot's path)
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
        charts = read_charts(page)
        assert sorted(c["cls"] for c in charts) == ["chart memory", "chart roofline"]
        # The roofline's log axes read each op back at its intensity (FLOPs over bytes read and
        # written) and its achieved FLOP/s (FLOPs over its time), as --json lists them.
        roofline = the_chart(charts, "chart roofline")
        x, y = check_chart(roofline)
        ops = [o for o in d["ops"] if o["flops"] > 0 and o["bytes_read"] + o["bytes_written"] > 0
               and o["time_s"] > 0 and o["op_class"] != "communication"]
        marks = roofline["markers"]
        assert sorted(x.value(px) for px, _ in marks) == pytest.approx(
            sorted(o["flops"] / (o["bytes_read"] + o["bytes_written"]) for o in ops), rel=1e-3)
        assert sorted(y.value(py) for _, py in marks) == pytest.approx(sorted(o["flops"] / o["time_s"] for o in ops), rel=1e-3)
        # Live memory: GiB against time in the unit its title names; the line's top is the peak,
        # bounded by the top tick, and it ends at the latency.
        memory = the_chart(charts, "chart memory")
        x, y = check_chart(memory)
        assert memory["yLabel"] == "live memory (GiB)"
        live = series_values(memory, "live memory", x, y)
        peak_gib = d["peak_memory_bytes"] / _GIB
        assert max(v for _, v in live) == pytest.approx(peak_gib, abs=0.002 * (y.hi - y.lo))
        y.bounds([peak_gib, 80.0])  # and the device's 80 GiB
        assert max(t for t, _ in live) == pytest.approx(d["latency_s"] * time_factor(memory["xLabel"]), rel=1e-3)
        x.bounds([t for t, _ in live])
        # The timeline's time axis, at full view.
        (lanes,) = page.evaluate(_READ_LANES)
        check_lanes(lanes, d["latency_s"])
        # The script: the wheel zooms the timeline in, a double-click resets it.
        before = page.evaluate("document.querySelector('svg.timeline svg.zoom').getAttribute('viewBox')")
        page.evaluate("""(() => { const svg = document.querySelector('svg.timeline'); const r = svg.getBoundingClientRect();
            svg.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width / 2, clientY: r.top + 40,
                                                       bubbles: true, cancelable: true})); })()""")
        zoomed = page.evaluate("document.querySelector('svg.timeline svg.zoom').getAttribute('viewBox')")
        assert float(zoomed.split()[2]) == pytest.approx(0.8 * float(before.split()[2]), rel=1e-6)
        (lanes,) = page.evaluate(_READ_LANES)  # the ticks redrawn for the part shown
        assert lanes["viewUs"][1] - lanes["viewUs"][0] == pytest.approx(0.8 * d["latency_s"] * 1e6, rel=1e-6)
        check_lanes(lanes, d["latency_s"])
        page.evaluate("""(() => { const svg = document.querySelector('svg.timeline'); const r = svg.getBoundingClientRect();
            for (let i = 0; i < 24; i++) svg.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width / 2,
                clientY: r.top + 40, bubbles: true, cancelable: true})); })()""")
        (lanes,) = page.evaluate(_READ_LANES)  # 0.8^25 of 25.6 ms: 97 us, around the middle
        assert lanes["label"] == "time (ms)"  # 12.8 ms in microseconds would pass 10,000
        check_lanes(lanes, d["latency_s"])
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
                  "--dp", "2", "--seq", "4096", "--microbatch", "1", "--global-batch", "16", "--json"],
        "plan": ["plan", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8,16", "--seq", "4096",
                 "--global-batch", "64", "--top", "3", "--train-tokens", "2T", "--quiet", "--json"],
        "serve": ["serve", "--model", "llama-3-8b", "--devices", "h100,a100", "--qps", "4", "--requests", "200", "--quiet",
                  "--json"],
    }
    for name, args in pages.items():
        report = tmp_path / f"{name}.html"
        d = _write(capsys, *args, "--html", str(report))
        with chromium.open(report) as page:
            _assert_clean(page)
            charts = page.evaluate("Array.from(document.querySelectorAll('svg.chart')).map(s => "
                                   "[s.getAttribute('class'), s.getBoundingClientRect().width, s.children.length])")
            assert charts and all(w > 100 and k > 2 for _, w, k in charts), (name, charts)
            drawn = read_charts(page)
            axes = {c["cls"]: check_chart(c) for c in drawn}  # every chart with axes
            if name == "compare":
                assert page.evaluate("document.querySelectorAll('svg.roofline').length") == 4
                assert page.evaluate("document.querySelectorAll('svg.compare-stacked rect').length") >= 4
                assert [c["cls"] for c in drawn] == ["chart roofline"] * 4
            elif name == "train":
                # 1F1B, 4 stages, 8 micro-batches: 16 passes per stage lane.
                assert page.evaluate("document.querySelectorAll('svg.pipeline g.lane[data-lane=\"stage 0\"] rect.span').length") == 16
                (lanes,) = page.evaluate(_READ_LANES)
                check_lanes(lanes)  # (its span is the core's schedule of the step, not the closed-form step_s)
            elif name == "plan":
                # Days to train 2e12 tokens and MFU of each size's best configuration, read back.
                best = {run["gpus"]: run["best"][0] for run in d}
                days = the_chart(drawn, "chart plan-days")
                x, y = axes["chart plan-days"]
                assert days["yLabel"] == "time to train (days)" and days["xLabel"] == "GPUs"
                got = series_values(days, "NVIDIA DGX H100", x, y)
                want = [(g, 2e12 / best[g]["tokens_per_s"] / 86400) for g in (8, 16)]
                assert [g for g, _ in got] == pytest.approx([g for g, _ in want], rel=1e-3)
                assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-3)
                y.bounds([v for _, v in want])
                mfu = the_chart(drawn, "chart plan-mfu")
                x, y = axes["chart plan-mfu"]
                assert mfu["yLabel"] == "MFU (%)"
                assert [v for _, v in series_values(mfu, "NVIDIA DGX H100", x, y)] == pytest.approx(
                    [best[g]["mfu"] * 100 for g in (8, 16)], abs=0.002 * (y.hi - y.lo))
                assert y.lo == 0
            elif name == "serve":
                # Two devices' CDFs of 200 requests each, rising from left to right.
                pts = page.evaluate("Array.from(document.querySelectorAll('svg.cdf-ttft polyline.series')).map(p => p.points.numberOfItems)")
                assert pts == [200, 200]
                rising = page.evaluate("""Array.from(document.querySelectorAll('svg.cdf-ttft polyline.series')).every(p => {
                    const a = Array.from({length: p.points.numberOfItems}, (_, i) => p.points.getItem(i));
                    return a.every((q, i) => i === 0 || (q.x >= a[i - 1].x - 1e-3 && q.y <= a[i - 1].y + 1e-3)); })""")
                assert rising
                check_serve_charts(drawn, axes, d["results"])
            keep_screenshot(page, f"report-{name}")


def check_serve_charts(drawn: list[dict], axes: dict, results: list[dict]) -> None:
    """A serve report's charts read back as --json states the runs: each CDF ends at the slowest
    request and crosses one half at the median; the KV cache and queue charts peak at the most the
    run reached, the queue on whole-number ticks."""
    names = {"h100_sxm": "NVIDIA H100 SXM5 80GB", "a100_80gb": "NVIDIA A100 SXM4 80GB"}
    for cls, key in (("chart cdf cdf-ttft", "ttft_s"), ("chart cdf cdf-e2e", "e2e_s")):
        c = the_chart(drawn, cls)
        x, y = axes[cls]
        factor = time_factor(c["xLabel"])
        assert len(x.values) >= 3 and y.lo == 0 and y.hi == 1
        for r in results:
            cdf = series_values(c, names[r["device"]], x, y)
            assert cdf[-1][1] == pytest.approx(1.0, abs=1e-3)
            assert cdf[-1][0] / factor == pytest.approx(r[key]["max"], rel=2e-3)
            x.bounds([v for v, _ in cdf])
            median = next(v for v, f in cdf if f >= 0.5 - 1e-6) / factor
            assert median == pytest.approx(r[key]["p50"], rel=0.01)
    kv, queue = the_chart(drawn, "chart serve-kv"), the_chart(drawn, "chart serve-queue")
    assert kv["yLabel"].endswith("(%)") and time_factor(kv["xLabel"]) == 1.0 and time_factor(queue["xLabel"]) == 1.0
    y_queue = axes["chart serve-queue"][1]
    assert all(v == int(v) for v in y_queue.values), queue["yTicks"]  # a count
    for r in results:
        device = names[r["device"]]
        most_kv = max(v for _, v in series_values(kv, device, *axes["chart serve-kv"]))
        assert most_kv == pytest.approx(r["kv_utilization"]["max"] * 100, abs=0.002 * 100)
        waiting = series_values(queue, device, *axes["chart serve-queue"])
        assert max(v for _, v in waiting) == pytest.approx(r["waiting"]["max"], abs=0.002 * (y_queue.hi - y_queue.lo))
        y_queue.bounds([v for _, v in waiting])
        # The bins the charts draw hold the run's most, and tile it from the first arrival.
        bins = r["timeline"]
        assert max(b["waiting_max"] for b in bins) == r["waiting"]["max"]
        assert max(b["kv_utilization_max"] for b in bins) == r["kv_utilization"]["max"]
        assert all(b["start_s"] == a["t_s"] for a, b in zip(bins, bins[1:]))


def test_serve_report_reads_as_the_command_prints(capsys, tmp_path: Path, chromium):
    """A busy run (12 requests/s of 1000 + 200 tokens): the queue waits up to a few requests at
    moments a sampled timeline misses. The queue chart's top is the most the command reports,
    its ticks whole numbers; the CDFs carry numbers on their time axes."""
    report = tmp_path / "serve.html"
    d = _write(capsys, "serve", "--model", "llama3-8b", "--device", "h100", "--qps", "12", "--requests", "2000",
               "--input-len", "1000", "--output-len", "200", "--quiet", "--json", "--html", str(report))
    (r,) = d["results"]
    assert r["waiting"]["max"] >= 2  # a queue worth drawing
    with chromium.open(report) as page:
        _assert_clean(page)
        drawn = read_charts(page)
        axes = {c["cls"]: check_chart(c) for c in drawn}
        assert sorted(axes) == ["chart cdf cdf-e2e", "chart cdf cdf-ttft", "chart serve-kv", "chart serve-queue"]
        check_serve_charts(drawn, axes, d["results"])
        keep_screenshot(page, "report-serve-busy")


def test_serve_plan_report_draws_the_pareto_front_it_prints(capsys, tmp_path: Path, chromium):
    """serve-plan --html: the Pareto front's line reads back, through the axes, as the front --json
    gives; a marker for every layout meeting the SLOs (and each front point); the ranked table and
    the launch commands of the best layout."""
    report = tmp_path / "serve-plan.html"
    d = _write(capsys, "serve-plan", "--model", "llama-3-8b", "--devices", "h100,a100", "--qps", "20", "--input-len", "1000",
               "--output-len", "200", "--slo-ttft-p99", "800ms", "--slo-tpot-p99", "40ms", "--requests", "200",
               "--tp", "1,2", "--pp", "1", "--quiet", "--json", "--html", str(report))
    ranked = [l for l in d["layouts"] if l["verdict"] in ("best", "feasible")]
    assert len(d["pareto"]) >= 2 and ranked
    with chromium.open(report) as page:
        _assert_clean(page)
        drawn = read_charts(page)
        (c,) = drawn
        x, y = check_chart(c)
        assert c["cls"] == "chart pareto" and c["xLabel"].startswith("output tokens/s per user")
        got = series_values(c, "Pareto front", x, y)
        want = [(p["tokens_per_s_per_user"], p["output_tokens_per_s_per_gpu"]) for p in d["pareto"]]
        assert [g for g, _ in got] == pytest.approx([w for w, _ in want], abs=0.002 * (x.hi - x.lo))
        assert [v for _, v in got] == pytest.approx([v for _, v in want], abs=0.002 * (y.hi - y.lo))
        x.bounds([w for w, _ in want])
        y.bounds([v for _, v in want])
        assert len(c["markers"]) == len(ranked) + len(d["pareto"])
        rows = page.evaluate("document.querySelectorAll('table.serve-plan-ranked tbody tr').length")
        assert rows == min(25, len(ranked))
        launch = page.evaluate("document.querySelector('#launch').textContent")
        assert "vllm serve" in launch and f"--tensor-parallel-size {d['best']['tp']}" in launch
        keep_screenshot(page, "report-serve-plan")


def test_sweep_and_fit_plots_read_back_their_figures(capsys, tmp_path: Path, chromium):
    """sweep --plot .html and fit --plot .svg: the axes read each point back as --json gives it."""
    plot = tmp_path / "sweep.html"
    d = _write(capsys, "sweep", "--model", "llama3-8b", "--devices", "a100,h100", "--vary", "batch=1,2,4,8,16,32,64",
               "--phase", "decode", "--plot", str(plot), "--json", "--quiet")
    with chromium.open(plot) as page:
        _assert_clean(page)
        (c,) = read_charts(page)
        x, y = check_chart(c)
        assert c["xLabel"] == "batch (sequences)" and c["yLabel"] == "latency (ms)"
        assert x.values == [1, 2, 4, 8, 16, 32, 64]
        for device in ("a100_80gb", "h100_sxm"):
            want = [(p["batch"], p["latency_s"] * 1e3) for p in d["points"] if p["device"] == device]
            got = series_values(c, device, x, y)
            assert [g for g, _ in got] == pytest.approx([g for g, _ in want], rel=1e-3)
            assert [v for _, v in got] == pytest.approx([v for _, v in want], abs=0.002 * (y.hi - y.lo))
            y.bounds([v for _, v in want])
    plot = tmp_path / "fit.svg"
    d = _write(capsys, "fit", "--model", "gpt2", "--devices", "v100,a100-40gb", "--axis", "batch", "--train", "--seq", "1024",
               "--plot", str(plot), "--json")
    with chromium.open(plot) as page:
        assert page.console_errors == [] and page.external_requests == []
        (c,) = read_charts(page)
        x, y = check_chart(c)
        assert c["xLabel"] == "batch (sequences)" and c["yLabel"] == "allocator peak (GiB)"
        got = series_values(c, "peak", x, y)
        want = [(p["value"], p["peak_bytes"] / _GIB) for p in d["probes"]]
        assert [g for g, _ in got] == pytest.approx([g for g, _ in want], abs=0.002 * (x.hi - x.lo))
        assert [v for _, v in got] == pytest.approx([v for _, v in want], abs=0.002 * (y.hi - y.lo))
        x.bounds([g for g, _ in want])
        y.bounds([v for _, v in want])
        # A line per device at the memory a graph may use: its memory less the runtime reserve.
        assert sorted(y.value(p) for p in c["refs"]) == pytest.approx(
            sorted((row["memory_bytes"] - row["runtime_bytes"]) / _GIB for row in d["rows"]), abs=0.002 * (y.hi - y.lo))
        keep_screenshot(page, "plot-fit")
