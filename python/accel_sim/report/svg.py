"""Hand-written SVG charts for the HTML reports: scales with readable ticks, axes, line charts
(linear or log, steps or markers), horizontal bars and lanes of spans. Every chart is a plain
string of SVG with a <title> tooltip on each mark; nothing here computes a figure of the
simulation, it only places the numbers it is given."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

PALETTE = ("#1f5fa8", "#d1495b", "#2e8b57", "#e08a00", "#7b4fa0", "#0e9aa7", "#8c6d31", "#c2408f",
           "#5a6270", "#4c9a2a")

OP_CLASS_COLOURS = {
    "matmul": "#1f5fa8", "attention": "#7b4fa0", "convolution": "#0e9aa7", "normalization": "#e08a00",
    "softmax": "#c2408f", "elementwise": "#2e8b57", "reduction": "#8c6d31", "indexing": "#4c9a2a",
    "copy": "#5a6270", "fill": "#9aa3ad", "communication": "#d1495b", "unknown": "#000000",
    "allocation": "#cccccc", "view": "#cccccc",
}

esc = html.escape


def fmt_number(v: float, unit: str = "") -> str:
    """3 significant digits with an SI prefix: 1.23 T, 456 M, 0.5."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}{unit}"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= factor:
            return f"{v / factor:.3g} {prefix}{unit}".rstrip()
    for factor, prefix in ((1e-3, "m"), (1e-6, "µ"), (1e-9, "n")):
        if abs(v) < 1 and abs(v) >= factor:
            return f"{v / factor:.3g} {prefix}{unit}".rstrip()
    return f"{v:.3g}{(' ' + unit) if unit else ''}"


def fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_bytes(b: float) -> str:
    return f"{b / 1024**3:,.2f} GiB" if abs(b) >= 1024**3 / 10 else f"{b / 1024**2:,.1f} MiB"


@dataclass
class Scale:
    lo: float
    hi: float
    a: float  # pixel of lo
    b: float  # pixel of hi
    log: bool = False

    def __post_init__(self) -> None:
        if self.log:
            self.lo, self.hi = max(self.lo, 1e-300), max(self.hi, 1e-300)
            if self.hi <= self.lo:
                self.lo, self.hi = self.lo / 10, self.lo * 10
        elif self.hi <= self.lo:
            self.hi = self.lo + (abs(self.lo) or 1.0)

    def __call__(self, v: float) -> float:
        if self.log:
            t = (math.log10(max(v, 1e-300)) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            t = (v - self.lo) / (self.hi - self.lo)
        return self.a + t * (self.b - self.a)

    def ticks(self, count: int = 5) -> list[float]:
        if self.log:
            first, last = math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi))
            step = max(1, math.ceil((last - first) / 8))
            return [10.0**e for e in range(first, last + 1, step) if self.lo * (1 - 1e-9) <= 10.0**e <= self.hi * (1 + 1e-9)]
        raw = (self.hi - self.lo) / max(count, 1)
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
        start = math.ceil(self.lo / step - 1e-9) * step
        out, v = [], start
        while v <= self.hi + step * 1e-9:
            out.append(round(v, 12))
            v += step
        return out


def padded_log_range(values: Sequence[float], pad: float = 1.6) -> tuple[float, float]:
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    if not vals:
        return 1.0, 10.0
    return min(vals) / pad, max(vals) * pad


@dataclass
class Frame:
    """A plot area inside an SVG: margins around it hold the axes."""
    width: int
    height: int
    left: int = 70
    right: int = 20
    top: int = 30
    bottom: int = 46

    @property
    def x0(self) -> float:
        return self.left

    @property
    def x1(self) -> float:
        return self.width - self.right

    @property
    def y0(self) -> float:  # bottom pixel
        return self.height - self.bottom

    @property
    def y1(self) -> float:  # top pixel
        return self.top


def svg_open(frame: Frame, cls: str, title: str = "", attrs: dict | None = None) -> list[str]:
    extra = "".join(f' {k}="{esc(str(v))}"' for k, v in (attrs or {}).items())
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {cls}" viewBox="0 0 {frame.width} {frame.height}" '
           f'width="{frame.width}" height="{frame.height}" role="img"{extra}>']
    if title:
        out.append(f'<text class="chart-title" x="{frame.x0}" y="16">{esc(title)}</text>')
    return out


