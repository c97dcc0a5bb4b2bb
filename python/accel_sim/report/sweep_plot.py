"""A `sweep` as a picture: the chosen metric against the swept parameter, one line per device,
a marker per point (its figures in the tooltip; open where the point does not fit in memory).
.html is a self-contained report page (the chart and the sortable table; html_report.py), .svg
the chart alone with its styles inline, .png the same chart drawn by matplotlib
(`pip install "accel-sim[plot]"`)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from accel_sim.errors import UsageError
from accel_sim.report.svg import PALETTE, Series, line_chart, wants_log

FORMATS = (".png", ".svg", ".html")
_PNG_HINT = 'writing a .png needs matplotlib: pip install "accel-sim[plot]" (or write .svg / .html)'
HOLLOW_LABEL = "does not fit in memory"


def check_plot_path(path: str) -> None:
    """Usage errors of --plot before the sweep runs: the format, and matplotlib for a .png."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(f"--plot writes .png, .svg or .html (got {path})")
    if suffix == ".png":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError(_PNG_HINT) from None


def value_label(v: float) -> str:
    """A swept value or a plotted figure as people write it: 2,000 · 0.5 · 1.2e+07."""
    return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:.3g}"


class SweepFigure:
    """The rows of a sweep as series, and the axes' choices, shared by the SVG and the PNG."""

    def __init__(self, rows: Sequence[dict], *, parameter: str, x_label: str, metric_key: str, metric_scale: float,
                 y_label: str, title: str, values: Sequence[float], log_x: bool):
        self.parameter, self.x_label, self.y_label, self.title = parameter, x_label, y_label, title
        self.values, self.log_x = list(values), log_x
        by_device: dict[str, list[dict]] = {}
        for r in rows:
            by_device.setdefault(r["device"], [])
            if r.get(metric_key) is not None:  # tokens/s of a graph file is unknown
                by_device[r["device"]].append(r)
        self.series = []
        for i, (device, points) in enumerate(by_device.items()):
            points = sorted(points, key=lambda r: r[parameter])
            ys = [r[metric_key] * metric_scale for r in points]
            tips = [f"{device}: {x_label} {value_label(r[parameter])} → {y_label} {value_label(y)}; "
                    f"{r['bound']}-bound; {'fits' if r['fits'] else HOLLOW_LABEL}" for r, y in zip(points, ys)]
            self.series.append(Series(device, [(r[parameter], y) for r, y in zip(points, ys)],
                                      colour=PALETTE[i % len(PALETTE)], tips=tips,
                                      hollow=[not r["fits"] for r in points]))
        ys = [y for s in self.series for _, y in s.points]
        # Log-log where the x axis is logarithmic and the figure spans a decade: power laws are lines.
        self.log_y = log_x and wants_log(ys)
        if not ys:
            raise UsageError(f"no point has a value of {metric_key} to plot")

    @property
    def short_title(self) -> str:
        """'latency vs memory bandwidth (GB/s)'."""
        return f"{self.y_label.split(' (')[0]} vs {self.x_label}"

    def svg(self, *, title: str | None = None, width: int = 880, height: int = 440) -> str:
        ticks = self.values if len(self.values) <= 12 and not (self.log_x and len(self.values) > 8) else None
        return line_chart(self.series, cls="sweep", title=self.title if title is None else title, x_label=self.x_label, y_label=self.y_label,
                          log_x=self.log_x, log_y=self.log_y, width=width, height=height, x_fmt=value_label,
                          y_fmt=value_label, y_min=None if self.log_y else 0.0, x_ticks=ticks,
                          hollow_label=HOLLOW_LABEL)


def _png(path: str, figure: SweepFigure) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(_PNG_HINT) from None
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for s in figure.series:
        ax.plot([x for x, _ in s.points], [y for _, y in s.points], color=s.colour, linewidth=2, label=s.name)
        for (x, y), hollow in zip(s.points, s.hollow):
            ax.plot([x], [y], "o", markersize=6, color=s.colour, markerfacecolor="white" if hollow else s.colour,
                    markeredgewidth=2 if hollow else 1)
    if any(any(s.hollow) for s in figure.series):
        ax.plot([], [], "o", color="#555", markerfacecolor="white", markeredgewidth=2, label=HOLLOW_LABEL)
    if figure.log_x:
        ax.set_xscale("log")
    if figure.log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    if len(figure.values) <= 12:
        ax.set_xticks(figure.values)
        ax.set_xticklabels([value_label(v) for v in figure.values])
        if figure.log_x:
            ax.minorticks_off()
    ax.set_xlabel(figure.x_label)
    ax.set_ylabel(figure.y_label)
    ax.set_title(figure.title, fontsize=11)
    ax.grid(True, color="#edf0f3")
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as e:
        raise UsageError(f"cannot write the plot to {path}: {e.strerror}") from None
    finally:
        plt.close(fig)


def sweep_html(figure: SweepFigure, *, heading: str, subtitle: str, table_headers: Sequence[str],
               table_rows: Sequence[Sequence[str]], numeric: Sequence[bool], note: str = "") -> str:
    from accel_sim.report.html_report import card, html_table, page

    return page(heading, subtitle, [
        card(figure.short_title, figure.svg(title=""), cls="sweep-chart",
             note="Hover a marker for its figures; an open marker is a point that does not fit in memory."),
        card("Every point", html_table(table_headers, table_rows, numeric, cls="sweep-points"), note=note),
    ])


def write_sweep_plot(path: str, figure: SweepFigure, *, heading: str = "", subtitle: str = "",
                     table_headers: Sequence[str] = (), table_rows: Sequence[Sequence[str]] = (),
                     numeric: Sequence[bool] = (), note: str = "") -> None:
    from accel_sim.report.html_report import standalone_svg

    check_plot_path(path)
    suffix = Path(path).suffix.lower()
    if suffix == ".png":
        _png(path, figure)
        return
    doc = (sweep_html(figure, heading=heading or figure.title, subtitle=subtitle, table_headers=table_headers,
                      table_rows=table_rows, numeric=numeric, note=note)
           if suffix == ".html" else standalone_svg(figure.title, [figure.svg(title="")], "sweep"))
    try:
        Path(path).write_text(doc, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write the plot to {path}: {e.strerror}") from None

