"""HTML reports of `train` (step breakdown, pipeline timeline, memory per GPU), `plan` (the best
configurations, what was pruned, the sweep over cluster sizes) and `serve` (latency CDFs, the
percentiles, KV cache and queue over time, the capacity table). Figures come from the core's
results; this module places them (html_report.page and the SVG helpers)."""

from __future__ import annotations

from typing import Any, Sequence

from accel_sim.report.html_report import card, html_table, kpi, page
from accel_sim.report.svg import (PALETTE, Lane, Series, bar_chart, fmt_bytes, fmt_seconds, lanes_chart,
                                  line_chart, time_unit, wants_log)

_GIB = 1024.0**3
CDF_POINTS = 400  # points per latency CDF (the core thins the sorted requests evenly by rank)


# ---------------------------------------------------------------------------------------------
# train


def _step_items(e: Any) -> list[tuple[str, float, str, str]]:
    parts = [("compute (exposed collectives included)", e.compute_s, "#1f5fa8"),
             ("of which TP/CP/EP collectives", e.tp_comm_s, "#d1495b"),
             ("pipeline bubble", e.bubble_s, "#9aa3ad"),
             ("pipeline sends", e.pp_comm_s, "#e08a00"),
             ("data-parallel communication (exposed)", e.dp_comm_s, "#7b4fa0"),
             ("compute slowed by overlapped collectives", e.overlap_slowdown_s, "#b5651d"),
             ("optimizer", e.optimizer_s, "#2e8b57")]
    if e.offload_s > 0 or e.host_optimizer_s > 0:
        parts += [("host-link transfers of the offload (exposed)", e.offload_s, "#5a7d9a"),
                  ("CPU optimizer step (offloaded)", e.host_optimizer_s, "#8c6d31")]
    return [(name, v, colour, f"{name}: {fmt_seconds(v)} ({v / e.step_s * 100:.1f}% of the step)")
            for name, v, colour in parts]


def pipeline_lanes(schedule: Any, tail: Sequence[tuple[str, float, float]], width: int = 1100) -> str:
    """One lane per pipeline stage (forward blue, backward red, micro-batch in the tooltip), one
    per link that carries sends, and the step's end (data-parallel communication, optimizer)."""
    events = list(schedule.events)
    stages = 1 + max((max(e.stage, e.to_stage) for e in events), default=0)
    lanes = []
    for s in range(stages):
        spans = [(e.start_s, e.end_s, "#1f5fa8" if e.work.name == "forward" else "#d1495b",
                  f"{e.work.name[0].upper()}{e.micro_batch}",
                  f"stage {s}: {e.work.name} of micro-batch {e.micro_batch} (chunk {e.chunk}), {fmt_seconds(e.end_s - e.start_s)}")
                 for e in events if e.stage == s and e.work.name != "send"]
        lanes.append(Lane(f"stage {s}", spans))
    links = sorted({(e.stage, e.to_stage) for e in events if e.work.name == "send"})
    for a, b in links:
        spans = [(e.start_s, e.end_s, "#e08a00", "", f"send {a} → {b}: micro-batch {e.micro_batch} "
                  f"({'activations' if e.payload.name == 'forward' else 'gradients'}), {fmt_seconds(e.end_s - e.start_s)}")
                 for e in events if e.work.name == "send" and (e.stage, e.to_stage) == (a, b)]
        lanes.append(Lane(f"send {a} → {b}", spans))
    lanes.append(Lane("step end", [(a, b, "#7b4fa0" if "data" in name else "#2e8b57", name,
                                    f"{name}: {fmt_seconds(b - a)}") for name, a, b in tail if b > a]))
    total = max([b for _, _, b in tail] + [schedule.makespan_s])
    return lanes_chart(lanes, cls="pipeline", title="One step: the pipeline schedule (wheel: zoom, drag: pan)",
                       total=total, width=width, attrs={"data-stages": stages})


