"""Every chart of one measure against another that reports draw, for any run.

A study draws them as PNG beside its bar charts (--plots); the HTML report
draws them inline. A builder returns no chart for a run without its results.
"""

from __future__ import annotations

from collections.abc import Callable

from dlbench.report.curves import CurveChart
from dlbench.report.serving import serving_charts
from dlbench.report.sweeps import sweep_charts
from dlbench.results.records import Run

BUILDERS: tuple[Callable[[Run], list[CurveChart]], ...] = (serving_charts, sweep_charts)


def curve_charts(run: Run) -> list[CurveChart]:
    """The run's charts, from every builder."""
    return [chart for build in BUILDERS for chart in build(run)]
