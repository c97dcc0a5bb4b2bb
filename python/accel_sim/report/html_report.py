"""Self-contained HTML reports (`--html FILE`): one file with inline CSS, SVG and a little script,
no external resource, so it opens offline and can be attached to a ticket or a CI run.

`simulation_html(report)`: summary (latency ± band, peak memory vs the device's memory, verdict),
the device's roofline with every op placed by arithmetic intensity and achieved FLOP/s, the
timeline (passes, layers, compute and communication streams; zoom with the wheel), live memory
over time with the peak and the limit, breakdowns by op class, module type, layer and op, the
slowest ops, hints and the ops the catalogue does not know.
`comparison_html(compare)`: the devices side by side, then each device's roofline.

Every figure shown comes from the core (the report objects); this module places them.
"""

from __future__ import annotations

import html
import re
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Sequence

from accel_sim.errors import UsageError
from accel_sim.report.hints import hint_message
from accel_sim.report.sim_trace import layer_key, runs
from accel_sim.report.tables import ran_as
from accel_sim.report.svg import (OP_CLASS_COLOURS, PALETTE, Frame, Lane, Scale, Series, axes, bar_chart,
                                  fmt_bytes, fmt_number, fmt_seconds, lanes_chart, line_chart,
                                  padded_log_range, svg_open, time_unit)

esc = html.escape
_GIB = 1024.0**3
MEMORY_CURVE_POINTS = 2000  # samples kept for the memory chart (the core keeps the peak exactly)


def _asset(name: str) -> str:
    return resources.files("accel_sim.report").joinpath("assets", name).read_text(encoding="utf-8")


def chart_stylesheet() -> str:
    """The stylesheet's rules for charts, for an SVG file that must draw without the page."""
    return "\n".join(line for line in _asset("report.css").splitlines() if line.startswith("svg.chart"))


def standalone_svg(title: str, charts: Sequence[str], cls: str) -> str:
    """Charts side by side under a title on a line of its own, with the report stylesheet's chart
    rules inline, as one SVG file that draws without the page."""
    rules = [r for r in chart_stylesheet().splitlines() if not r.startswith("svg.chart {")]  # the page's sizing rule
    panels, x, height = [], 0, 0
    for chart in charts:
        root = chart[:chart.index(">")]
        width_px = int(re.search(r' width="(\d+)"', root).group(1))
        height = max(height, int(re.search(r' height="(\d+)"', root).group(1)))
        kind = re.search(r' class="chart ([^"]*)"', root).group(1)
        body = chart[chart.index(">") + 1:chart.rindex("</svg>")]  # the chart's marks, without its own <svg>
        panels.append(f'<g class="panel {kind}" transform="translate({x} 28)">{body}</g>')
        x += width_px
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {esc(cls)}" viewBox="0 0 {x} {height + 28}" '
            f'width="{x}" height="{height + 28}" font-family="system-ui, sans-serif" font-size="11">\n'
            f'<style>\n{chr(10).join(rules)}\n</style>\n'
            f'<rect width="100%" height="100%" fill="#fff"/>\n'
            f'<text class="chart-title" x="70" y="18">{esc(title)}</text>\n'
            + "\n".join(panels) + "\n</svg>\n")


def page(title: str, subtitle: str, sections: Iterable[str]) -> str:
    """The HTML document: inline stylesheet and script, the given sections in order."""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta name=\"generator\" content=\"accel-sim\"><title>{esc(title)}</title>"
            f"<style>\n{_asset('report.css')}</style></head>\n<body>\n"
            f"<h1>{esc(title)}</h1><div class=\"sub\">{esc(subtitle)}</div>\n"
            + "\n".join(sections)
            + f"\n<script>\n{_asset('report.js')}</script>\n</body></html>\n")


def card(title: str, *parts: str, cls: str = "", note: str = "") -> str:
    extra = f' id="{esc(cls)}"' if cls else ""
    body = "\n".join(parts)
    return (f'<section class="card"{extra}><h2>{esc(title)}</h2>\n{body}'
            + (f'\n<p class="note">{esc(note)}</p>' if note else "") + "</section>")