def train_html(*, title: str, e: Any, layout: dict, schedule: Any, tail: Sequence[tuple[str, float, float]],
               device: Any) -> str:
    fits = e.fits
    kpis = '<div class="kpis">' + "".join([
        kpi("step", fmt_seconds(e.step_s), f"{e.micro_batches} micro-batches"),
        kpi("throughput", f"{e.tokens_per_s:,.0f} tokens/s", f"{e.tflops_per_gpu:,.0f} TFLOP/s per GPU"),
        kpi("MFU", f"{e.mfu * 100:.1f}%"),
        kpi("memory per GPU", f"{fmt_bytes(e.memory_per_gpu_bytes)} of {fmt_bytes(device.memory_bytes)}",
            f"activations {fmt_bytes(e.activation_bytes)}; {fmt_bytes(e.reserved_per_gpu_bytes)} as the caching "
            f"allocator reserves it"),
        kpi("verdict", "fits" if fits else "out of memory", e.reason, "ok" if fits else "bad"),
    ]) + "</div>"
    layout_rows = [(k, str(v)) for k, v in layout.items()]
    step_items = _step_items(e)
    mem_items = [("activations", e.activation_bytes / _GIB, "#e08a00", f"activations {fmt_bytes(e.activation_bytes)}"),
                 ("everything else (weights, gradients, optimizer states, buffers)",
                  (e.memory_per_gpu_bytes - e.activation_bytes) / _GIB, "#1f5fa8",
                  f"{fmt_bytes(e.memory_per_gpu_bytes - e.activation_bytes)}"),
                 ("device memory", device.memory_bytes / _GIB, "#c0392b", f"{fmt_bytes(device.memory_bytes)}")]
    sections = [
        card("Summary", kpis, html_table(["layout", ""], layout_rows), cls="summary"),
        card("Where the step goes", bar_chart(step_items, cls="train-breakdown", title="step time",
                                              value_fmt=fmt_seconds, label_width=280,
                                              attrs={"data-bars": len(step_items)}), cls="breakdown"),
        card("Pipeline", pipeline_lanes(schedule, tail), cls="pipeline",
             note="The heaviest stage's forward and backward per micro-batch, as the core schedules them; "
                  "sends between stages on their own lanes."),
        card("Memory per GPU", bar_chart(mem_items, cls="train-memory", title="GiB on the busiest GPU",
                                         value_fmt=lambda v: f"{v:,.2f} GiB", label_width=400, attrs={"data-bars": 3}), cls="memory"),
    ]
    return page(f"accel-sim train · {title}", "one training step", sections)


# ---------------------------------------------------------------------------------------------
# plan


