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

from dlbench.report.curves import Curve, CurveChart, Point, pareto_front, slug
from dlbench.report.study import Row, StudyTable
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run

# the axes that make a line; batch size is the axis along it
LINE_AXES = ("framework", "compile", "precision", "threads", "streams")
BUDGET_COLUMNS = tuple(METRICS[key] for key in ("p99", "latency", "agreement", "max_abs_diff"))


def sweep_charts(run: Run) -> list[CurveChart]:
    """A chart per workload whose configurations were measured at several batch sizes."""
    charts = []
    # LoadGen's rates are the serving study's
    for name, results in run.inference_by_workload(loadgen=False).items():
        lines: dict[str, list[Result]] = {}
        for result in results:
            if result.latency_ms is not None:
                lines.setdefault(result.case.label(only=LINE_AXES), []).append(result)
        if not any(len({r.case.batch_size for r in line}) > 1 for line in lines.values()):
            continue
        front = pareto_front([_xy(r) for line in lines.values() for r in line])
        curves = tuple(
            Curve(label, tuple(_point(r, front) for r in line)) for label, line in lines.items()
        )
        charts.append(
            CurveChart(
                name=f"sweep-{slug(name)}",
                title=f"{name}: median latency against throughput, a point per batch size "
                "(ringed: the Pareto front)",
                x_title="samples/s",
                y_title="median ms",
                curves=curves,
            )
        )
    return charts


def _xy(result: Result) -> tuple[float, float]:
    return float(result.throughput or 0.0), float(result.latency_ms.median)  # type: ignore[union-attr]


def _point(result: Result, front: set[tuple[float, float]]) -> Point:
    x, y = _xy(result)
    return Point(x, y, f"bs={result.case.batch_size}", marked=(x, y) in front)


def budget_table(run: Run, budget_ms: float) -> StudyTable:
    """Per workload, the most samples/s with p99 within the budget (LoadGen cases aside)."""
    rows = []
    for name, results in run.inference_by_workload(loadgen=False).items():
        timed = [r for r in results if r.latency_ms is not None]
        if not timed:
            continue
        within = [r for r in timed if r.latency_ms.p99 <= budget_ms]  # type: ignore[union-attr]
        if not within:
            fastest = min(timed, key=lambda r: r.latency_ms.p99)  # type: ignore[union-attr]
            note = f"none within {budget_ms:g} ms; lowest p99 {fastest.latency_ms.p99:.3g} ms"  # type: ignore[union-attr]
            rows.append(Row(name, None, None, note=note, extra=(None,) * len(BUDGET_COLUMNS)))
            continue
        best = max(within, key=lambda r: r.throughput or 0.0)
        label = f"{name}: {best.case.label(only=(*LINE_AXES, 'batch_size', 'scenario'))}"
        extra = tuple(read(column, best) for column in BUDGET_COLUMNS)
        rows.append(Row(label, best.throughput, None, note=_accuracy_note(best), extra=extra))
    title = f"Best configuration with p99 <= {budget_ms:g} ms (most samples/s)"
    return StudyTable(title, METRICS["throughput"], tuple(rows), BUDGET_COLUMNS)


def _accuracy_note(result: Result) -> str:
    agreement = read(METRICS["agreement"], result)
    if agreement is not None:
        return f"int8: {agreement:.3f} agreement with fp32"
    checked = result.max_abs_diff is not None
    return f"{result.case.precision}, checked against the reference" if checked else ""
