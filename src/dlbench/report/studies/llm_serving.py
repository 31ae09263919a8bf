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
from dlbench.results.limits import limit_text
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run
from dlbench.spec.case import Case
from dlbench.spec.case_parts import DEFAULT_SLO_PERCENTILE
from dlbench.spec.loads import LoadProfile, SloBounds
from dlbench.spec.loop_kinds import load_part, searches_peak

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
    if searches_peak(result.case):
        return _endpoint_tries(result.case, endpoint)
    return _endpoint_load(result, endpoint)


def _bounds(case: Case) -> SloBounds | None:
    """The SLO bounds of a served case of any kind that has them (None: another kind)."""
    return load_part(case, SloBounds)


def slo_percentile(case: Case) -> float:
    bounds = _bounds(case)
    return (bounds.slo_percentile if bounds is not None else None) or DEFAULT_SLO_PERCENTILE


def nearest_recorded(percentile: float) -> float:
    """The recorded percentile nearest to `percentile` (the higher of two as near:
    it errs towards the bound)."""
    return min(RECORDED_PERCENTILES, key=lambda p: (abs(p - percentile), -p))


def _endpoint_load(result: Result, endpoint: EndpointLoad) -> list[LoadPoint]:
    """A load of its own (a sweep's point): its Generation record's percentile nearest
    the SLO's. A failed one (saturated, nothing answered) describes no steady load."""
    if not result.ok:
        return []
    case, client = result.case, load_part(result.case, LoadProfile)
    if client is not None and client.request_rate is not None:
        axis, load = RATE, endpoint.requests_per_s
    else:  # synchronous: one user
        axis, load = CONCURRENCY, float((client.concurrency if client else None) or 1)
    if not finite(load):
        return []
    shown = nearest_recorded(slo_percentile(case))
    ttft, tpot = (read(METRICS[key], result) for key in RECORDED_PERCENTILES[shown])
    return [LoadPoint(axis, float(load), ttft, tpot, shown, endpoint.slo_holds)]


def _endpoint_tries(case: Case, endpoint: EndpointLoad) -> list[LoadPoint]:
    """Every load --find-peak tried, at the SLO's own percentile; the last try at the
    peak (the confirming one, where it was confirmed) is the peak."""
    tries = endpoint.tries or ()
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
    Measure("TTFT", lambda p: p.ttft_ms, lambda c: b.ttft_ms if (b := _bounds(c)) else None),
    Measure("TPOT", lambda p: p.tpot_ms, lambda c: b.tpot_ms if (b := _bounds(c)) else None),
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
    swept = [point for result, points in measured if not searches_peak(result.case)
             for point in points]  # fmt: skip
    curves = [_curve(_swept_label(measured[0][0].case, swept), swept, measure)]
    for result, points in measured:
        if searches_peak(result.case):
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


@dataclass(frozen=True)
class Peak:
    """A --find-peak's outcome, whichever loop searched: the highest rate (requests/s)
    whose SLOs held (None: none held), whether it was confirmed (or why not), and how
    the engine shares concurrent requests."""

    rate: float | None
    found: str
    batching: str


def peak_of(result: Result) -> Peak | None:
    """A rate search's outcome: a generation engine's under LoadGen (details.loadgen),
    or an engine dlbench serves (vLLM) searched by the endpoint client's Poisson
    arrivals (details.endpoint, its axis the rate). None for any other result, or one
    that failed for another reason than that no rate held (its tokens diverged)."""
    if not searches_peak(result.case) or result.case.mode != "infer":
        return None
    loadgen, endpoint = result.details.loadgen, result.details.endpoint
    if loadgen is not None and loadgen.ttft_percentiles_ms is not None:
        if not result.ok:
            return None
        found = "confirmed" if loadgen.peak_confirmed else (loadgen.peak_note or "not confirmed")
        return Peak(loadgen.peak_qps, found, loadgen.batching or "batching not recorded")
    if endpoint is None or endpoint.peak_axis != RATE or not endpoint.tries:
        return None
    if not result.ok and endpoint.peak is not None:
        return None
    found = "confirmed" if endpoint.peak_confirmed else (endpoint.peak_note or "not confirmed")
    batching = result.details.extra.get("batching")
    return Peak(endpoint.peak, found, str(batching or "batching not recorded"))


def llm_serving_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    """The llm-serving study: per workload and SLO pair, each engine's peak rate whose
    TTFT and TPOT held, confirmed; how it shares requests and what limits it at that
    rate (results.limits) in the note. Then which to
    pick: the engine that served the most requests/s within the bounds."""
    groups: dict[str, list[tuple[Result, Peak]]] = {}
    for result in run.results:
        peak = peak_of(result)
        if peak is not None:
            name = result.case.label(only=("workload", "params", "device"))
            slos = result.case.label(only=("ttft_ms",))
            groups.setdefault(f"{name}: peak requests/s with {slos}", []).append((result, peak))
    tables = [_peak_table(title, found, baseline) for title, found in groups.items()]
    return tables + [_pick_table(title, found) for title, found in groups.items()]


def _peak_table(title: str, found: list[tuple[Result, Peak]], baseline: str) -> StudyTable:
    metric = METRICS["peak_qps"]
    base = next((peak.rate for r, peak in found if r.case.framework == baseline), None)
    rows = []
    for result, peak in found:
        # what limits it at the rate reported (results.limits), after how it was found
        limit = limit_text(result.details.limit)
        note = "; ".join(part for part in (peak.found, peak.batching, limit) if part)
        rows.append(Row(case_label(result), peak.rate,
                        peak.rate / base if peak.rate and base else None,
                        note=note if peak.rate is not None else f"none: {note}",
                        extra=_peak_columns(result)))  # fmt: skip
    return StudyTable(f"{title} (--find-peak: LoadGen's Poisson arrivals, or the endpoint "
                      "client's for a server dlbench starts)", metric, tuple(rows),
                      PEAK_COLUMNS)  # fmt: skip


def _peak_columns(result: Result) -> tuple[float | None, ...]:
    """TTFT and TPOT p99 at the rate reported, and the CPU use: the worker's, where the
    engine runs in it. A served engine's worker is its client alone (its server's
    processes are not the worker's), so that column is left empty for it."""
    served = result.details.loadgen is None
    return tuple(None if served and column.key == "cpu" else read(column, result)
                 for column in PEAK_COLUMNS)  # fmt: skip


def _pick_table(title: str, found: list[tuple[Result, Peak]]) -> StudyTable:
    """The engine with the highest peak within the bounds (a confirmed one first), and
    those where no rate held."""
    metric = METRICS["peak_qps"]
    held = [(result, peak) for result, peak in found if peak.rate is not None]
    rows = []
    if held:
        best, peak = max(held, key=lambda pair: (pair[1].found == "confirmed", pair[1].rate))
        rows.append(Row(f"the most requests/s within the bounds: {case_label(best)}", peak.rate,
                        None, note=f"{peak.found}; {peak.batching}", metric=metric))  # fmt: skip
    else:
        rows.append(Row("no engine kept the bounds at any rate", None, None, metric=metric))
    missed = [case_label(result) for result, peak in found if peak.rate is None]
    if missed:
        rows.append(Row(f"no rate held: {', '.join(missed)}", None, None, metric=metric))
    return StudyTable(f"Which to pick: {title}", METRICS["pick"], tuple(rows))
