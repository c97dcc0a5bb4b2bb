"""A `plan` sweep as a picture: time-to-train and MFU of the best configuration vs the number of
GPUs, one line per system (the NERSC study's figures): two line charts (svg.line_chart), placed
side by side in the HTML report or in one self-contained SVG, or an HTML page holding it."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from accel_sim.errors import UsageError
from accel_sim.report.svg import PALETTE, Series, line_chart, wants_log


def plan_charts(rows: list[tuple[str, int, Any]], *, train_tokens: float, width: int = 490,
                height: int = 340) -> list[str]:
    """rows: (system name, GPUs, the best configuration's TrainingEstimate or None). The days to
    train and the MFU against the GPUs (a log axis at the GPU counts planned), a line per system."""
    days: dict[str, list[tuple[int, float]]] = {}
    mfu: dict[str, list[tuple[int, float]]] = {}
    for system, gpus, e in rows:
        days.setdefault(system, [])
        mfu.setdefault(system, [])
        if e is not None:
            days[system].append((gpus, train_tokens / e.tokens_per_s / 86400))
            mfu[system].append((gpus, e.mfu * 100))
    if not any(days.values()):
        raise UsageError("no configuration fits at any of the GPU counts: nothing to plot")
    gpus = sorted({g for _, g, _ in rows})

    def chart(points: dict[str, list[tuple[int, float]]], *, cls: str, title: str, y_label: str, unit: str,
              log_y: bool) -> str:
        series = [Series(name, sorted(pts), PALETTE[i % len(PALETTE)],
                         tips=[f"{name}, {g:,} GPUs: {v:,.3g}{unit}" for g, v in sorted(pts)])
                  for i, (name, pts) in enumerate(points.items()) if pts]
        return line_chart(series, cls=cls, title=title, x_label="GPUs", y_label=y_label, log_x=len(gpus) > 1,
                          log_y=log_y, y_min=None if log_y else 0.0, x_ticks=gpus, x_fmt=lambda g: f"{g:,.0f}",
                          width=width, height=height, attrs={"data-series": len(series)})

    day_values = [v for pts in days.values() for _, v in pts]
    return [chart(days, cls="plan-days", title=f"days to train on {train_tokens:,.3g} tokens", y_label="time to train (days)",
                  unit=" days", log_y=wants_log(day_values)),
            chart(mfu, cls="plan-mfu", title="MFU", y_label="MFU (%)", unit="%", log_y=False)]


def plan_plot_svg(rows: list[tuple[str, int, Any]], *, model: str, train_tokens: float) -> str:
    """Both charts in one self-contained SVG file."""
    from accel_sim.report.html_report import standalone_svg

    return standalone_svg(f"{model}: the best configuration accel-sim plan finds at each size",
                          plan_charts(rows, train_tokens=train_tokens), "plan-sweep")


def write_plan_plot(path: str, rows: list[tuple[str, int, Any]], *, model: str, train_tokens: float) -> None:
    if not path.endswith((".html", ".svg")):
        raise UsageError(f"--plot writes .svg or .html (got {path})")
    svg = plan_plot_svg(rows, model=model, train_tokens=train_tokens)
    if path.endswith(".html"):
        doc = (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>accel-sim plan · {html.escape(model)}</title>"
               f"</head><body>\n{svg}</body></html>\n")
    else:
        doc = svg
    try:
        Path(path).write_text(doc, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write the plot to {path}: {e.strerror}") from None
