"""The serving study: how many queries per second each framework serves on this
machine while its 99th percentile latency stays under a bound, and its
single-stream latency, all as MLPerf LoadGen measured them.

Per workload: a table of the peak server rate found by --find-peak, with the
p99 at that rate, the worker's CPU use and its memory; a table of the
single-stream 90th percentile (MLPerf's single-stream metric); and a chart
of p99 latency against the rate served for every rate the search tried.
"""

from __future__ import annotations

import math
from typing import TypeGuard

from dlbench.report.charts.model import Curve, CurveChart, Point, slug
from dlbench.report.studies.study import Row, StudyTable
from dlbench.results.details import LoadGen
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run
from dlbench.spec.case_parts import DEFAULT_LATENCY_PERCENTILE
from dlbench.spec.loads import LoadGenLoad
from dlbench.spec.loop_kinds import load_part

# the peak table's companion columns: LoadGen's p99 at the peak, CPU %, memory
PEAK_COLUMNS = tuple(METRICS[key] for key in ("loadgen_p99", "cpu", "memory"))


def serving_label(result: Result) -> str:
    """A row of a serving table: the rest of the case is in the table's title."""
    return result.case.label(only=("framework", "compile", "precision", "streams"))


def serving_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    tables = []
    for name, results in run.inference_by_workload(loadgen=True).items():
        for bound, group in _searched_by_bound(results):
            tables.append(_peak_table(name, bound, group, baseline))
        single = [r for r in results if r.case.scenario == "single-stream"]
        if single:
            tables.append(_latency_table(name, single, baseline))
    return [t for t in tables if t.rows]


def _searched_by_bound(results: list[Result]) -> list[tuple[float, list[Result]]]:
    """The results of LoadGen's --find-peak by the latency bound they held, lowest
    first (a generation server's bounds are its TTFT and TPOT: report.studies.llm)."""
    searched = [
        (result, load.latency_bound_ms)
        for result in results
        if (load := load_part(result.case, LoadGenLoad)) is not None
        and load.find_peak
        and load.latency_bound_ms
    ]
    bounds = sorted({bound for _, bound in searched if bound})
    return [(b, [result for result, bound in searched if bound == b]) for b in bounds]


def _percentile(result: Result) -> float:
    """The percentile LoadGen held the result's latency bound at."""
    load = load_part(result.case, LoadGenLoad)
    return (load.latency_percentile if load else None) or DEFAULT_LATENCY_PERCENTILE


def _peak_table(name: str, bound: float, results: list[Result], baseline: str) -> StudyTable:
    metric = METRICS["peak_qps"]
    base = next((read(metric, r) for r in results if r.case.framework == baseline), None)
    rows = []
    for result in results:
        loadgen = _loadgen(result)
        peak = read(metric, result)
        note = loadgen.peak_note or _verdict_note(loadgen)
        rows.append(
            Row(
                serving_label(result),
                peak,
                peak / base if peak is not None and base else None,
                note=note if peak is not None else f"none: {note}",
                extra=tuple(read(column, result) for column in PEAK_COLUMNS),
            )
        )
    title = (
        f"{name}: peak server QPS with p{_percentile(results[0]):g} <= "
        f"{bound:g} ms (LoadGen, --find-peak)"
    )
    return StudyTable(title, metric, tuple(rows), PEAK_COLUMNS)


def _latency_table(name: str, results: list[Result], baseline: str) -> StudyTable:
    metric = METRICS["loadgen_p90"]
    entries = [(r, read(metric, r)) for r in results]
    base = next((v for r, v in entries if r.case.framework == baseline and v), None)
    rows = tuple(
        Row(
            serving_label(r),
            value,
            value / base if base else None,
            note=_verdict_note(_loadgen(r)),
            extra=(read(METRICS["cpu"], r), read(METRICS["memory"], r)),
        )
        for r, value in entries
        if value is not None
    )
    columns = (METRICS["cpu"], METRICS["memory"])
    return StudyTable(f"{name}: single-stream latency, p90 (LoadGen)", metric, rows, columns)


# LoadGen's reasons are paragraphs; a table note keeps their start
NOTE_CHARS = 90


def _loadgen(result: Result) -> LoadGen:
    """What LoadGen concluded (an empty record for a result that kept none)."""
    return result.details.loadgen or LoadGen()


def _verdict_note(loadgen: LoadGen) -> str:
    verdict = loadgen.verdict or "no verdict"
    reason = " ".join(str(loadgen.invalid_reason or "").replace("*", " ").split())
    if len(reason) > NOTE_CHARS:
        reason = reason[: NOTE_CHARS - 3].rstrip() + "..."
    return f"LoadGen: {verdict}" + (f" ({reason})" if reason else "")


def serving_charts(run: Run) -> list[CurveChart]:
    """Per workload and bound: LoadGen's p99 against the rate served, every rate tried."""
    charts = []
    for name, results in run.inference_by_workload(loadgen=True).items():
        for bound, group in _searched_by_bound(results):
            curves = tuple(c for c in (_tries_curve(r) for r in group) if c.points)
            if not curves:
                continue
            percentile = f"{_percentile(group[0]):g}"
            charts.append(
                CurveChart(
                    name=f"serving-{slug(name)}-{bound:g}ms",
                    title=f"{name}: p{percentile} latency against QPS served (LoadGen; "
                    "ringed: the peak within the bound)",
                    x_title="QPS served",
                    y_title=f"p{percentile} ms",
                    curves=curves,
                    limit=bound,
                    limit_label=f"bound {bound:g} ms",
                )
            )
    return charts


def _tries_curve(result: Result) -> Curve:
    loadgen = _loadgen(result)
    percentile = f"{_percentile(result):g}"
    peak = loadgen.peak_qps
    points = []
    for attempt in loadgen.tries or []:
        rate, value = attempt.samples_per_s, attempt.latency_ms.get(percentile)
        if finite(rate) and finite(value):
            marked = peak is not None and attempt.target_qps == peak
            points.append(Point(float(rate), float(value), marked=marked))
    return Curve(serving_label(result), tuple(points))


def finite(value: object) -> TypeGuard[float]:
    """A finite number (a bool is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
