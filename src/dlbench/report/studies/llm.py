"""The LLM generation study: the engines on the same weights, side by side.

One table per workload and batch: TTFT, TPOT, decode and output tokens/s, the
KV cache, the decode's share of the memory ceiling (MBU) and the prefill's of the
GEMM ceiling (MFU), the tokens' agreement with the torch reference and what limits
the case (results.limits), each engine relative to the baseline. A figure above its
ceiling (flag `above-ceiling`) is said to be impossible, its MBU and MFU left
empty, and it is never picked. Then which engine to pick under a latency budget: of
the cases whose median TTFT and TPOT are within it (MLPerf's interactive budget
for llama3.1-8b, scaled nowhere: a budget is the user's, not the model's), the one
with the most output tokens/s; and the fastest outright.
"""

from __future__ import annotations

from collections.abc import Callable

from dlbench.report.charts.model import Curve, CurveChart, Point, slug
from dlbench.report.studies.llm_serving import LOAD_FIELDS
from dlbench.report.studies.study import ROW_AXES, Row, StudyTable, baseline_label, case_label
from dlbench.report.studies.sweeps import pareto_front
from dlbench.results.details import DEVICE_CLOCK, Generation
from dlbench.results.flags import ABOVE_CEILING
from dlbench.results.limits import limit_text
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run

LineName = Callable[[Result], str]
Axis = Callable[[Result], float | None]

# MLPerf Inference's interactive limits for llama3.1-8b: 500 ms TTFT, 30 ms TPOT
TTFT_BUDGET_MS, TPOT_BUDGET_MS = 500.0, 30.0
COLUMNS = ("tpot", "decode_tps", "output_tps", "kv_cache", "memory", "mbu", "mfu")
# Read with the run (its ceilings), and left empty where they are above them
ROOFLINE_COLUMNS = ("mbu", "mfu")
IMPOSSIBLE = "impossible: faster than its ceiling allows (flag above-ceiling)"


def generated(run: Run) -> list[Result]:
    """The run's text-generation results that measured something."""
    return [r for r in run.results if r.ok and r.details.generation is not None]


def llm_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    generated_results = generated(run)
    groups: dict[tuple[str, int, int, int], list[Result]] = {}
    for result in generated_results:
        record = _generation(result)
        key = (result.case.workload, result.case.batch_size or 1, record.isl, record.osl)
        groups.setdefault(key, []).append(result)
    tables = [_engine_table(key, group, baseline, run) for key, group in sorted(groups.items())]
    if generated_results:
        tables.append(pick_table(generated_results))
    return tables


def _engine_table(
    key: tuple[str, int, int, int], results: list[Result], baseline: str, run: Run
) -> StudyTable:
    workload, batch, isl, osl = key
    metric = METRICS["ttft"]
    base_label = baseline_label(results, baseline)
    base = next((read(metric, r) for r in results if case_label(r) == base_label), None)
    rows = []
    for result in sorted(results, key=lambda r: read(metric, r) or float("inf")):
        value = read(metric, result)
        rows.append(Row(case_label(result), value,
                        value / base if value is not None and base else None,
                        note=engine_note(result),
                        extra=tuple(_column(c, result, run) for c in COLUMNS)))  # fmt: skip
    title = f"Text generation: {workload}, batch {batch}, {isl} tokens in, {osl} out"
    return StudyTable(title, metric, tuple(rows), tuple(METRICS[c] for c in COLUMNS))


def _column(key: str, result: Result, run: Run) -> float | None:
    """A column's value; a roofline share is none where the result is above its ceiling."""
    if key in ROOFLINE_COLUMNS and impossible(result):
        return None
    return read(METRICS[key], result, run)


def impossible(result: Result) -> bool:
    return ABOVE_CEILING in result.flags


# said of a case whose token times are the GPU's, beside cases stamped on the host
ON_THE_DEVICE = "token times on the GPU (CUDA events), not a streaming client's"


def engine_note(result: Result) -> str:
    """The tokens' check, what limits the case (or that its figures cannot be), and
    where its token times were taken when that was not on the host."""
    limit = IMPOSSIBLE if impossible(result) else limit_text(result.details.limit)
    clock = ON_THE_DEVICE if result.details.extra.get("token_clock") == DEVICE_CLOCK else ""
    return "; ".join(part for part in (tokens_note(result), limit, clock) if part)


def tokens_note(result: Result) -> str:
    """The tokens' check, in a few words: identical, a near tie at position N, ..."""
    check = result.details.generation.tokens if result.details.generation else None
    if check is None or check.verdict is None:
        return "tokens not checked"
    # a GPU's bf16 runs may each turn a different near tie: each was held to the reference
    apart = "; the generations differ from one another" if check.generations_agree is False else ""
    if check.first_divergence is None:
        return f"tokens {check.verdict}{apart}"
    return (f"tokens: {check.verdict} at {check.first_divergence} "
            f"({check.agreeing}/{check.compared} agree){apart}")  # fmt: skip


