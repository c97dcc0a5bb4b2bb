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


_SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt_number(v: float, unit: str = "") -> str:
    """3 significant digits with an SI prefix from k up: 1.23 T, 456 M, 0.5 (no milli or micro:
    a count or a ratio below one is written as a decimal)."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}{(' ' + unit) if unit else ''}"
    for factor, prefix in _SI_PREFIXES:
        if abs(v) >= factor:
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


def time_unit(longest_s: float) -> tuple[str, float]:
    """The unit a time axis reaching `longest_s` is written in, and its factor from seconds."""
    if longest_s >= 1:
        return "s", 1.0
    if longest_s >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def step_decimals(step: float) -> int:
    """The decimals that write every multiple of `step` exactly: 0.25 -> 2, 0.5 -> 1, 20 -> 0."""
    step = abs(step)
    for d in range(13):
        scaled = step * 10**d
        if abs(scaled - round(scaled)) <= 1e-6 * max(scaled, 1e-300):
            return d
    return 12


def linear_tick_labels(ticks: Sequence[float]) -> list[str]:
    """Labels of evenly spaced ticks, all in one style: as many decimals as the step needs
    (0.0 0.2 … 1.0; 0 5 10), thousands separated (2,500), an SI prefix from 10,000 up, the same
    for every tick (0 · 20 k · 40 k). Never a milli or micro prefix."""
    if not ticks:
        return []
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else (abs(ticks[0]) or 1.0)
    largest = max(abs(t) for t in ticks)
    factor, prefix = 1.0, ""
    if largest >= 1e4:
        factor, prefix = next((f, p) for f, p in _SI_PREFIXES if largest >= f)
    decimals = step_decimals(step / factor)
    out = []
    for t in ticks:
        v = t / factor
        if abs(v) < step / factor * 1e-9:
            v = 0.0  # no "-0"
        out.append("0" if v == 0 and prefix else f"{v:,.{decimals}f}" + (f" {prefix}" if prefix else ""))
    return out


def log_tick_label(v: float) -> str:
    """A tick of a log axis: 0.01 · 0.5 · 20 · 500 · 1 k · 50 k · 1 M (1e-05 below 0.0001)."""
    if v >= 1e3:
        factor, prefix = next((f, p) for f, p in _SI_PREFIXES if v >= f)
        return f"{v / factor:,.{step_decimals(round(v / factor, 9))}f} {prefix}"
    if v >= 1e-4:
        return f"{v:,.{step_decimals(round(v, 12))}f}"
    return f"{v:.0e}"


_NICE_STEPS = (1, 2, 2.5, 5, 10)
_NICE_INTEGER_STEPS = (1, 2, 5, 10)


@dataclass
class Scale:
    """Data values [lo, hi] onto pixels [a, b], linear or log. `nice()` widens the range to whole
    ticks (so the first and last ticks bound the data); `ticks()` are round values inside it,
    `tick_labels()` their text. An integer scale (a count) has whole-number ticks."""
    lo: float
    hi: float
    a: float  # pixel of lo
    b: float  # pixel of hi
    log: bool = False
    integer: bool = False
    step: float = 0.0  # linear: the tick step nice() chose (0: from the range)
    mantissas: tuple[float, ...] = ()  # log: the ticks' mantissas nice() chose ((1,) powers of ten; (): linear ticks)

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

    def _linear_step(self, lo: float, hi: float, count: int) -> float:
        raw = (hi - lo) / max(count, 1)
        if self.integer:
            raw = max(raw, 1.0)
        mag = 10 ** math.floor(math.log10(raw))
        return next(m * mag for m in (_NICE_INTEGER_STEPS if self.integer else _NICE_STEPS) if m * mag >= raw * (1 - 1e-9))

    def _log_mantissas(self) -> tuple[float, ...]:
        decades = math.log10(self.hi / self.lo)
        if decades >= 2.5:
            return (1,)
        if decades >= 0.6:
            return (1, 2, 5)
        return ()

    def _log_candidates(self, mantissas: tuple[float, ...], lo: float, hi: float) -> list[float]:
        first, last = math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1
        stride = max(1, math.ceil((last - first - 2) / 8)) if mantissas == (1,) else 1
        return [float(f"{m}e{e}") for e in range(first, last + 1) for m in mantissas
                if mantissas != (1,) or (e - first) % stride == 0]

    def nice(self, count: int = 5) -> "Scale":
        """Widens the range to the nearest ticks outside it."""
        if self.log:
            self.mantissas = self._log_mantissas()
            if self.mantissas:
                cands = self._log_candidates(self.mantissas, self.lo, self.hi)
                self.lo = max((c for c in cands if c <= self.lo * (1 + 1e-9)), default=self.lo)
                self.hi = min((c for c in cands if c >= self.hi * (1 - 1e-9)), default=self.hi)
                return self
            step = self._linear_step(self.lo, self.hi, count)
            lo = math.floor(self.lo / step + 1e-9) * step
            self.lo = lo if lo > 0 else self.lo
            self.hi = math.ceil(self.hi / step - 1e-9) * step
            self.step = step
            return self
        step = self._linear_step(self.lo, self.hi, count)
        self.lo = math.floor(self.lo / step + 1e-9) * step
        self.hi = math.ceil(self.hi / step - 1e-9) * step
        self.step = step
        return self

    def _linear_ticks(self, count: int) -> list[float]:
        step = self.step or self._linear_step(self.lo, self.hi, count)
        first, last = math.ceil(self.lo / step - 1e-9), math.floor(self.hi / step + 1e-9)
        return [round(i * step, 12) for i in range(first, last + 1) if not (self.log and i * step <= 0)]

    def ticks(self, count: int = 5) -> list[float]:
        if not self.log:
            return self._linear_ticks(count)
        mantissas = self.mantissas if self.mantissas or self.step else self._log_mantissas()
        if mantissas:
            inside = [c for c in self._log_candidates(mantissas, self.lo, self.hi)
                      if self.lo * (1 - 1e-9) <= c <= self.hi * (1 + 1e-9)]
            if len(inside) >= 2:
                return inside
        return self._linear_ticks(count)

    def tick_labels(self, ticks: Sequence[float]) -> list[str]:
        return [log_tick_label(t) for t in ticks] if self.log else linear_tick_labels(ticks)


def _value_text(v: float) -> str:
    """A value as people write it: 2,000 · 0.5 · 1.2e+07."""
    return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:.3g}"


def wants_log(values: Sequence[float]) -> bool:
    """A log axis for positive values spanning a factor of ten or more."""
    return bool(values) and min(values) > 0 and max(values) / min(values) >= 10


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
         x_fmt: Callable[[float], str] | None = None, grid: bool = True,
         x_ticks: Sequence[float] | None = None) -> list[str]:
    """Ticks, grid, axis lines and titles (each title names its unit). The scales label their
    own ticks; `x_ticks` (e.g. the values a sweep took) replaces the x scale's, written by
    `x_fmt`. A tick's label sits exactly at its value: x ticks centred on it, y ticks
    vertically centred on it."""
    out = [f'<g class="axes" data-x-scale="{"log" if xs.log else "linear"}" data-y-scale="{"log" if ys.log else "linear"}">']
    if x_ticks:
        x_values = list(x_ticks)
        x_texts = [(x_fmt or _value_text)(v) for v in x_values]
    else:
        x_values = xs.ticks()
        x_texts = xs.tick_labels(x_values)
    for v, text in zip(x_values, x_texts):
        x = xs(v)
        if grid:
            out.append(f'<line class="grid" x1="{x:.2f}" y1="{frame.y1}" x2="{x:.2f}" y2="{frame.y0}"/>')
        out.append(f'<text class="tick x-tick" x="{x:.2f}" y="{frame.y0 + 15}" text-anchor="middle">{esc(text)}</text>')
    y_values = ys.ticks()
    for v, text in zip(y_values, ys.tick_labels(y_values)):
        y = ys(v)
        if grid:
            out.append(f'<line class="grid" x1="{frame.x0}" y1="{y:.2f}" x2="{frame.x1}" y2="{y:.2f}"/>')
        out.append(f'<text class="tick y-tick" x="{frame.x0 - 5}" y="{y:.2f}" dominant-baseline="central" '
                   f'text-anchor="end">{esc(text)}</text>')
    out.append(f'<line class="axis" x1="{frame.x0}" y1="{frame.y0}" x2="{frame.x1}" y2="{frame.y0}"/>')
    out.append(f'<line class="axis" x1="{frame.x0}" y1="{frame.y1}" x2="{frame.x0}" y2="{frame.y0}"/>')
    out.append(f'<text class="label x-label" x="{(frame.x0 + frame.x1) / 2:.1f}" y="{frame.height - 8}" '
               f'text-anchor="middle">{esc(x_label)}</text>')
    out.append(f'<text class="label y-label" transform="translate(14 {(frame.y0 + frame.y1) / 2:.1f}) rotate(-90)" '
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
    line: bool = True  # False: markers only (a scatter)


LEGEND_ROW = 16  # pixels per row of a legend under the title


def _legend_width(name: str) -> float:
    return 28 + 7 * len(name)  # a swatch and 11 px text


def _title_end(left: float, title: str) -> float:
    return left + 7.5 * len(title) + 16 if title else left  # 13 px bold


def legend_rows(frame_width: int, left: float, right: float, title: str, names: Sequence[str]) -> int:
    """Rows the legend takes under the title: 0 when it fits on the title's line, right-aligned."""
    if _title_end(left, title) + sum(_legend_width(n) for n in names) <= frame_width - right:
        return 0
    rows, used = 1, 0.0
    for n in names:
        w = _legend_width(n)
        if used and left + used + w > frame_width - right:
            rows, used = rows + 1, 0.0
        used += w
    return rows