def axes(frame: Frame, xs: Scale, ys: Scale, *, x_label: str, y_label: str,
         x_fmt: Callable[[float], str] = fmt_number, y_fmt: Callable[[float], str] = fmt_number,
         grid: bool = True, x_ticks: Sequence[float] | None = None) -> list[str]:
    """`x_ticks` (e.g. the values a sweep took) replaces the scale's own ticks."""
    out = ['<g class="axes">']
    for v in (x_ticks if x_ticks else xs.ticks()):
        x = xs(v)
        if grid:
            out.append(f'<line class="grid" x1="{x:.1f}" y1="{frame.y1}" x2="{x:.1f}" y2="{frame.y0}"/>')
        out.append(f'<text class="tick" x="{x:.1f}" y="{frame.y0 + 15}" text-anchor="middle">{esc(x_fmt(v))}</text>')
    for v in ys.ticks():
        y = ys(v)
        if grid:
            out.append(f'<line class="grid" x1="{frame.x0}" y1="{y:.1f}" x2="{frame.x1}" y2="{y:.1f}"/>')
        out.append(f'<text class="tick" x="{frame.x0 - 5}" y="{y + 4:.1f}" text-anchor="end">{esc(y_fmt(v))}</text>')
    out.append(f'<line class="axis" x1="{frame.x0}" y1="{frame.y0}" x2="{frame.x1}" y2="{frame.y0}"/>')
    out.append(f'<line class="axis" x1="{frame.x0}" y1="{frame.y1}" x2="{frame.x0}" y2="{frame.y0}"/>')
    out.append(f'<text class="label" x="{(frame.x0 + frame.x1) / 2:.1f}" y="{frame.height - 8}" '
               f'text-anchor="middle">{esc(x_label)}</text>')
    out.append(f'<text class="label" transform="translate(14 {(frame.y0 + frame.y1) / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{esc(y_label)}</text>')
    out.append("</g>")
    return out


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]
    colour: str = ""
    tips: list[str] = field(default_factory=list)  # one tooltip per point (else x, y)
    hollow: list[bool] = field(default_factory=list)  # per point: drawn as an open circle (e.g. does not fit)
    dashed: bool = False
    markers: bool = True
    step: bool = False  # a step function: each y holds until the next x


def legend(frame: Frame, names: Sequence[tuple[str, str]], y: float | None = None) -> list[str]:
    """Right-aligned above the plot area (the title sits on the left). An entry with no colour
    explains the open marker."""
    widths = [28 + 7 * len(name) for name, _ in names]
    out, x = ['<g class="legend">'], max(frame.x0 + frame.width / 2.5, frame.x1 - sum(widths))
    y = frame.y1 - 14 if y is None else y
    for name, colour in names:
        mark = (f'<rect x="{x}" y="{y - 8}" width="12" height="4" fill="{colour}"/>' if colour else
                f'<circle cx="{x + 6}" cy="{y - 6}" r="4" style="fill:#fff;stroke:#555;stroke-width:2"/>')
        out.append(f'{mark}<text x="{x + 16}" y="{y - 3}">{esc(name)}</text>')
        x += 28 + 7 * len(name)
    out.append("</g>")
    return out