def plan_html(runs: list, *, short, train_tokens: float, plot_svg: str | None) -> str:
    """runs: (system entry, run inputs, gpus, PlanResult, search seconds) as `plan` holds them."""
    sections = []
    if plot_svg:
        sections.append(card("Best configuration per cluster size", plot_svg, cls="sweep"))
    for entry, run, gpus, r, secs in runs:
        rows = []
        for i, c in enumerate(r.best, 1):
            e = c.estimate
            rows.append((i, short(c), (fmt_seconds(e.step_s), e.step_s), (f"{e.tokens_per_s:,.0f}", e.tokens_per_s),
                         (f"{e.tflops_per_gpu:,.0f}", e.tflops_per_gpu), (f"{e.mfu * 100:.1f}%", e.mfu),
                         (fmt_bytes(e.memory_per_gpu_bytes), e.memory_per_gpu_bytes),
                         (fmt_seconds(e.bubble_s), e.bubble_s), (fmt_seconds(e.tp_comm_s), e.tp_comm_s),
                         (fmt_seconds(e.dp_comm_s), e.dp_comm_s)))
        best = html_table(["#", "configuration", "step", "tokens/s", "TFLOP/s/GPU", "MFU", "memory/GPU", "bubble",
                           "TP comm", "DP comm"], rows, [True, False] + [True] * 8, cls="plan-best") \
            if rows else "<p>No configuration fits.</p>"
        bars = ""
        if r.best:
            items = [(short(c), c.estimate.tokens_per_s, PALETTE[0] if i else "#2e8b57",
                      f"{short(c)}: {c.estimate.tokens_per_s:,.0f} tokens/s, MFU {c.estimate.mfu * 100:.1f}%")
                     for i, c in enumerate(r.best)]
            bars = bar_chart(items, cls="plan-bars", title="tokens/s of the best configurations",
                             value_fmt=lambda v: f"{v:,.0f}", label_width=330, attrs={"data-bars": len(items)})
        infeasible = html_table(["configuration", "step", "why it does not fit"],
                                [(short(c), (fmt_seconds(c.estimate.step_s), c.estimate.step_s), c.estimate.reason)
                                 for c in r.best_infeasible], [False, True, False]) if r.best_infeasible else ""
        pruned = html_table(["reason", "candidates"], [(why, (f"{n:,}", n)) for why, n in
                                                      sorted(r.pruned.items(), key=lambda kv: -kv[1])],
                            [False, True]) if r.pruned else ""
        days = (f" · {train_tokens / r.best[0].estimate.tokens_per_s / 86400:,.1f} days for {train_tokens:,.0f} tokens"
                if r.best else "")
        sections.append(card(
            f"{run.spec.name} on {gpus:,} x {run.device_label} ({entry.spec.id})",
            f"<p>searched {r.candidates:,} configurations in {secs:.1f} s: {r.evaluated:,} composed, "
            f"{r.feasible:,} fit{days}</p>", best, bars,
            ("<h3>Faster, but they do not fit</h3>" + infeasible) if infeasible else "",
            ("<h3>Not composed</h3>" + pruned) if pruned else "", cls=f"plan-{entry.spec.id}-{gpus}"))
    model = runs[0][1].spec.name if runs else ""
    return page(f"accel-sim plan · {model}", "the fastest parallel configurations that fit", sections)


# ---------------------------------------------------------------------------------------------
# serve


def _cdf_chart(rows: list, values_of: Any, *, cls: str, title: str, what: str, colours: dict) -> str:
    """The CDF of a latency per request, a line per device: the time axis in the unit of the
    slowest request, logarithmic where the requests span a factor of ten or more, else from 0."""
    from accel_sim import _core

    cdfs = [(d, _core.empirical_cdf(list(values_of(r)), CDF_POINTS)) for d, _, r, _ in rows]
    seconds = [v for _, cdf in cdfs for v, _ in cdf if v > 0]
    unit, per_s = time_unit(max(seconds, default=1.0))
    log = wants_log(seconds)
    series = [Series(d.name, [(v * per_s, f) for v, f in cdf], colours[d.id], markers=False,
                     tips=[f"{d.name}: {f * 100:.1f}% of requests within {fmt_seconds(v)}" for v, f in cdf])
              for d, cdf in cdfs]
    return line_chart(series, cls=f"cdf {cls}", title=title, x_label=f"{what} ({unit})", y_label="fraction of requests",
                      y_range=(0.0, 1.0), log_x=log, x_min=None if log else 0.0, attrs={"data-series": len(series)})


def _timeline_chart(rows: list, colours: dict, *, cls: str, title: str, y_label: str, value: Any,
                    y_range: tuple[float, float] | None = None, counts: bool = False) -> str:
    """A figure of the serving timeline over time, a step per bin at the most it reached in the
    bin (the core's bins keep it): the highest step is the run's most, as the summary states it."""
    series = []
    for d, _, r, _ in rows:
        bins = list(r.timeline)
        pts = [(b.start_s, value(b)) for b in bins] + ([(bins[-1].t_s, value(bins[-1]))] if bins else [])
        series.append(Series(d.name, pts, colours[d.id], markers=False, step=True))
    widths = [b.t_s - b.start_s for _, _, r, _ in rows for b in r.timeline]
    bin_s = max(widths, default=0.0)
    note = f" · the most in each {fmt_seconds(bin_s)}" if bin_s else ""
    return line_chart(series, cls=cls, title=title + note, x_label="time (s)", y_label=y_label, x_min=0.0,
                      y_range=y_range, y_min=0.0, y_integer=counts, attrs={"data-series": len(series)})


