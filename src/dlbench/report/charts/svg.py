"""Charts (charts.model) as small inline SVG for the HTML report: no scripts, no
external files.

Every label passes through html.escape: a workload or host name from a run
file is data, never markup.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from html import escape

from dlbench.report.charts.model import BarChart, Curve, CurveChart

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 640, 300, 70, 110, 30
COLOR, WHISKER = "#4c72b0", "#333"


def _scale(values: Sequence[float]) -> float:
    top = max((v for v in values if v == v), default=1.0)  # v == v drops NaN
    return top * 1.1 if top > 0 else 1.0


# The title's characters one line holds at 13 px; a longer title is two lines at 11 px
TITLE_CHARS, TITLE_CHARS_SMALL = 90, 106


def _title(title: str) -> list[str]:
    """The chart's title across its top: one line, or two smaller ones where it would
    run off the chart (a served model's name and SLOs make a long one)."""
    if len(title) <= TITLE_CHARS:
        lines, size, first_y = [title], 13, 18
    else:
        lines = textwrap.wrap(title, TITLE_CHARS_SMALL, max_lines=2, placeholder=" ...")
        size, first_y = 11, 12
    return [
        f'<text x="{WIDTH / 2}" y="{first_y + 13 * index}" text-anchor="middle" '
        f'font-size="{size}">{escape(line)}</text>'
        for index, line in enumerate(lines)
    ]


def _frame(title: str, unit: str, top: float, ticks: bool = True) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg class="chart" role="img" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        *_title(title),
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="{WHISKER}"/>',
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - 10}" y2="{HEIGHT - BOTTOM}" '
        f'stroke="{WHISKER}"/>',
        f'<text x="14" y="{TOP + plot_h / 2}" font-size="11" transform="rotate(-90 14 '
        f'{TOP + plot_h / 2})" text-anchor="middle">{escape(unit)}</text>',
    ]
    for fraction in (0.0, 0.5, 1.0) if ticks else ():
        y = HEIGHT - BOTTOM - fraction * plot_h
        parts.append(
            f'<text x="{LEFT - 4}" y="{y + 4}" font-size="10" text-anchor="end">'
            f"{top / 1.1 * fraction:.3g}</text>"
        )
    return parts


