"""Curves: one measure against another, a line per configuration.

The serving study draws LoadGen's latency against the rate served (one line
per framework, the bound as a horizontal line, the peak marked); a sweep
draws latency against throughput (a point per batch size, the Pareto front
marked). plots.py draws a chart as a PNG and svg.py inline in the HTML
report, from this one description.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

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


def pareto_front(points: list[tuple[float, float]]) -> set[tuple[float, float]]:
    """The (x, y) points no other point beats on both: higher x (throughput) and lower
    y (latency), one of them strictly."""
    return {
        (x, y)
        for x, y in points
        if not any(ox >= x and oy <= y and (ox > x or oy < y) for ox, oy in points)
    }


def slug(text: str) -> str:
    """A label as part of a file name: what a file name may hold, dashes between."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80]


def finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
