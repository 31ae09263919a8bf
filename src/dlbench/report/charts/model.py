"""What a chart shows, apart from how it is drawn: png.py draws it with
matplotlib, svg.py inline in the HTML report, each from this one description.

A bar chart is a value per label, with error bars where known (a run's
latencies, a study's table). A curve chart is one measure against another, a
line per configuration: the serving study draws LoadGen's latency against the
rate served (one line per framework, the bound as a horizontal line, the peak
marked); a sweep draws latency against throughput (a point per batch size,
the Pareto front marked).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    low: float | None = None  # error bar ends (e.g. 25th and 75th percentiles)
    high: float | None = None
    # written above the bar in a PNG panel: a study row's value relative to its
    # baseline, or "none" where it has no value
    mark: str | None = None


@dataclass(frozen=True)
class BarChart:
    title: str
    unit: str  # the value axis's label
    bars: tuple[Bar, ...]


# A y range wider than this many times is drawn on a log axis, so the points
# near the bound stay readable beside an overloaded rate's latency.
LOG_RANGE = 30.0


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str = ""  # written beside the point
    marked: bool = False  # drawn larger: the peak found


@dataclass(frozen=True)
class Curve:
    label: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class CurveChart:
    name: str  # the PNG file's name (without .png)
    title: str
    x_title: str
    y_title: str
    curves: tuple[Curve, ...]
    limit: float | None = None  # a horizontal line (the latency bound)
    limit_label: str = ""

    @property
    def log_y(self) -> bool:
        ys = [p.y for c in self.curves for p in c.points if p.y > 0]
        if self.limit:
            ys.append(self.limit)
        return bool(ys) and max(ys) / min(ys) > LOG_RANGE

    @property
    def log_x(self) -> bool:
        xs = [p.x for c in self.curves for p in c.points if p.x > 0]
        return bool(xs) and max(xs) / min(xs) > LOG_RANGE


def slug(text: str) -> str:
    """A label as part of a file name: what a file name may hold, dashes between (none
    left at the end where the cut falls on one)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80].rstrip("-")