def legend(frame: Frame, names: Sequence[tuple[str, str]], *, title: str = "", rows: int = 0) -> list[str]:
    """Right-aligned on the title's line, clear of the title (rows == 0), or left-aligned in
    `rows` rows under it (legend_rows). An entry with no colour explains the open marker."""
    out = ['<g class="legend">']
    if rows == 0:
        x, y = max(_title_end(frame.x0, title), frame.x1 - sum(_legend_width(n) for n, _ in names)), 19.0
    else:
        x, y = frame.x0, 19.0 + LEGEND_ROW
    for name, colour in names:
        if rows and x > frame.x0 and x + _legend_width(name) > frame.x1:
            x, y = frame.x0, y + LEGEND_ROW
        mark = (f'<rect x="{x}" y="{y - 8}" width="12" height="4" fill="{colour}"/>' if colour else
                f'<circle cx="{x + 6}" cy="{y - 6}" r="4" style="fill:#fff;stroke:#555;stroke-width:2"/>')
        out.append(f'{mark}<text x="{x + 16}" y="{y - 3}">{esc(name)}</text>')
        x += _legend_width(name)
    out.append("</g>")
    return out


def line_chart(series: Sequence[Series], *, cls: str, title: str, x_label: str, y_label: str,
               log_x: bool = False, log_y: bool = False, width: int = 640, height: int = 360,
               x_fmt: Callable[[float], str] = _value_text, y_fmt: Callable[[float], str] = _value_text,
               x_min: float | None = None, y_min: float | None = None, x_range: tuple[float, float] | None = None,
               y_range: tuple[float, float] | None = None, hlines: Sequence[tuple[float, str, str]] = (),
               attrs: dict | None = None, x_ticks: Sequence[float] | None = None, hollow_label: str = "",
               y_integer: bool = False) -> str:
    """Series as polylines (or steps) with a marker per point; `hlines` are (y, label, colour)
    reference lines such as a memory limit; `x_ticks` replaces the automatic x ticks (labelled
    by `x_fmt`); points a series marks `hollow` are open circles, named `hollow_label` in the
    legend. `x_fmt` and `y_fmt` write a point's values in its default tooltip.

    An axis whose range is not given spans the data (and `x_min` / `y_min`, e.g. 0), widened to
    whole ticks: its first and last ticks bound every point. `y_integer`: the y axis counts
    things, its ticks are whole numbers."""
    xs_all = [x for s in series for x, _ in s.points]
    ys_all = [y for s in series for _, y in s.points] + [h[0] for h in hlines]
    open_marks = bool(hollow_label) and any(any(s.hollow) for s in series)
    names = [(s.name, s.colour or PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)]
    names += [(hollow_label, "")] if open_marks else []
    show_legend = len(series) > 1 or open_marks
    rows = legend_rows(width, 70, 20, title, [n for n, _ in names]) if show_legend else 0
    frame = Frame(width, height, top=30 + LEGEND_ROW * rows)
    if x_range is None:
        if log_x:
            x_range = padded_log_range(xs_all, 1.15)
        else:
            lo = min(xs_all, default=0.0) if x_min is None else min([x_min] + xs_all)
            x_range = (lo, max(xs_all, default=1.0))
        nice_x = not x_ticks
    else:
        nice_x = False
    if y_range is None:
        if log_y:
            y_range = padded_log_range(ys_all, 1.05)
        else:
            lo = min(ys_all + [0.0]) if y_min is None else min([y_min] + ys_all)
            y_range = (lo, max(ys_all, default=1.0))
        nice_y = True
    else:
        nice_y = False
    xs = Scale(x_range[0], x_range[1], frame.x0, frame.x1, log_x)
    ys = Scale(y_range[0], y_range[1], frame.y0, frame.y1, log_y, integer=y_integer)
    if nice_x:
        xs.nice()
    if nice_y:
        ys.nice()
    out = svg_open(frame, cls, title, attrs)
    out += axes(frame, xs, ys, x_label=x_label, y_label=y_label, x_fmt=x_fmt, x_ticks=x_ticks)
    labelled: list[float] = []
    for y, label, colour in hlines:
        py = ys(y)
        # A line too close to a labelled one keeps its label in its tooltip only.
        shown = "" if any(abs(py - q) < 13 for q in labelled) else label
        labelled.append(py)
        out.append(f'<line class="ref" x1="{frame.x0}" y1="{py:.2f}" x2="{frame.x1}" y2="{py:.2f}" stroke="{colour}">'
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
        if s.line:
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
    if show_legend:
        out += legend(frame, names, title=title, rows=rows)
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


def time_ticks(t0_s: float, t1_s: float) -> tuple[str, list[tuple[float, str]]]:
    """A time axis from t0_s to t1_s: its unit (from the span shown) and its ticks as (seconds,
    label), round values in that unit (a larger unit where the times would reach 10,000).
    report.js's timeTicks draws the same when zooming."""
    unit, factor = time_unit(t1_s - t0_s)
    while factor > 1 and t1_s * factor >= 1e4:
        unit, factor = time_unit(1e4 / factor)
    scale = Scale(t0_s * factor, t1_s * factor, 0.0, 1.0)
    ticks = scale.ticks(6)
    return unit, [(t / factor, text) for t, text in zip(ticks, linear_tick_labels(ticks))]


def lanes_chart(lanes: Sequence[Lane], *, cls: str, title: str, total: float, width: int = 1100,
                lane_height: int = 22, attrs: dict | None = None, max_rects: int = 20000) -> str:
    """A timeline: one row per lane, a rect per span. The spans sit in an inner <svg> whose
    viewBox (in microseconds) the page's script narrows to zoom (wheel) and pan (drag); its axis
    ticks and title are redrawn by the script (time_ticks). Runs of spans narrower than a pixel
    at full view are drawn as one rect of their colour when a lane has more than `max_rects` spans."""
    label_w, axis_h = 150, 42
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
    unit, ticks = time_ticks(0.0, total)
    out.append(f'<g class="time-ticks" data-y="{axis_y}">')
    for t, text in ticks:
        x = label_w + plot_w * t / total
        out.append(f'<text class="tick x-tick" x="{x:.2f}" y="{axis_y + 15}" text-anchor="middle">{esc(text)}</text>')
    out.append("</g>")
    out.append(f'<text class="label x-label" x="{label_w + plot_w / 2:.1f}" y="{axis_y + 34}" '
               f'text-anchor="middle">time ({unit})</text></svg>')
    return "\n".join(out)