def html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[bool] | None = None,
               cls: str = "") -> str:
    """A sortable table. A cell may be (text, sort_value) to sort numbers by their value."""
    numeric = numeric or [False] * len(headers)
    head = "".join(f'<th class="{"num" if numeric[i] else ""}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            text, key = c if isinstance(c, tuple) else (c, None)
            attr = f' data-v="{key!r}"' if key is not None else ""
            cells.append(f'<td class="{"num" if numeric[i] else ""}"{attr}>{esc(str(text))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table class="sortable {esc(cls)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def kpi(key: str, value: str, note: str = "", cls: str = "") -> str:
    return (f'<div class="kpi"><div class="k">{esc(key)}</div><div class="v {cls}">{esc(value)}</div>'
            + (f'<div class="n">{esc(note)}</div>' if note else "") + "</div>")


def colour_legend(classes: Iterable[str]) -> str:
    return ('<div class="legend-html">' + "".join(
        f'<span><i style="background:{OP_CLASS_COLOURS.get(c, "#999")}"></i>{esc(c)}</span>' for c in classes) + "</div>")


def write_html(path: str | Path, document: str) -> None:
    if not str(path).endswith((".html", ".htm")):
        raise UsageError(f"--html writes an .html file (got {path})")
    try:
        Path(path).write_text(document, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write the report to {path}: {e.strerror or e}") from None


# ---------------------------------------------------------------------------------------------
# One simulation


def roofline_svg(report: Any, *, width: int = 640, height: int = 400, title: str | None = None) -> str:
    """The device's roofline (log-log): bandwidth slope and each compute ceiling, one circle per
    op of the core's RooflineChart, coloured by op class."""
    chart = report.roofline
    ops = report.ops
    pts = chart.points
    bw = chart.bandwidth_bytes_per_s
    ceilings = list(chart.ceilings)
    xs_vals = [p.intensity for p in pts] + [c.ridge_intensity for c in ceilings]
    ys_vals = [p.achieved_flops_per_s for p in pts] + [c.flops_per_s for c in ceilings]
    x_lo, x_hi = padded_log_range(xs_vals, 2.0)
    y_lo, y_hi = padded_log_range(ys_vals, 3.0)  # every op inside, however slow (a scalar op at launch cost)
    frame = Frame(width, height, left=64, top=30)
    sx = Scale(x_lo, x_hi, frame.x0, frame.x1, log=True)
    sy = Scale(y_lo, y_hi, frame.y0, frame.y1, log=True)
    spec = report.device.spec
    out = svg_open(frame, "roofline", title or f"Roofline · {spec.name}",
                   {"data-points": len(pts), "data-device": spec.id})
    out += axes(frame, sx, sy, x_label="arithmetic intensity (FLOP/byte)", y_label="achieved FLOP/s")
    out.append(f'<clipPath id="clip-{spec.id}"><rect x="{frame.x0}" y="{frame.y1}" width="{frame.x1 - frame.x0}" '
               f'height="{frame.y0 - frame.y1}"/></clipPath><g clip-path="url(#clip-{spec.id})">')
    for i, c in enumerate(ceilings):
        colour = "#333" if i == 0 else "#888"
        # Memory slope from the left edge to the ridge, then flat at the peak.
        x_start = x_lo
        y_start = bw * x_start
        out.append(f'<polyline class="ceiling" data-unit="{esc(c.unit)}" stroke="{colour}" '
                   f'points="{sx(x_start):.1f},{sy(max(y_start, y_lo / 10)):.1f} {sx(c.ridge_intensity):.1f},{sy(c.flops_per_s):.1f} '
                   f'{sx(x_hi):.1f},{sy(c.flops_per_s):.1f}"><title>{esc(c.unit)} peak {fmt_number(c.flops_per_s, "FLOP/s")}, '
                   f'ridge at {c.ridge_intensity:.3g} FLOP/B</title></polyline>')
        out.append(f'<text class="tick" x="{frame.x1 - 4}" y="{sy(c.flops_per_s) - 5:.1f}" text-anchor="end">'
                   f'{esc(c.unit)} {esc(fmt_number(c.flops_per_s, "FLOP/s"))}</text>')
    out.append(f'<text class="tick" transform="translate({sx(x_lo * 1.5):.1f} {sy(bw * x_lo * 1.5) - 6:.1f})">'
               f'{esc(fmt_number(bw, "B/s"))}</text>')
    out.append('</g><g class="points">')
    for p in pts:
        op = ops[p.node]
        colour = OP_CLASS_COLOURS.get(op.op_class, "#999")
        where = f" in {op.module}" if op.module else ""
        tip = (f"#{op.index} {op.op}{where} ({op.pass_name})\n{fmt_number(p.flops, 'FLOP')}, {fmt_bytes(p.bytes)}, "
               f"{fmt_seconds(p.time_s)}\n{p.intensity:.3g} FLOP/B, {fmt_number(p.achieved_flops_per_s, 'FLOP/s')} "
               f"({p.unit}); {p.bound.name}-bound")
        out.append(f'<circle class="pt" data-op-class="{esc(op.op_class)}" cx="{sx(p.intensity):.2f}" '
                   f'cy="{sy(p.achieved_flops_per_s):.2f}" r="4" fill="{colour}"><title>{esc(tip)}</title></circle>')
    out.append("</g></svg>")
    return "\n".join(out)


def timeline_svg(report: Any, width: int = 1100) -> str:
    t = report.timeline
    ops = report.ops
    spans = list(t.spans)
    pass_colours = {"forward": "#1f5fa8", "backward": "#d1495b", "optimizer": "#2e8b57"}
    micro = report.options.micro_batches > 1
    lanes = [Lane("passes", [(a, b, pass_colours.get(p, "#999"), p,
                              f"{p}{f' (micro-batch {mb})' if micro and p != 'optimizer' else ''}: {fmt_seconds(b - a)}")
                             for (p, mb), a, b in runs(spans, lambda s: (ops[s.node].pass_name, s.micro_batch))])]
    layer_runs = runs(spans, layer_key(ops))
    if layer_runs:
        lanes.append(Lane("layers", [(a, b, PALETTE[i % 2 * 5], name, f"{name}: {fmt_seconds(b - a)}")
                                     for i, (name, a, b) in enumerate(layer_runs)]))
    for stream in ("compute", "communication"):
        lane_spans = []
        for s in spans:
            if s.stream.name != stream:
                continue
            op = ops[s.node]
            where = f" in {op.module}" if op.module else ""
            tip = (f"#{op.index} {op.op}{where}: {fmt_seconds(s.end_s - s.start_s)} ({op.bound}-bound, "
                   f"{fmt_number(op.flops, 'FLOP')}, {fmt_bytes(op.bytes_read + op.bytes_written)})")
            lane_spans.append((s.start_s, s.end_s, OP_CLASS_COLOURS.get(op.op_class, "#999"), op.op, tip))
        if lane_spans or stream == "compute":
            lanes.append(Lane(f"{stream} stream", lane_spans))
    return lanes_chart(lanes, cls="timeline", title=f"Timeline · {fmt_seconds(t.latency_s)} (wheel: zoom, drag: pan, double-click: reset)",
                       total=t.latency_s, width=width, attrs={"data-spans": len(spans)})


def memory_svg(report: Any, width: int = 640, height: int = 360) -> str:
    from accel_sim import _core

    samples = _core.downsample_memory(report.timeline.memory, MEMORY_CURVE_POINTS) if len(report.timeline.memory) > 4 \
        else list(report.timeline.memory)
    spec = report.device.spec
    r = report.result
    unit, per_s = time_unit(report.timeline.latency_s)
    pts = [(s.t_s * per_s, s.live_bytes / _GIB) for s in samples]
    tips = [f"{fmt_seconds(s.t_s)}: {fmt_bytes(s.live_bytes)} live" for s in samples]
    hlines = [(spec.memory_bytes / _GIB, f"device memory {fmt_bytes(spec.memory_bytes)}", "#c0392b"),
              ((spec.memory_bytes - spec.runtime_reserved_bytes) / _GIB,
               f"less the runtime's {fmt_bytes(spec.runtime_reserved_bytes)}", "#e08a00")]
    peak = r.memory.peak_bytes
    at = next((s for s in samples if s.live_bytes == peak), None)
    series = [Series("live memory", pts, "#1f5fa8", tips=tips, markers=False, step=True)]
    if at is not None:
        series.append(Series("peak", [(at.t_s * per_s, peak / _GIB)], "#c0392b",
                             tips=[f"peak {fmt_bytes(peak)} at {fmt_seconds(at.t_s)}"]))
    svg = line_chart(series, cls="memory",
                     title=f"Live memory · peak {fmt_bytes(peak)}", x_label=f"time ({unit})", y_label="live memory (GiB)",
                     width=width, height=height, x_min=0.0, y_min=0.0, hlines=hlines,
                     attrs={"data-points": len(pts), "data-peak-bytes": peak})
    return svg


def _breakdown_bars(report: Any, by: str, title: str, top: int = 15) -> str:
    groups = report.groups(by)[:top]
    items = []
    for g in groups:
        colour = OP_CLASS_COLOURS.get(g.name, "#1f5fa8") if by == "op_class" else \
            {"compute": "#1f5fa8", "memory": "#2e8b57"}.get(g.dominant_bound.name, "#5a6270")
        tip = (f"{g.name}: {fmt_seconds(g.time_s)} ({g.fraction * 100:.1f}%), {g.count} ops, "
               f"{fmt_number(g.flops, 'FLOP')}, {fmt_bytes(g.bytes)}; mostly {g.dominant_bound.name}-bound")
        items.append((g.name, g.time_s, colour, tip))
    return bar_chart(items, cls=f"breakdown breakdown-{by}", title=title,
                     value_fmt=lambda v: fmt_seconds(v), attrs={"data-bars": len(items)})


def summary_kpis(report: Any) -> str:
    r = report.result
    m = r.memory
    spec = report.device.spec
    band, basis = report.latency_band
    fits = r.fits
    total = r.latency_s or 1.0
    parts = [
        kpi("latency", f"{fmt_seconds(r.latency_s)} ± {band * 100:.0f}%", f"band: {basis}"),
        kpi("peak memory", f"{fmt_bytes(m.peak_bytes)} of {fmt_bytes(spec.memory_bytes)}",
            f"needs {fmt_bytes(r.required_bytes)} with the allocator and runtime"),
        kpi("verdict", "fits" if fits else "out of memory", "", "ok" if fits else "bad"),
        kpi("time split", f"{r.compute_bound_time_s / total * 100:.0f}% compute · {r.memory_bound_time_s / total * 100:.0f}% memory",
            f"launch overhead {r.launch_overhead_time_s / total * 100:.0f}%"),
    ]
    if report.tokens_per_s:
        parts.append(kpi("throughput", f"{report.tokens_per_s:,.0f} tokens/s", f"MFU {r.model_flops_utilization * 100:.1f}%"))
    elif r.model_flops:
        parts.append(kpi("MFU", f"{r.model_flops_utilization * 100:.1f}%"))
    if r.energy_j:
        parts.append(kpi("energy", f"{r.energy_j:.3g} J"))
    return '<div class="kpis">' + "".join(parts) + "</div>"


def _facts(report: Any) -> str:
    r = report.result
    m = r.memory
    spec = report.device.spec
    rows = [
        ("device", f"{spec.name} ({spec.id}): {fmt_bytes(spec.memory_bytes)}, {fmt_number(spec.memory_bandwidth_bytes_per_s, 'B/s')}"),
        ("cost model", report.options.cost_model + (", fused elementwise chains" if report.options.fuse_elementwise else "")),
        ("FLOPs / bytes", f"{fmt_number(r.total_flops, 'FLOP')} / {fmt_bytes(r.total_bytes)}"),
        ("kernels", f"{r.num_kernels:,}"),
        ("weights · buffers · inputs", f"{fmt_bytes(m.parameter_bytes)} · {fmt_bytes(m.buffer_bytes)} · {fmt_bytes(m.input_bytes)}"),
        ("activations at peak", fmt_bytes(m.peak_activation_bytes)),
        ("allocator", f"{fmt_bytes(m.peak_segment_bytes)} in segments ({fmt_bytes(m.peak_reserved_bytes)} if none is released) "
                      f"+ runtime {fmt_bytes(spec.runtime_reserved_bytes)}"),
    ]
    if m.peak_gradient_bytes or m.optimizer_state_bytes:
        rows.append(("gradients at peak · optimizer states", f"{fmt_bytes(m.peak_gradient_bytes)} · {fmt_bytes(m.optimizer_state_bytes)}"))
    if r.backward_time_s or r.optimizer_time_s:
        rows.append(("forward · backward · optimizer", f"{fmt_seconds(r.forward_time_s)} · {fmt_seconds(r.backward_time_s)} · "
                                                        f"{fmt_seconds(r.optimizer_time_s)}"))
    if r.num_collectives:
        rows.append(("collectives", f"{r.num_collectives:,}, {fmt_bytes(r.communication_bytes)}, "
                                    f"{fmt_seconds(r.communication_time_s)}"))
    peak = report.peak_op
    if peak is not None:
        rows.append(("peak during", f"op #{peak.index} {peak.op}" + (f" in {peak.module}" if peak.module else "")
                     + f" ({peak.pass_name})"))
    info = report.model_info
    if info:
        shape = (f"batch {info['batch']}, context {info['context']} + 1" if info["phase"] == "decode"
                 else f"batch {info['batch']}, seq {info['seq']}")
        rows.insert(0, ("model", f"{info['model']}: {info['parameters'] / 1e9:,.2f} B params, {info['dtype']}, "
                                 f"{info['phase']} ({shape}), TP {info['tensor_parallel']}"))
    return html_table(["", ""], rows)


def _top_ops(report: Any, top: int = 30) -> str:
    ops = sorted((o for o in report.ops if o.time_s > 0), key=lambda o: -o.time_s)[:top]
    rows = [(o.index, o.op, o.module or "(top level)", o.op_class, o.bound, (fmt_seconds(o.time_s), o.time_s),
             (fmt_number(o.flops, "FLOP"), o.flops), (fmt_bytes(o.bytes_read + o.bytes_written), o.bytes_read + o.bytes_written),
             " ".join("x".join(map(str, s)) for s in o.input_shapes[:3])) for o in ops]
    return html_table(["#", "op", "module", "class", "bound", "time", "FLOPs", "bytes", "input shapes"], rows,
                      [True, False, False, False, False, True, True, True, False], cls="top-ops")


def simulation_sections(report: Any) -> list[str]:
    classes = sorted({report.ops[p.node].op_class for p in report.roofline.points})
    uncovered = report.uncovered_ops
    hints = report.hints
    sections = [
        card("Summary", summary_kpis(report), _facts(report), cls="summary"),
        card("Roofline", roofline_svg(report), colour_legend(classes), cls="roofline",
             note="Each op at its arithmetic intensity (FLOPs over bytes read and written) and the FLOP/s it achieves "
                  "in the simulation, launch overhead included; the lines are the device's bandwidth and peaks."),
        card("Timeline", timeline_svg(report), colour_legend(sorted({o.op_class for o in report.ops if o.time_s > 0})),
             cls="timeline"),
        '<div class="grid2">' + card("Memory", memory_svg(report), cls="memory",
                                     note="Bytes live while each op runs: resident weights, buffers and inputs plus the "
                                          "activations and gradients alive then.")
        + card("Time by op class", _breakdown_bars(report, "op_class", "op class"), cls="by-class") + "</div>",
        '<div class="grid2">' + card("Time by module type", _breakdown_bars(report, "module_type", "module type"))
        + card("Time by layer", _breakdown_bars(report, "layer", "layer")) + "</div>",
        card("Time by op", _breakdown_bars(report, "op", "op"), cls="by-op"),
        card("Slowest ops", _top_ops(report), cls="top-ops"),
    ]
    if hints:
        sections.append(card("Hints", '<ul class="hints">' + "".join(
            f"<li>{esc(hint_message(h, report))}</li>" for h in hints) + "</ul>", cls="hints"))
    sections.append(card(
        "Ops not in the catalogue",
        html_table(["op", "count", "time"], [(u["op"], u["count"], (fmt_seconds(u["time_s"]), u["time_s"])) for u in uncovered],
                   [False, True, True], cls="uncovered") if uncovered else "<p>None: every op was costed by the catalogue.</p>",
        cls="uncovered", note="Ops the catalogue does not know are costed as memory-bound on their bytes."))
    return sections


def simulation_html(report: Any) -> str:
    spec = report.device.spec
    return page(f"accel-sim · {report.name or 'graph'} on {spec.name}",
                f"cost model {report.options.cost_model} · {len(report.ops):,} ops", simulation_sections(report))


# ---------------------------------------------------------------------------------------------
# Several devices


def comparison_html(compare: Any) -> str:
    reports = compare.reports
    c = compare.comparison
    names = [r.device.spec.name for r in reports]
    rows = []

    def row(label: str, values: list[tuple[str, float] | str]) -> None:
        rows.append([label] + values)

    row("precision", [ran_as(r)[0] + (" (narrower)" if v.narrower_precision else "") for r, v in zip(reports, c.devices)])
    row("latency", [(f"{fmt_seconds(r.latency_s)} ± {r.latency_band[0] * 100:.0f}%", r.latency_s) for r in reports])
    row("speedup vs slowest", [(f"{v.speedup_vs_slowest:.2f}x", v.speedup_vs_slowest) for v in c.devices])
    row("peak memory", [(fmt_bytes(r.peak_memory_bytes), r.peak_memory_bytes) for r in reports])
    row("device memory", [(fmt_bytes(r.device.spec.memory_bytes), r.device.spec.memory_bytes) for r in reports])
    row("fits", ["yes" if r.fits else "OUT OF MEMORY" for r in reports])
    row("bound", [v.dominant_bound.name for v in c.devices])
    row("cost per run", [f"${v.cost_per_run_usd:.3g}" if v.cost_per_run_usd else "-" for v in c.devices])
    row("MFU", [f"{r.result.model_flops_utilization * 100:.1f}%" for r in reports])
    if any(r.tokens_per_s for r in reports):
        row("tokens/s", [(f"{r.tokens_per_s:,.0f}", r.tokens_per_s) if r.tokens_per_s else "-" for r in reports])
    row("verdict", [("overkill: " + v.overkill_reason) if v.overkill else "not ranked" if r.fits and not v.ranked else ""
                    for r, v in zip(reports, c.devices)])
    fastest = reports[c.fastest_index].device.spec.name if c.fastest_index >= 0 else "-"
    best = reports[c.best_value_index].device.spec.name if c.best_value_index >= 0 else "-"
    side = html_table(["", *names], rows, [False] + [True] * len(names), cls="side-by-side")

    lat_items = [(r.device.spec.name, r.latency_s, PALETTE[i % len(PALETTE)],
                  f"{r.device.spec.name}: {fmt_seconds(r.latency_s)}") for i, r in enumerate(reports)]
    mem_items = [(r.device.spec.name, r.peak_memory_bytes / _GIB, "#2e8b57" if r.fits else "#c0392b",
                  f"{r.device.spec.name}: {fmt_bytes(r.peak_memory_bytes)} of {fmt_bytes(r.device.spec.memory_bytes)}")
                 for r in reports]
    class_names = []
    for r in reports:
        for g in r.groups("op_class"):
            if g.name not in class_names:
                class_names.append(g.name)
    stacked = _stacked_bars(reports, class_names)
    sections = [
        card("Side by side", f"<p>fastest: <b>{esc(fastest)}</b> · best value: <b>{esc(best)}</b></p>", side, cls="compare"),
        '<div class="grid2">'
        + card("Latency", bar_chart(lat_items, cls="compare-latency", title="latency per run", value_fmt=fmt_seconds,
                                    attrs={"data-bars": len(lat_items)}))
        + card("Peak memory", bar_chart(mem_items, cls="compare-memory", title="peak live memory (GiB); red: does not fit",
                                        value_fmt=lambda v: f"{v:,.2f} GiB", attrs={"data-bars": len(mem_items)}))
        + "</div>",
        card("Where the time goes", stacked, colour_legend(class_names), cls="compare-classes"),
        '<div class="grid2">' + "".join(card(f"Roofline · {r.device.spec.name}", roofline_svg(r, width=560, height=360))
                                        for r in reports) + "</div>",
    ]
    model = reports[0].name if reports else ""
    return page(f"accel-sim · {model} on {len(reports)} devices", ", ".join(names), sections)


def _stacked_bars(reports: Sequence[Any], classes: Sequence[str], width: int = 900) -> str:
    """One horizontal bar per device, split by op class (the core's groups), on a shared scale."""
    bar_h = 22
    frame = Frame(width, 40 + len(reports) * (bar_h + 10), left=150, right=90, top=30, bottom=10)
    top = max((r.latency_s for r in reports), default=1.0) or 1.0
    out = svg_open(frame, "compare-stacked", "time by op class, per device", {"data-bars": len(reports)})
    for i, r in enumerate(reports):
        y = frame.y1 + i * (bar_h + 10)
        out.append(f'<text class="tick" x="{frame.x0 - 6}" y="{y + bar_h - 6}" text-anchor="end">{esc(r.device.spec.name)}</text>')
        x = frame.x0
        groups = {g.name: g for g in r.groups("op_class")}
        for name in classes:
            g = groups.get(name)
            if g is None or g.time_s <= 0:
                continue
            w = (frame.x1 - frame.x0) * g.time_s / top
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.2f}" height="{bar_h}" fill="{OP_CLASS_COLOURS.get(name, "#999")}">'
                       f'<title>{esc(r.device.spec.name)} · {esc(name)}: {fmt_seconds(g.time_s)} ({g.fraction * 100:.1f}%)</title></rect>')
            x += w
        out.append(f'<text class="tick" x="{x + 5:.1f}" y="{y + bar_h - 6}">{esc(fmt_seconds(r.latency_s))}</text>')
    out.append("</svg>")
    return "\n".join(out)
