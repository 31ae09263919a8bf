"""An LLM server under load: TTFT and TPOT at the SLO's percentile against the load,
each SLO bound a dashed horizontal line, the peak --find-peak found ringed.

Results that differ only in their load (the same served model, API, requests and
SLOs, on one load axis) share a pair of charts, TTFT and TPOT. A --sweep makes a
result per load: together they are one line, a point each. A --find-peak result
is a line of its own, a point per load it tried. The x axis is the load as the
loop puts it: users for a closed loop (--concurrency; one request at a time is
one user), requests answered per second for an open loop (--request-rate: what
the server kept up with, not the rate asked for).

`load_points` is the one place a kind of serving result is read: an endpoint's
(details.endpoint), or a generation engine served under MLPerf LoadGen
(details.loadgen with token latencies: its rate answered, LoadGen's own TTFT and
TPOT percentiles, each --find-peak try).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from dlbench.measure.load_profile import CONCURRENCY, RATE
from dlbench.report.charts.model import Curve, CurveChart, Point, slug
from dlbench.report.studies.serving import finite
from dlbench.report.studies.study import Row, StudyTable, case_label
from dlbench.results.details import EndpointLoad, LoadGen
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run
from dlbench.spec.case import DEFAULT_SLO_PERCENTILE, Case

# The Case fields that set a load: results differing only in these share a chart
LOAD_FIELDS = ("concurrency", "request_rate", "target_qps", "find_peak")
# Left out of a chart's title too: the same for every server case (a request is one
# prompt, its work runs on the server), or the client process's own threads
TITLE_OMITS = (*LOAD_FIELDS, "mode", "compile", "batch_size", "device", "threads")
# The percentiles a text-generation result records, and its TTFT and TPOT metrics at each
RECORDED_PERCENTILES = {
    50.0: ("ttft", "tpot"),
    90.0: ("ttft_p90", "tpot_p90"),
    99.0: ("ttft_p99", "tpot_p99"),
}
X_TITLES = {CONCURRENCY: "concurrent users", RATE: "requests/s answered"}
# A line needs two loads: a group measured at one load draws no chart
MIN_LOADS = 2


@dataclass(frozen=True)
class LoadPoint:
    """One load a serving result measured: where it sits on its load axis, TTFT and
    TPOT at `percentile`, and whether its SLOs held there."""

    axis: str  # CONCURRENCY (load: users) or RATE (load: requests/s answered)
    load: float
    ttft_ms: float | None
    tpot_ms: float | None
    percentile: float  # the percentile ttft_ms and tpot_ms are at
    holds: bool | None  # None: no SLO was set
    is_peak: bool = False  # the highest load whose SLOs held (--find-peak)


def load_points(result: Result) -> list[LoadPoint]:
    """Every load the result measured: a --find-peak result's tries, else the one load
    of its case; [] for a result that is no server under load."""
    endpoint, loadgen = result.details.endpoint, result.details.loadgen
    if loadgen is not None and loadgen.ttft_percentiles_ms is not None:
        return _loadgen_points(result.case, loadgen)
    if endpoint is None:
        return []
    if result.case.find_peak:
        return _endpoint_tries(result.case, endpoint)
    return _endpoint_load(result, endpoint)


def slo_percentile(case: Case) -> float:
    return case.slo_percentile or DEFAULT_SLO_PERCENTILE


def nearest_recorded(percentile: float) -> float:
    """The recorded percentile nearest to `percentile` (the higher of two as near:
    it errs towards the bound)."""
    return min(RECORDED_PERCENTILES, key=lambda p: (abs(p - percentile), -p))


def _endpoint_load(result: Result, endpoint: EndpointLoad) -> list[LoadPoint]:
    """A load of its own (a sweep's point): its Generation record's percentile nearest
    the SLO's. A failed one (saturated, nothing answered) describes no steady load."""
    if not result.ok:
        return []
    case = result.case
    if case.request_rate is not None:
        axis, load = RATE, endpoint.requests_per_s
    else:
        axis, load = CONCURRENCY, float(case.concurrency or 1)  # synchronous: one user
    if not finite(load):
        return []
    shown = nearest_recorded(slo_percentile(case))
    ttft, tpot = (read(METRICS[key], result) for key in RECORDED_PERCENTILES[shown])
    return [LoadPoint(axis, float(load), ttft, tpot, shown, endpoint.slo_holds)]


def _endpoint_tries(case: Case, endpoint: EndpointLoad) -> list[LoadPoint]:
    """Every load --find-peak tried, at the SLO's own percentile; the last try at the
    peak (the confirming one, where it was confirmed) is the peak."""
    tries = endpoint.tries or []
    axis = RATE if endpoint.peak_axis == RATE else CONCURRENCY
    at_peak = [i for i, step in enumerate(tries) if step.holds and step.load == endpoint.peak]
    peak = at_peak[-1] if at_peak else None
    points = []
    for index, step in enumerate(tries):
        load = step.requests_per_s if axis == RATE else step.load
        if finite(load):
            points.append(LoadPoint(axis, float(load), step.ttft_ms, step.tpot_ms,
                                    slo_percentile(case), step.holds, index == peak))  # fmt: skip
    return points


def _loadgen_points(case: Case, loadgen: LoadGen) -> list[LoadPoint]:
    """A generation engine under LoadGen: each rate tried (or the one asked for) at the
    rate answered, with LoadGen's TTFT and TPOT at the SLO's percentile."""
    held = f"{slo_percentile(case):g}"
    if loadgen.tries is None:
        tried = [(loadgen.samples_per_s, loadgen.ttft_percentiles_ms, loadgen.tpot_percentiles_ms,
                  loadgen.perf_constraints_met, False)]  # fmt: skip
    else:
        at_peak = [i for i, t in enumerate(loadgen.tries)
                   if t.keeps_bound and t.target_qps == loadgen.peak_qps]  # fmt: skip
        peak = at_peak[-1] if at_peak and loadgen.peak_qps is not None else None
        tried = [(t.samples_per_s, t.ttft_percentiles_ms, t.tpot_percentiles_ms, t.keeps_bound,
                  i == peak) for i, t in enumerate(loadgen.tries)]  # fmt: skip
    return [
        LoadPoint(
            RATE,
            float(rate),
            (ttft or {}).get(held),
            (tpot or {}).get(held),
            slo_percentile(case),
            holds,
            is_peak,
        )
        for rate, ttft, tpot, holds, is_peak in tried
        if finite(rate)
    ]


@dataclass(frozen=True)
class Measure:
    """TTFT or TPOT: its name, its value at a point, and its bound in a case."""

    name: str
    value: Callable[[LoadPoint], float | None]
    bound: Callable[[Case], float | None]


MEASURES = (
    Measure("TTFT", lambda p: p.ttft_ms, lambda c: c.ttft_ms),
    Measure("TPOT", lambda p: p.tpot_ms, lambda c: c.tpot_ms),
)

Measured = list[tuple[Result, list[LoadPoint]]]


def llm_serving_charts(run: Run) -> list[CurveChart]:
    """Per group of results differing only in their load: TTFT and TPOT at the SLO's
    percentile against the load."""
    charts = []
    for key, measured in _groups(run).items():
        for measure in MEASURES:
            chart = _chart(key, measured, measure)
            if chart is not None:
                charts.append(chart)
    return charts


def _groups(run: Run) -> dict[str, Measured]:
    """Results with load points, by their case without its load, and their load axis."""
    groups: dict[str, Measured] = {}
    for result in run.results:
        points = load_points(result)
        if points:
            key = f"{result.case.key_without(*LOAD_FIELDS)} {points[0].axis}"
            groups.setdefault(key, []).append((result, points))
    return groups


def _chart(key: str, measured: Measured, measure: Measure) -> CurveChart | None:
    curves = _curves(measured, measure)
    if len({p.x for curve in curves for p in curve.points}) < MIN_LOADS:
        return None
    case, axis = measured[0][0].case, measured[0][1][0].axis
    name = case.label(omit=TITLE_OMITS)
    percentile = f"p{slo_percentile(case):g}"
    x_title = X_TITLES[axis]
    bound = measure.bound(case)
    # the group key tells apart groups whose titles a file name would cut to one
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return CurveChart(
        name=f"llm-serving-{measure.name.lower()}-{slug(name)}-{digest}",
        title=f"{name}: {measure.name} {percentile} against {x_title}",
        x_title=x_title,
        y_title=f"{measure.name} {percentile} ms",
        curves=curves,
        limit=bound,
        limit_label=f"{measure.name} bound {bound:g} ms" if bound is not None else "",
    )


def _curves(measured: Measured, measure: Measure) -> tuple[Curve, ...]:
    """One line of the results at a load each (a sweep), and one per --find-peak
    result; a line with no value of the measure is left out."""
    swept = [point for result, points in measured if not result.case.find_peak
             for point in points]  # fmt: skip
    curves = [_curve(_swept_label(measured[0][0].case, swept), swept, measure)]
    for result, points in measured:
        if result.case.find_peak:
            label = f"{result.case.label(only=LOAD_FIELDS)}: every load tried"
            curves.append(_curve(label, points, measure))
    return tuple(curve for curve in curves if curve.points)


def _curve(label: str, points: list[LoadPoint], measure: Measure) -> Curve:
    drawn = []
    for point in sorted(points, key=lambda p: p.load):
        value = measure.value(point)
        if finite(value):
            mark = "peak" if point.is_peak else ""
            drawn.append(Point(point.load, float(value), mark, marked=point.is_peak))
    return Curve(label, tuple(drawn))


def _swept_label(case: Case, points: list[LoadPoint]) -> str:
    """The sweep's line; where its results record no value at the SLO's percentile, it
    says which it shows."""
    shown = {p.percentile for p in points} - {slo_percentile(case)}
    nearest = ", ".join(f"p{p:g}" for p in sorted(shown))
    return "a case per load" + (f" ({nearest}: the nearest recorded)" if nearest else "")


# the peak table's companion columns: dlbench's own TTFT and TPOT p99 at the rate
# reported, and the worker's CPU use
PEAK_COLUMNS = tuple(METRICS[key] for key in ("ttft_p99", "tpot_p99", "cpu"))


def llm_serving_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    """The llm-serving study: per workload and SLO pair, each engine's peak rate under
    LoadGen whose TTFT and TPOT held, confirmed; how it shares requests in the note."""
    groups: dict[str, list[Result]] = {}
    for name, results in run.inference_by_workload(loadgen=True).items():
        for result in results:
            loadgen = result.details.loadgen
            if result.case.find_peak and loadgen and loadgen.ttft_percentiles_ms is not None:
                slos = result.case.label(only=("ttft_ms",))
                groups.setdefault(f"{name}: peak requests/s with {slos}", []).append(result)
    return [_peak_table(title, results, baseline) for title, results in groups.items()]


def _peak_table(title: str, results: list[Result], baseline: str) -> StudyTable:
    metric = METRICS["peak_qps"]
    base = next((read(metric, r) for r in results if r.case.framework == baseline), None)
    rows = []
    for result in results:
        loadgen = result.details.loadgen or LoadGen()
        peak = read(metric, result)
        found = "confirmed" if loadgen.peak_confirmed else (loadgen.peak_note or "not confirmed")
        note = f"{found}; {loadgen.batching or 'batching not recorded'}"
        rows.append(Row(case_label(result), peak, peak / base if peak and base else None,
                        note=note if peak is not None else f"none: {note}",
                        extra=tuple(read(column, result) for column in PEAK_COLUMNS)))  # fmt: skip
    return StudyTable(f"{title} (LoadGen, --find-peak)", metric, tuple(rows), PEAK_COLUMNS)
