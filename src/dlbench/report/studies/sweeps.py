"""Latency against throughput: what a batch or thread sweep measured, and the pick
under a latency budget.

Per workload, one line per configuration (framework, compile mode,
precision, threads), a point per batch size; the points no other point
beats on both throughput and latency (the Pareto front) are ringed. The
budget table names, per workload, the configuration with the most samples/s
whose p99 stays within --latency-budget-ms, with what its int8 quantization
cost in accuracy where it has one.
"""

from __future__ import annotations

from dlbench.report.charts.model import Curve, CurveChart, Point, slug
from dlbench.report.studies.study import Row, StudyTable, int8_cost
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run

# the axes that make a line; the swept axis (batch size, else threads) runs along it
LINE_AXES = ("framework", "compile", "precision", "threads", "streams")
# the axis along a line, tried in this order, and how a point is labelled by it
ALONG_AXES = {"batch_size": "bs", "threads": "t"}
BUDGET_COLUMNS = tuple(
    METRICS[key] for key in ("p99", "latency", "sqnr", "agreement", "max_abs_diff")
)


def sweep_charts(run: Run) -> list[CurveChart]:
    """A chart per workload whose configurations were measured at several batch
    sizes, or (a threads-only sweep) at several thread counts."""
    charts = []
    # LoadGen's rates are the serving study's
    for name, results in run.inference_by_workload(loadgen=False).items():
        # text generation's own charts are report.studies.llm's
        timed = [r for r in results if r.latency_ms is not None and r.details.generation is None]
        for along, short in ALONG_AXES.items():
            axes = tuple(axis for axis in LINE_AXES if axis != along)
            lines: dict[str, list[Result]] = {}
            for result in timed:
                lines.setdefault(result.case.label(only=axes), []).append(result)
            if any(len({r.case.value_of(along) for r in line}) > 1 for line in lines.values()):
                charts.append(_chart(name, lines, along, short))
                break
    return charts


def _chart(name: str, lines: dict[str, list[Result]], along: str, short: str) -> CurveChart:
    front = pareto_front([_xy(r) for line in lines.values() for r in line])
    curves = tuple(
        Curve(label, tuple(_point(r, front, along, short) for r in line))
        for label, line in lines.items()
    )
    what = "batch size" if along == "batch_size" else "thread count"
    return CurveChart(
        name=f"sweep-{slug(name)}",
        title=f"{name}: median latency against throughput, a point per {what} "
        "(ringed: the Pareto front)",
        x_title="samples/s",
        y_title="median ms",
        curves=curves,
    )


def pareto_front(points: list[tuple[float, float]]) -> set[tuple[float, float]]:
    """The (x, y) points no other point beats on both: higher x (throughput) and lower
    y (latency), one of them strictly."""
    return {
        (x, y)
        for x, y in points
        if not any(ox >= x and oy <= y and (ox > x or oy < y) for ox, oy in points)
    }


def _xy(result: Result) -> tuple[float, float]:
    if result.latency_ms is None:  # sweep_charts charts timed results only
        raise ValueError(f"{result.case.label()} has no latency to chart")
    return float(result.throughput or 0.0), float(result.latency_ms.median)


def _point(result: Result, front: set[tuple[float, float]], along: str, short: str) -> Point:
    x, y = _xy(result)
    return Point(x, y, f"{short}={result.case.value_of(along)}", marked=(x, y) in front)


def budget_table(run: Run, budget_ms: float) -> StudyTable:
    """Per workload, the most samples/s with p99 within the budget (LoadGen cases aside)."""
    rows = []
    for name, results in run.inference_by_workload(loadgen=False).items():
        p99s = [(r, r.latency_ms.p99) for r in results if r.latency_ms is not None]
        if not p99s:
            continue
        within = [r for r, p99 in p99s if p99 <= budget_ms]
        if not within:
            lowest = min(p99 for _, p99 in p99s)
            note = f"none within {budget_ms:g} ms; lowest p99 {lowest:.3g} ms"
            rows.append(Row(name, None, None, note=note, extra=(None,) * len(BUDGET_COLUMNS)))
            continue
        best = max(within, key=lambda r: r.throughput or 0.0)
        label = f"{name}: {best.case.label(only=(*LINE_AXES, 'batch_size', 'scenario'))}"
        extra = tuple(read(column, best) for column in BUDGET_COLUMNS)
        rows.append(Row(label, best.throughput, None, note=_accuracy_note(best), extra=extra))
    title = f"Best configuration with p99 <= {budget_ms:g} ms (most samples/s)"
    return StudyTable(title, METRICS["throughput"], tuple(rows), BUDGET_COLUMNS)


def _accuracy_note(result: Result) -> str:
    cost = int8_cost(result)
    if cost is not None:
        return f"{result.case.precision}: {cost}"
    checked = result.max_abs_diff is not None
    return f"{result.case.precision}, checked against the reference" if checked else ""
