"""A `plan` sweep as a picture: time-to-train and MFU of the best configuration vs the number of
GPUs, one line per system (the NERSC study's figures), as a self-contained SVG, or an HTML page
holding it."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from accel_sim.errors import UsageError

_COLOURS = ("#236", "#c33", "#393", "#d80", "#639", "#088")


def _panel(points: dict[str, list[tuple[int, float]]], *, x0: float, y0: float, w: float, h: float,
           title: str, unit: str, log_y: bool) -> list[str]:
    xs = sorted({g for pts in points.values() for g, _ in pts})
    ys = [v for pts in points.values() for _, v in pts]
    if not xs or not ys:
        return [f'<text x="{x0}" y="{y0 + 20}">{html.escape(title)}: nothing fits</text>']
    lx_min, lx_max = math.log2(xs[0]), math.log2(xs[-1])
    lx_span = max(lx_max - lx_min, 1.0)
    if log_y:
        lo, hi = math.log10(min(ys)) - 0.05, math.log10(max(ys)) + 0.05
    else:
        lo, hi = 0.0, max(ys) * 1.1
    span = max(hi - lo, 1e-9)
    sx = lambda g: x0 + w * (math.log2(g) - lx_min) / lx_span  # noqa: E731
    sy = lambda v: y0 + h - h * (((math.log10(v) if log_y else v) - lo) / span)  # noqa: E731
    out = [f'<text x="{x0}" y="{y0 - 10}" font-weight="bold">{html.escape(title)}</text>',
           f'<line x1="{x0}" y1="{y0 + h}" x2="{x0 + w}" y2="{y0 + h}" stroke="black"/>',
           f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 + h}" stroke="black"/>',
           f'<text x="{x0 + w / 2}" y="{y0 + h + 34}" text-anchor="middle">GPUs</text>']
    for g in xs:
        out.append(f'<text x="{sx(g):.1f}" y="{y0 + h + 16}" text-anchor="middle">{g:,}</text>')
    for frac in (0.0, 0.5, 1.0):
        level = lo + frac * span
        value = 10**level if log_y else level
        out.append(f'<text x="{x0 - 6}" y="{y0 + h - h * frac + 4:.1f}" text-anchor="end">{value:,.3g}{unit}</text>')
    for i, (name, pts) in enumerate(points.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        pts = sorted(pts)
        line = " ".join(f"{sx(g):.1f},{sy(v):.1f}" for g, v in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for g, v in pts:
            out.append(f'<circle cx="{sx(g):.1f}" cy="{sy(v):.1f}" r="3.5" fill="{colour}">'
                       f'<title>{html.escape(name)}, {g:,} GPUs: {v:,.3g}{unit}</title></circle>')
    return out


def plan_plot_svg(rows: list[tuple[str, int, Any]], *, model: str, train_tokens: float) -> str:
    """rows: (system name, GPUs, the best configuration's TrainingEstimate or None)."""
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
    width, height = 980, 460
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<text x="20" y="22" font-size="14">{html.escape(model)}: the best configuration accel-sim plan finds at each size</text>']
    parts += _panel(days, x0=80, y0=70, w=340, h=300, title=f"days to train on {train_tokens:,.3g} tokens", unit=" d", log_y=True)
    parts += _panel(mfu, x0=560, y0=70, w=340, h=300, title="MFU", unit="%", log_y=False)
    for i, name in enumerate(days):
        y = height - 30 + 0 * i
        x = 80 + 220 * i
        parts.append(f'<rect x="{x}" y="{y - 9}" width="14" height="4" fill="{_COLOURS[i % len(_COLOURS)]}"/>')
        parts.append(f'<text x="{x + 20}" y="{y - 4}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_plan_plot(path: str, rows: list[tuple[str, int, Any]], *, model: str, train_tokens: float) -> None:
    svg = plan_plot_svg(rows, model=model, train_tokens=train_tokens)
    if path.endswith(".html"):
        doc = (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>accel-sim plan · {html.escape(model)}</title>"
               f"</head><body>\n{svg}</body></html>\n")
    elif path.endswith(".svg"):
        doc = svg
    else:
        raise UsageError(f"--plot writes .svg or .html (got {path})")
    try:
        Path(path).write_text(doc, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write the plot to {path}: {e.strerror}") from None