def pick_table(results: list[Result]) -> StudyTable:
    """Within the TTFT/TPOT budget, the most output tokens/s; and the fastest outright."""
    output, ttft, tpot = METRICS["output_tps"], METRICS["ttft"], METRICS["tpot"]
    rows = []
    results = [r for r in results if not impossible(r)]  # never a record
    if not results:
        row = Row(f"nothing to pick: every result is {IMPOSSIBLE}", None, None, metric=output)
        return StudyTable("Which to pick", METRICS["pick"], (row,))
    within = [r for r in results if _within_budget(r)]
    budget = f"TTFT <= {TTFT_BUDGET_MS:g} ms and TPOT <= {TPOT_BUDGET_MS:g} ms"
    if within:
        best = max(within, key=lambda r: read(output, r) or 0.0)
        label = f"most output tokens/s within {budget}: {_where(best)}"
        note = tokens_note(best)
        rows.append(Row(label, read(output, best), None, note=note, metric=output))
    else:
        rows.append(Row(f"nothing measured runs within {budget}", None, None, metric=output))
    fastest = min(results, key=lambda r: read(ttft, r) or float("inf"))
    rows.append(Row(f"lowest TTFT: {_where(fastest)}", read(ttft, fastest), None, metric=ttft))
    steadiest = min(results, key=lambda r: read(tpot, r) or float("inf"))
    rows.append(Row(f"lowest TPOT: {_where(steadiest)}", read(tpot, steadiest), None,
                    metric=tpot))  # fmt: skip
    title = f"Which to pick: under MLPerf's interactive budget ({budget}), and outright"
    return StudyTable(title, METRICS["pick"], tuple(rows))


def _within_budget(result: Result) -> bool:
    ttft, tpot = read(METRICS["ttft"], result), read(METRICS["tpot"], result)
    return (
        ttft is not None
        and tpot is not None
        and ttft <= TTFT_BUDGET_MS
        and (tpot <= TPOT_BUDGET_MS)
    )


def _where(result: Result) -> str:
    return f"{case_label(result)} on {result.case.workload}, batch {result.case.batch_size}"


def llm_charts(run: Run) -> list[CurveChart]:
    """What an isl, osl or batch sweep measured: TTFT against the prompt's length,
    decode tokens/s against the batch, and per engine the latency-throughput front."""
    results = generated(run)
    charts = []
    for workload in sorted({r.case.workload for r in results}):
        of_workload = [r for r in results if r.case.workload == workload]
        for chart in (_ttft_by_isl, _decode_by_batch, _front):
            drawn = chart(workload, of_workload)
            if drawn is not None:
                charts.append(drawn)
    return charts


def _line_label(result: Result) -> str:
    """A line of an isl or batch sweep: the engine, and a server's load (a line runs
    along one load: a load sweep's points are report.studies.llm_serving's)."""
    return result.case.label(only=(*ROW_AXES, *LOAD_FIELDS))


def _lines(results: list[Result], name: LineName) -> dict[str, list[Result]]:
    lines: dict[str, list[Result]] = {}
    for result in results:
        lines.setdefault(name(result), []).append(result)
    return lines


def _curves(lines: dict[str, list[Result]], x: Axis, y: Axis) -> tuple[Curve, ...]:
    """A curve per line, its points in x order, where at least one line has two."""
    curves = []
    for label, line in lines.items():
        pairs = [(x(r), y(r)) for r in line]
        points = sorted((px, py) for px, py in pairs if px is not None and py is not None)
        curves.append(Curve(label, tuple(Point(px, py) for px, py in points)))
    return tuple(curves) if any(len(c.points) > 1 for c in curves) else ()


def _ttft_by_isl(workload: str, results: list[Result]) -> CurveChart | None:
    lines = _lines(results, lambda r: f"{_line_label(r)}, batch {r.case.batch_size}")
    curves = _curves(lines, lambda r: _generation(r).isl, _metric("ttft"))
    if not curves:
        return None
    return CurveChart(f"llm-ttft-isl-{slug(workload)}", f"{workload}: TTFT against the prompt's "
                      "length", "input tokens", "median TTFT ms", curves)  # fmt: skip


def _decode_by_batch(workload: str, results: list[Result]) -> CurveChart | None:
    lines = _lines(results, lambda r: f"{_line_label(r)}, isl {_generation(r).isl}")
    curves = _curves(lines, lambda r: r.case.batch_size, _metric("decode_tps"))
    if not curves:
        return None
    return CurveChart(f"llm-decode-batch-{slug(workload)}", f"{workload}: decode tokens/s "
                      "against the batch", "batch", "decode tokens/s", curves)  # fmt: skip


def _front(workload: str, results: list[Result]) -> CurveChart | None:
    """Output tokens/s against TPOT, a line per engine, where a batch sweep ran; ringed:
    no point beats it on both."""
    lines = _lines(results, case_label)
    if not any(len({r.case.batch_size for r in line}) > 1 for line in lines.values()):
        return None
    x, y = _metric("output_tps"), _metric("tpot")
    front = pareto_front([(x(r) or 0.0, y(r) or 0.0) for r in results])
    curves = tuple(
        Curve(label, tuple(_front_point(r, x, y, front) for r in sorted(line, key=_or_zero(x))))
        for label, line in lines.items()
    )
    return CurveChart(f"llm-front-{slug(workload)}", f"{workload}: time per output token "
                      "against output tokens/s (ringed: the Pareto front)", "output tokens/s",
                      "median TPOT ms", curves)  # fmt: skip


def _front_point(result: Result, x: Axis, y: Axis, front: set[tuple[float, float]]) -> Point:
    at = (x(result) or 0.0, y(result) or 0.0)
    where = f"bs={result.case.batch_size} isl={_generation(result).isl}"
    return Point(*at, where, marked=at in front)


def _generation(result: Result) -> Generation:
    """The generation record of a result `generated` kept (so one it has)."""
    record = result.details.generation
    assert record is not None, "generated() keeps the results that have one"
    return record


def _or_zero(axis: Axis) -> Callable[[Result], float]:
    """The axis with no value read as 0, where its point is drawn (_front_point)."""
    return lambda result: axis(result) or 0.0


def _metric(key: str) -> Axis:
    return lambda result: read(METRICS[key], result)
