"""What `fit` reports: the largest batch or sequence length that fits each device, as JSON (the
schema accel-sim/fit, docs/formats/report.md), as a table, and as a plot of the peak against the axis
(accel_sim.commands.fit.FitRun)."""

from __future__ import annotations

from typing import Any

# The axes of the search, as the reports name them.
WHAT = {"batch": "batch", "seq": "sequence length"}


def fit_json(f: Any) -> dict:
    out = f.report.to_dict()
    if f.args.model is not None:
        out["stack"] = f.stack.as_dict() if f.stack is not None else None
    return out


def fit_text(f: Any) -> str:
    args, report = f.args, f.report
    gib = 2**30
    lines = [f"accel-sim fit · largest {WHAT[args.axis]} that fits · {f.what}", ""]
    header = ("device", "memory", f"largest {args.axis}", "needed at it", f"needed at {args.axis} + 1")
    rows = []
    for r in report.rows:
        largest = "none" if r.largest == 0 else f"{r.largest}" + (" (search limit)" if r.at_limit else "")
        rows.append((r.device, f"{r.memory_bytes / gib:.1f} GiB", largest,
                     f"{r.peak_bytes / gib:.2f} GiB" + (" (at 1)" if r.largest == 0 else ""),
                     "-" if r.next_peak_bytes is None or r.largest == 0 else f"{r.next_peak_bytes / gib:.2f} GiB"))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines.append(("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths))).rstrip())
    lines.append("  " + "  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths))).rstrip())
    lines.append("")
    lines.append(f"  peak: the liveness analysis of the {'built' if args.model else 'captured'} graph "
                 f"({'freed at last use' if args.free_at_last_use else 'freed when the program drops it'}) replayed "
                 f"through PyTorch's caching allocator, plus each device's runtime reserve (CUDA context, libraries); "
                 f"{len(report.probes)} value{'s' if len(report.probes) != 1 else ''} probed")
    if report.host_bytes is not None:
        lines.append(f"  optimizer on the host: its states, the gradients and a copy of the parameters take "
                     f"{report.host_bytes / gib:,.1f} GiB of host memory, whatever the {args.axis} (the host must "
                     f"have it; train and plan check a system's)")
    dips = [r.device for r in report.rows if not r.monotone]
    if dips:
        lines.append(f"  note ({', '.join(dips)}): a larger {args.axis} needed less than a smaller one among the probes "
                     f"(the allocator packs some sizes better); the answer fits and the next value does not, "
                     f"but a value beyond it may fit again")
    return "\n".join(lines)


def write_fit_plot(report: Any, path: str) -> None:
    """The allocator's peak at each probed value against the axis, and per device the memory a
    graph may use (its memory less the runtime reserve): the line crosses a device's where that
    device stops fitting."""
    from pathlib import Path

    from accel_sim.errors import UsageError
    from accel_sim.report.html_report import standalone_svg
    from accel_sim.report.svg import Series, fmt_bytes, line_chart

    points = sorted(report.probes.items())
    if not points:
        raise UsageError("nothing was probed, nothing to plot")
    gib = 2**30
    unit = "sequences" if report.axis == "batch" else "tokens"
    series = [Series("peak", [(v, p / gib) for v, p in points], "#1f5fa8",
                     tips=[f"{report.axis} {v:,}: {fmt_bytes(p)} at the peak" for v, p in points])]
    hlines = [((r.memory_bytes - r.runtime_bytes) / gib,
               f"{r.device}: {fmt_bytes(r.memory_bytes)} less the runtime's {fmt_bytes(r.runtime_bytes)} · largest {r.largest:,}",
               "#c0392b") for r in report.rows]
    chart = line_chart(series, cls="fit", title="", x_label=f"{report.axis} ({unit})",
                       y_label="allocator peak (GiB)", x_min=0.0, y_min=0.0, hlines=hlines, width=720, height=420,
                       attrs={"data-points": len(points)})
    doc = standalone_svg(f"peak memory vs {report.axis} · {report.what}", [chart], "fit")
    try:
        Path(path).write_text(doc, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write the plot to {path}: {e.strerror or e}") from None