def bar_chart(chart: BarChart) -> str:
    """Vertical bars with optional error bars; labels under the axis, slanted."""
    title, unit, bars = chart.title, chart.unit, chart.bars
    top = _scale([b.high if b.high is not None else b.value for b in bars])
    plot_h, plot_w = HEIGHT - TOP - BOTTOM, WIDTH - LEFT - 20
    step = plot_w / max(len(bars), 1)
    parts = _frame(title, unit, top)
    for index, bar in enumerate(bars):
        x = LEFT + 10 + index * step
        height = max(0.0, bar.value / top * plot_h)
        y = HEIGHT - BOTTOM - height
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{step * 0.6:.1f}" '
            f'height="{height:.1f}" fill="{COLOR}"><title>{escape(bar.label)}: '
            f"{bar.value:.4g} {escape(unit)}</title></rect>"
        )
        if bar.low is not None and bar.high is not None:
            cx = x + step * 0.3
            y_low = HEIGHT - BOTTOM - bar.low / top * plot_h
            y_high = HEIGHT - BOTTOM - bar.high / top * plot_h
            parts.append(
                f'<line class="errorbar" x1="{cx:.1f}" y1="{y_low:.1f}" x2="{cx:.1f}" '
                f'y2="{y_high:.1f}" stroke="{WHISKER}" stroke-width="1.5"/>'
            )
        label_y = HEIGHT - BOTTOM + 12
        parts.append(
            f'<text x="{x + step * 0.3:.1f}" y="{label_y}" font-size="10" '
            f'text-anchor="end" transform="rotate(-35 {x + step * 0.3:.1f} {label_y})">'
            f"{escape(bar.label)}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def box_plot(title: str, unit: str, boxes: Sequence[tuple[str, Sequence[float]]]) -> str:
    """Horizontal box plots (min, p25, median, p75, p99) of latency samples."""
    from dlbench.measure.stats import percentile

    rows = [(label, sorted(samples)) for label, samples in boxes if samples]
    height = TOP + 28 * len(rows) + 40
    top = _scale([percentile(s, 99) for _, s in rows])
    left, plot_w = 260, WIDTH - 260 - 20
    parts = [
        f'<svg class="chart" role="img" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="13">{escape(title)}</text>',
    ]

    def x(value: float) -> float:
        return left + value / top * plot_w

    for index, (label, samples) in enumerate(rows):
        y = TOP + 28 * index + 10
        q = [percentile(samples, p) for p in (0, 25, 50, 75, 99)]
        parts += [
            f'<text x="{left - 6}" y="{y + 4}" font-size="10" text-anchor="end">'
            f"{escape(label)}</text>",
            f'<line x1="{x(q[0]):.1f}" y1="{y}" x2="{x(q[4]):.1f}" y2="{y}" stroke="{WHISKER}"/>',
            f'<rect class="box" x="{x(q[1]):.1f}" y="{y - 8}" '
            f'width="{max(1.0, x(q[3]) - x(q[1])):.1f}" height="16" fill="#dde6f3" '
            f'stroke="{COLOR}"/>',
            f'<line x1="{x(q[2]):.1f}" y1="{y - 8}" x2="{x(q[2]):.1f}" y2="{y + 8}" '
            f'stroke="{WHISKER}" stroke-width="2"/>',
        ]
    axis_y = TOP + 28 * len(rows) + 4
    parts.append(f'<text x="{left}" y="{axis_y + 14}" font-size="10">0</text>')
    parts.append(
        f'<text x="{left + plot_w}" y="{axis_y + 14}" font-size="10" text-anchor="end">'
        f"{top / 1.1:.3g} {escape(unit)}</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)


def line_chart(
    title: str, unit: str, series: Sequence[tuple[str, Sequence[tuple[float, float]]]]
) -> str:
    """Time series (seconds, value), one polyline each: the resource timelines."""
    points = [p for _, s in series for p in s]
    if not points:
        return ""
    t_max = max(t for t, _ in points) or 1.0
    top = _scale([v for _, v in points])
    plot_h, plot_w = HEIGHT - TOP - BOTTOM, WIDTH - LEFT - 20
    colors = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3")
    parts = _frame(title, unit, top)
    for index, (label, samples) in enumerate(series):
        coords = " ".join(
            f"{LEFT + t / t_max * plot_w:.1f},{HEIGHT - BOTTOM - v / top * plot_h:.1f}"
            for t, v in samples
        )
        color = colors[index % len(colors)]
        parts.append(
            f'<polyline class="series" fill="none" stroke="{color}" points="{coords}">'
            f"<title>{escape(label)}</title></polyline>"
        )
        parts.append(
            f'<text x="{LEFT + 8}" y="{HEIGHT - BOTTOM + 30 + 12 * index}" font-size="10" '
            f'fill="{color}">{escape(label)}</text>'
        )
    parts.append(
        f'<text x="{WIDTH - 20}" y="{HEIGHT - BOTTOM + 14}" font-size="10" '
        f'text-anchor="end">{t_max:.3g} s</text>'
    )
    parts.append("</svg>")
    return "\n".join(parts)


def curve_chart(chart: CurveChart) -> str:
    """Lines of (x, y) points, labelled; marked points ringed; the limit dashed."""
    points = [p for c in chart.curves for p in c.points]
    if not points:
        return ""
    log = chart.log_y
    ys = [p.y for p in points] + ([chart.limit] if chart.limit is not None else [])
    y_low = min(y for y in ys if y > 0) if log else 0.0
    y_high = max(ys) * 1.1 or 1.0
    xs = [p.x for p in points]
    x_low = min(x for x in xs if x > 0) / 1.1 if chart.log_x else 0.0
    x_high = max(xs) * 1.05 or 1.0
    plot_h, plot_w = HEIGHT - TOP - BOTTOM, WIDTH - LEFT - 20

    def x_of(x: float) -> float:
        return LEFT + _share(x, x_low, x_high, chart.log_x) * plot_w

    def y_of(y: float) -> float:
        return HEIGHT - BOTTOM - _share(y, y_low / 1.1, y_high, log) * plot_h

    scale = "log scale" if log else ""
    parts = _frame(chart.title, f"{chart.y_title} {scale}".strip(), y_high, ticks=not log)
    if log:  # the frame's ticks are linear: label the axis's ends instead
        parts.append(f'<text x="{LEFT - 4}" y="{y_of(y_low) + 4:.1f}" font-size="10" '
                     f'text-anchor="end">{y_low:.3g}</text>')  # fmt: skip
        parts.append(f'<text x="{LEFT - 4}" y="{TOP + 4}" font-size="10" '
                     f'text-anchor="end">{y_high:.3g}</text>')  # fmt: skip
    for index, curve in enumerate(chart.curves):
        parts += _curve(curve, index, x_of, y_of)
    if chart.limit is not None:
        y = y_of(chart.limit)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - 10}" y2="{y:.1f}" stroke="#888" '
            f'stroke-dasharray="4 3"><title>{escape(chart.limit_label)}</title></line>'
        )
        parts.append(
            f'<text x="{WIDTH - 12}" y="{y - 3:.1f}" font-size="9" fill="#666" '
            f'text-anchor="end">{escape(chart.limit_label)}</text>'
        )
    scale = f"log scale, {x_low * 1.1:.4g}" if chart.log_x else "0"
    parts.append(
        f'<text x="{WIDTH - 20}" y="{HEIGHT - BOTTOM + 28}" font-size="10" text-anchor="end">'
        f"{escape(chart.x_title)} ({scale} to {x_high / 1.05:.4g})</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts)


CURVE_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


def _curve(
    curve: Curve, index: int, x_of: Callable[[float], float], y_of: Callable[[float], float]
) -> list[str]:
    """One curve: its line, its points (marked ones ringed, with their labels), and
    its name in the legend under the axis."""
    color = CURVE_COLORS[index % len(CURVE_COLORS)]
    ordered = sorted(curve.points, key=lambda p: p.x)
    coords = " ".join(f"{x_of(p.x):.1f},{y_of(p.y):.1f}" for p in ordered)
    parts = [
        f'<polyline class="series" fill="none" stroke="{color}" points="{coords}">'
        f"<title>{escape(curve.label)}</title></polyline>"
    ]
    for p in ordered:
        radius = 6 if p.marked else 3
        fill = "none" if p.marked else color
        parts.append(
            f'<circle cx="{x_of(p.x):.1f}" cy="{y_of(p.y):.1f}" r="{radius}" fill="{fill}" '
            f'stroke="{color}"><title>{escape(curve.label)}: {p.x:.4g}, {p.y:.4g}'
            f"</title></circle>"
        )
        if p.label:
            # in the plot's right half a label runs left of its point: to the right, the
            # last point's ran past the chart's edge
            right_half = x_of(p.x) > (LEFT + WIDTH) / 2
            anchor, dx = ("end", -4) if right_half else ("start", 4)
            parts.append(
                f'<text x="{x_of(p.x) + dx:.1f}" y="{y_of(p.y) - 4:.1f}" font-size="9" '
                f'text-anchor="{anchor}">{escape(p.label)}</text>'
            )
    parts.append(
        f'<text x="{LEFT + 8}" y="{HEIGHT - BOTTOM + 42 + 12 * index}" font-size="10" '
        f'fill="{color}">{escape(curve.label)}</text>'
    )
    return parts


def _share(value: float, low: float, high: float, log: bool) -> float:
    """Where `value` sits between `low` and `high`, 0..1, on a linear or log axis."""
    if not log:
        return value / high
    span = math.log10(high) - math.log10(low)
    return (math.log10(max(value, low)) - math.log10(low)) / span if span > 0 else 0.0