def line_chart(series: Sequence[Series], *, cls: str, title: str, x_label: str, y_label: str,
               log_x: bool = False, log_y: bool = False, width: int = 640, height: int = 360,
               x_fmt: Callable[[float], str] = fmt_number, y_fmt: Callable[[float], str] = fmt_number,
               y_min: float | None = None, x_range: tuple[float, float] | None = None,
               y_range: tuple[float, float] | None = None, hlines: Sequence[tuple[float, str, str]] = (),
               attrs: dict | None = None, x_ticks: Sequence[float] | None = None, hollow_label: str = "") -> str:
    """Series as polylines (or steps) with a marker per point; `hlines` are (y, label, colour)
    reference lines such as a memory limit; `x_ticks` replaces the automatic x ticks; points a
    series marks `hollow` are open circles, named `hollow_label` in the legend."""
    frame = Frame(width, height, top=34 if len(series) > 1 else 30)
    xs_all = [x for s in series for x, _ in s.points]
    ys_all = [y for s in series for _, y in s.points] + [h[0] for h in hlines]
    if x_range is None:
        x_range = padded_log_range(xs_all, 1.15) if log_x else (min(xs_all, default=0.0), max(xs_all, default=1.0))
    if y_range is None:
        if log_y:
            y_range = padded_log_range(ys_all, 1.3)
        else:
            lo = min(ys_all + [0.0]) if y_min is None else y_min
            y_range = (lo, max(ys_all, default=1.0) * 1.08 or 1.0)
    xs = Scale(x_range[0], x_range[1], frame.x0, frame.x1, log_x)
    ys = Scale(y_range[0], y_range[1], frame.y0, frame.y1, log_y)
    out = svg_open(frame, cls, title, attrs)
    out += axes(frame, xs, ys, x_label=x_label, y_label=y_label, x_fmt=x_fmt, y_fmt=y_fmt, x_ticks=x_ticks)
    labelled: list[float] = []
    for y, label, colour in hlines:
        py = ys(y)
        # A line too close to a labelled one keeps its label in its tooltip only.
        shown = "" if any(abs(py - q) < 13 for q in labelled) else label
        labelled.append(py)
        out.append(f'<line class="ref" x1="{frame.x0}" y1="{py:.1f}" x2="{frame.x1}" y2="{py:.1f}" stroke="{colour}">'
                   f'<title>{esc(label)}</title></line>'
                   f'<text class="ref-label" x="{frame.x1 - 4}" y="{py - 4:.1f}" text-anchor="end" fill="{colour}">{esc(shown)}</text>')
    for i, s in enumerate(series):
        colour = s.colour or PALETTE[i % len(PALETTE)]
        pts = s.points
        if s.step and pts:
            coords = []
            for j, (x, y) in enumerate(pts):
                if j:
                    coords.append(f"{xs(x):.2f},{ys(pts[j - 1][1]):.2f}")
                coords.append(f"{xs(x):.2f},{ys(y):.2f}")
        else:
            coords = [f"{xs(x):.2f},{ys(y):.2f}" for x, y in pts]
        dash = ' stroke-dasharray="5 4"' if s.dashed else ""
        out.append(f'<polyline class="series" data-series="{esc(s.name)}" data-points="{len(pts)}" '
                   f'points="{" ".join(coords)}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        if s.markers:
            out.append(f'<g class="markers" data-series="{esc(s.name)}">')
            for j, (x, y) in enumerate(pts):
                tip = s.tips[j] if j < len(s.tips) else f"{s.name}: {x_fmt(x)}, {y_fmt(y)}"
                if j < len(s.hollow) and s.hollow[j]:
                    # Inline style: the stylesheet's white outline of a marker would hide an open one.
                    out.append(f'<circle class="pt hollow" cx="{xs(x):.2f}" cy="{ys(y):.2f}" r="4" '
                               f'style="fill:#fff;fill-opacity:1;stroke:{colour};stroke-width:2">'
                               f'<title>{esc(tip)}</title></circle>')
                else:
                    out.append(f'<circle class="pt" cx="{xs(x):.2f}" cy="{ys(y):.2f}" r="3.5" fill="{colour}">'
                               f'<title>{esc(tip)}</title></circle>')
            out.append("</g>")
    open_marks = hollow_label and any(any(s.hollow) for s in series)
    if len(series) > 1 or open_marks:
        names = [(s.name, s.colour or PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)]
        out += legend(frame, names + ([(hollow_label, "")] if open_marks else []), y=frame.y1 - 8)
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(items: Sequence[tuple[str, float, str, str]], *, cls: str, title: str, value_fmt: Callable[[float], str],
              width: int = 640, label_width: int = 230, bar_height: int = 18, attrs: dict | None = None) -> str:
    """Horizontal bars: (label, value, colour, tooltip), largest first as given."""
    height = 30 + len(items) * (bar_height + 6) + 10
    frame = Frame(width, height, left=label_width, right=90, top=30, bottom=10)
    top = max((v for _, v, _, _ in items), default=1.0) or 1.0
    out = svg_open(frame, cls, title, attrs)
    for i, (label, value, colour, tip) in enumerate(items):
        y = frame.y1 + i * (bar_height + 6)
        w = max(0.0, (frame.x1 - frame.x0) * value / top)
        room = max(8, int((label_width - 12) / 6.2))  # characters that fit at 11 px
        short = label if len(label) <= room else "…" + label[-(room - 1):]
        out.append(f'<g class="bar"><title>{esc(tip)}</title>'
                   f'<text class="tick" x="{frame.x0 - 6}" y="{y + bar_height - 5}" text-anchor="end">{esc(short)}</text>'
                   f'<rect x="{frame.x0}" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{colour}"/>'
                   f'<text class="tick" x="{frame.x0 + w + 5:.1f}" y="{y + bar_height - 5}">{esc(value_fmt(value))}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


@dataclass
class Lane:
    name: str
    spans: list[tuple[float, float, str, str, str]]  # start, end, colour, label, tooltip


def lanes_chart(lanes: Sequence[Lane], *, cls: str, title: str, total: float, width: int = 1100,
                lane_height: int = 22, time_fmt: Callable[[float], str] = fmt_seconds,
                attrs: dict | None = None, max_rects: int = 20000) -> str:
    """A timeline: one row per lane, a rect per span. The spans sit in an inner <svg> whose
    viewBox (in microseconds) the page's script narrows to zoom (wheel) and pan (drag); its axis
    ticks are redrawn by the script. Runs of spans narrower than a pixel at full view are
    drawn as one rect of their colour when a lane has more than `max_rects` spans."""
    label_w, axis_h = 150, 26
    plot_w = width - label_w - 20
    height = 30 + lane_height * len(lanes) + axis_h
    total = total if total > 0 else 1.0
    us = 1e6  # the inner viewBox is in microseconds: no coordinates near float precision
    lanes = [Lane(lane.name, [(a * us, b * us, c, d, e) for a, b, c, d, e in lane.spans]) for lane in lanes]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart lanes {cls}" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" data-total-us="{total * us!r}" data-plot-x="{label_w}" '
           f'data-plot-w="{plot_w}"' + "".join(f' {k}="{esc(str(v))}"' for k, v in (attrs or {}).items()) + ">"]
    out.append(f'<text class="chart-title" x="{label_w}" y="16">{esc(title)}</text>')
    for i, lane in enumerate(lanes):
        y = 28 + i * lane_height
        out.append(f'<text class="tick" x="{label_w - 6}" y="{y + lane_height / 2 + 4:.1f}" text-anchor="end">{esc(lane.name)}</text>')
    inner_h = lane_height * len(lanes)
    out.append(f'<svg class="zoom" x="{label_w}" y="28" width="{plot_w}" height="{inner_h}" '
               f'viewBox="0 0 {total * us!r} {inner_h}" preserveAspectRatio="none">')
    scale = total * us / plot_w  # microseconds per pixel
    for i, lane in enumerate(lanes):
        y = i * lane_height + 2
        spans = lane.spans
        if len(spans) > max_rects:
            merged: list[list] = []
            for s in spans:
                if merged and merged[-1][2] == s[2] and s[1] - merged[-1][0] < scale:
                    merged[-1][1] = s[1]
                    merged[-1][4] = ""
                else:
                    merged.append(list(s))
            spans = [tuple(m) for m in merged]
        out.append(f'<g class="lane" data-lane="{esc(lane.name)}" data-spans="{len(lane.spans)}">')
        for start, end, colour, label, tip in spans:
            tip_el = f"<title>{esc(tip)}</title>" if tip else ""
            out.append(f'<rect class="span" x="{start!r}" y="{y}" width="{max(end - start, 0.0)!r}" '
                       f'height="{lane_height - 4}" fill="{colour}">{tip_el}</rect>')
        out.append("</g>")
    out.append("</svg>")
    axis_y = 28 + inner_h
    out.append(f'<line class="axis" x1="{label_w}" y1="{axis_y}" x2="{label_w + plot_w}" y2="{axis_y}"/>')
    out.append(f'<g class="time-ticks" data-y="{axis_y}">')
    for k in range(6):
        t = total * k / 5
        x = label_w + plot_w * k / 5
        out.append(f'<text class="tick" x="{x:.1f}" y="{axis_y + 15}" text-anchor="middle">{esc(time_fmt(t))}</text>')
    out.append("</g></svg>")
    return "\n".join(out)