def serve_html(*, model: str, subtitle: str, rows: list, slo: dict) -> str:
    """rows: (device spec, IterationModel, ServeResult, MaxQpsResult or None) per device."""
    sections = []
    colours = {d.id: PALETTE[i % len(PALETTE)] for i, (d, _, _, _) in enumerate(rows)}
    summary_rows = []
    for device, costs, r, found in rows:
        rate = found.qps if found is not None else r.requests_per_s
        summary_rows.append((device.name, (f"{rate:,.2f}", rate), f"{r.completed:,} / {r.requests:,}",
                             (fmt_seconds(r.ttft.p99), r.ttft.p99), (fmt_seconds(r.tpot.p99), r.tpot.p99),
                             (fmt_seconds(r.e2e.p99), r.e2e.p99), (f"{r.output_tokens_per_s:,.0f}", r.output_tokens_per_s),
                             (f"{r.slo_attainment * 100:.1f}%", r.slo_attainment),
                             f"${r.cost_per_million_output_tokens_usd:,.2f}" if r.cost_per_million_output_tokens_usd else "-"))
    head = ["device", "max requests/s" if any(f is not None for *_, f in rows) else "requests/s", "completed",
            "TTFT p99", "TPOT p99", "E2E p99", "output tokens/s", "SLO attainment", "$ / 1M output tokens"]
    slo_text = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in (("TTFT p99", slo.get("ttft_p99_s")),
                                                              ("TPOT p99", slo.get("tpot_p99_s"))) if v)
    sections.append(card("Summary", html_table(head, summary_rows, [False] + [True] * 8, cls="serve-summary"),
                         f"<p>SLOs: {slo_text}</p>" if slo_text else "", cls="summary"))
    ttft = _cdf_chart(rows, lambda r: r.request_ttft_s, cls="cdf-ttft", title="CDF of TTFT per request", what="TTFT",
                      colours=colours)
    e2e = _cdf_chart(rows, lambda r: r.request_e2e_s, cls="cdf-e2e", title="CDF of end-to-end latency per request",
                     what="end-to-end latency", colours=colours)
    sections.append('<div class="grid2">' + card("Time to first token", ttft, cls="cdf-ttft")
                    + card("End-to-end latency", e2e, cls="cdf-e2e") + "</div>")
    pct_rows = []
    for device, _, r, _ in rows:
        for name, p in (("TTFT", r.ttft), ("TPOT", r.tpot), ("inter-token", r.itl), ("end-to-end", r.e2e),
                        ("queueing", r.queueing)):
            pct_rows.append((device.name, name, *[(fmt_seconds(v), v) for v in (p.mean, p.p50, p.p90, p.p99, p.max)]))
    sections.append(card("Latency percentiles", html_table(["device", "metric", "mean", "p50", "p90", "p99", "max"], pct_rows,
                                                           [False, False] + [True] * 5), cls="percentiles"))
    kv = _timeline_chart(rows, colours, cls="serve-kv", title="KV cache used", y_label="KV cache used, all engines (%)",
                         value=lambda b: b.kv_utilization_max * 100, y_range=(0.0, 100.0))
    queue = _timeline_chart(rows, colours, cls="serve-queue", title="Requests waiting", y_label="requests waiting",
                            value=lambda b: b.waiting_max, counts=True)
    sections.append('<div class="grid2">' + card("KV cache", kv, cls="kv") + card("Queue", queue, cls="queue") + "</div>")
    mem_rows = [(d.name, fmt_bytes(c.memory.weight_bytes), fmt_bytes(c.memory.activation_bytes), fmt_bytes(c.memory.kv_bytes),
                 (f"{c.memory.kv_blocks:,}", c.memory.kv_blocks)) for d, c, _, _ in rows]
    sections.append(card("Memory per GPU", html_table(["device", "weights", "activations", "KV cache", "KV blocks per engine"],
                                                      mem_rows, [False, True, True, True, True]), cls="memory"))
    return page(f"accel-sim serve · {model}", subtitle, sections)
