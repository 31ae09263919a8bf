"""Charts (charts.model) as PNG files: matplotlib, no display needed."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from dlbench.atomic import write_atomic
from dlbench.errors import UserError
from dlbench.report.charts.model import BarChart, CurveChart

if TYPE_CHECKING:  # matplotlib is imported where a chart is drawn (pyplot())
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

BAR_COLOR = "#4c72b0"


def pyplot() -> ModuleType:
    """matplotlib.pyplot on the file-only Agg backend, or a UserError naming the extra."""
    try:
        import matplotlib
    except ImportError:
        raise UserError("--plots needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")  # files only; never open a window
    # Labels are case names, model file names and run ids, never math: read as
    # mathtext, a "$" in one (a file called "a$b.onnx") fails the whole drawing.
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def save_png(figure: Figure, path: Path) -> Path:
    """Write a figure as `path`, atomically; a path that cannot be written (a file in
    the folder's place, a read-only folder, a full disk) is a UserError naming it."""
    try:
        write_atomic(path, lambda temp: figure.savefig(temp, dpi=110, format="png"))
    finally:
        pyplot().close(figure)
    return path


# Titles wrap at this many characters: a longer line ran past the figure's edge.
TITLE_CHARS = 60


def wrapped(title: str, width: int = TITLE_CHARS) -> str:
    return "\n".join(textwrap.wrap(title, width))


def plain_numbers(axis: Axis) -> None:
    """Tick labels as the tables write numbers (28,800; 0.0123), where matplotlib's own
    would write 2.88e+04 or an offset above the axis."""
    from matplotlib.ticker import FuncFormatter

    from dlbench.report.table import fmt

    def tick(value: float, _position: int) -> str:
        text = fmt(value)  # three significant digits: 50.0 on a tick reads as 50
        return text.rstrip("0").rstrip(".") if "." in text else text

    axis.set_major_formatter(FuncFormatter(tick))


def _error_bars(chart: BarChart) -> list[list[float]]:
    """Each bar's distance down and up to its error bar's ends (0 where it has none)."""
    bars = chart.bars
    return [
        [bar.value - bar.low if bar.low is not None else 0.0 for bar in bars],
        [bar.high - bar.value if bar.high is not None else 0.0 for bar in bars],
    ]


def bar_chart(chart: BarChart, path: Path) -> Path:
    """One PNG of one chart: a bar per label, with its error bar (0 where unknown)."""
    plt = pyplot()
    labels = [bar.label for bar in chart.bars]
    figure, axis = plt.subplots(figsize=(max(5, 1.2 * len(labels)), 4.5))
    values = [bar.value for bar in chart.bars]
    axis.bar(range(len(labels)), values, yerr=_error_bars(chart), capsize=4, color=BAR_COLOR)
    axis.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
    axis.set_ylabel(chart.unit)
    plain_numbers(axis.yaxis)
    axis.set_title(wrapped(chart.title), fontsize=9)
    figure.tight_layout()
    return save_png(figure, path)


def bar_panels(charts: Sequence[BarChart], path: Path, title: str) -> Path:
    """One PNG with a panel per chart under one title: error bars where any bar has
    them, and each bar's mark written above it."""
    plt = pyplot()
    figure, axes = plt.subplots(1, len(charts), figsize=(6 * len(charts), 4.8), squeeze=False)
    for axis, chart in zip(axes[0], charts, strict=True):
        values = [bar.value for bar in chart.bars]
        has_spread = any(bar.low is not None for bar in chart.bars)
        axis.bar(
            range(len(values)),
            values,
            yerr=_error_bars(chart) if has_spread else None,
            capsize=4,
            color=BAR_COLOR,
        )
        labels = [bar.label for bar in chart.bars]
        axis.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
        axis.set_ylabel(chart.unit)
        plain_numbers(axis.yaxis)
        axis.set_title(wrapped(chart.title), fontsize=8)
        for index, bar in enumerate(chart.bars):
            if bar.mark is not None:
                axis.annotate(bar.mark, (index, bar.value), ha="center", va="bottom", fontsize=7)
    figure.suptitle(wrapped(title, TITLE_CHARS * len(charts)))
    figure.tight_layout()
    return save_png(figure, path)


# More lines than this and the legend would cover them.
CURVES_IN_PLOT = 6


def curve_chart(chart: CurveChart, path: Path) -> Path:
    """One PNG: a line per curve, labelled points, marked points ringed, the limit dashed."""
    plt = pyplot()
    crowded = len(chart.curves) > CURVES_IN_PLOT  # the legend goes beside the plot
    figure, axis = plt.subplots(figsize=(11.5 if crowded else 7.5, 5.2 if crowded else 4.8))
    for curve in chart.curves:
        points = sorted(curve.points, key=lambda p: p.x)
        (line,) = axis.plot([p.x for p in points], [p.y for p in points], marker="o", ms=4)
        line.set_label(curve.label)
        for point in points:
            if point.label:
                axis.annotate(point.label, (point.x, point.y), fontsize=7, xytext=(3, 3),
                              textcoords="offset points")  # fmt: skip
            if point.marked:
                axis.plot(point.x, point.y, "o", ms=11, mfc="none", color=line.get_color())
    if chart.limit is not None:
        axis.axhline(chart.limit, ls="--", color="#888", lw=1, label=chart.limit_label)
    if chart.log_y:
        _log_scale(axis.yaxis, axis.set_yscale)
    else:
        plain_numbers(axis.yaxis)
    if chart.log_x:
        _log_scale(axis.xaxis, axis.set_xscale)
    else:
        plain_numbers(axis.xaxis)
    axis.set_xlabel(chart.x_title)
    axis.set_ylabel(chart.y_title)
    axis.set_title(wrapped(chart.title, 80), fontsize=9)
    if crowded:
        axis.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    return save_png(figure, path)


def _log_scale(scaled: Axis, set_scale: Callable[[str], None]) -> None:
    """A log axis whose ticks read 100 and 2000: matplotlib's own formatters write them
    as mathtext, which pyplot() turns off (text.parse_math), so they would show as TeX.
    The plain LogFormatter labels the same ticks."""
    from matplotlib.ticker import LogFormatter

    set_scale("log")
    plain_numbers(scaled)  # the decades, as 100 and 20,000, not 1e+02 or 2e+04
    scaled.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
