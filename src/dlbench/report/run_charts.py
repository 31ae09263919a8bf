"""The charts of one run, apart from how they are drawn: the HTML report draws
them as inline SVG (html), `dlbench report --plots` as PNG files (run_plots,
timeline_plot).

Charts compare like with like: one chart of latency bars per workload, mode,
scenario, params and device. A case's resource timeline gets a chart where
it says something: in training, or over a case long enough for the load to
change under it.
"""

from __future__ import annotations

from dlbench.measure.stats import percentile
from dlbench.measure.timeline import TimelinePoint
from dlbench.report.charts.model import Bar
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run

# A chart's bars differ by these axes; its title names the rest (see groups).
CHART_AXES = ("framework", "compile", "batch_size")


def groups(run: Run) -> dict[str, list[Result]]:
    """Results that may share a chart: same workload, mode, scenario and params."""
    grouped: dict[str, list[Result]] = {}
    for r in run.results:
        if r.ok and r.latency_ms is not None:
            key = r.case.label(only=("workload", "params", "mode", "scenario", "device"))
            grouped.setdefault(key, []).append(r)
    return grouped


def quartiles(result: Result) -> tuple[float, float] | None:
    """The 25th and 75th percentiles of the latency samples, for error bars."""
    if not result.samples_ms:
        return None
    ordered = sorted(result.samples_ms)
    return percentile(ordered, 25), percentile(ordered, 75)


def latency_bars(results: list[Result]) -> tuple[Bar, ...]:
    """A group's median latencies, each with its 25th-75th percentiles as error bar
    (none where a case kept no samples)."""
    latency = METRICS["latency"]
    return tuple(
        Bar(r.case.label(only=CHART_AXES), read(latency, r) or 0.0, *(quartiles(r) or (None, None)))
        for r in results
    )


# Every case records a timeline; a page of charts for one-second inference
# cases says nothing, so the report draws those of training cases and of
# cases long enough for the load to change under them.
TIMELINE_MIN_POINTS = 20


def timeline_worth_drawing(result: Result) -> bool:
    """A training case's timeline, or one long enough for the load to change under it."""
    timeline = result.details.timeline
    if timeline is None or not timeline.points:
        return False
    return result.case.mode == "train" or len(timeline.points) >= TIMELINE_MIN_POINTS


# One scale for every CPU line of a timeline, in the PNG and in the page: 100 is every
# core busy (the worker's own percent, of one core, divided by the cores)
CPU_AXIS = "CPU busy, % of all cores"


def worker_share_of_all_cores(point: TimelinePoint) -> float:
    """A timeline point's worker CPU on CPU_AXIS's scale."""
    return float(point.cpu_percent) / (len(point.cpu_cores) or 1)
