"""The LLM generation study: the engines on the same weights, side by side.

One table per workload and batch: TTFT, TPOT, decode and output tokens/s, the
KV cache and the tokens' agreement with the torch reference, each engine
relative to the baseline. Then which engine to pick under a latency budget: of
the cases whose median TTFT and TPOT are within it (MLPerf's interactive
budget for llama3.1-8b, scaled nowhere: a budget is the user's, not the
model's), the one with the most output tokens/s; and the fastest outright.
"""

from __future__ import annotations

from dlbench.report.studies.study import Row, StudyTable, baseline_label, case_label
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run

# MLPerf Inference's interactive limits for llama3.1-8b: 500 ms TTFT, 30 ms TPOT
TTFT_BUDGET_MS, TPOT_BUDGET_MS = 500.0, 30.0
COLUMNS = ("tpot", "decode_tps", "output_tps", "kv_cache", "memory")


def llm_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    generated = [r for r in run.results if r.ok and r.details.generation is not None]
    groups: dict[tuple[str, int, int, int], list[Result]] = {}
    for result in generated:
        record = result.details.generation
        key = (result.case.workload, result.case.batch_size or 1, record.isl, record.osl)
        groups.setdefault(key, []).append(result)
    tables = [_engine_table(key, group, baseline) for key, group in sorted(groups.items())]
    if generated:
        tables.append(pick_table(generated))
    return tables


def _engine_table(
    key: tuple[str, int, int, int], results: list[Result], baseline: str
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
                        note=tokens_note(result),
                        extra=tuple(read(METRICS[c], result) for c in COLUMNS)))  # fmt: skip
    title = f"Text generation: {workload}, batch {batch}, {isl} tokens in, {osl} out"
    return StudyTable(title, metric, tuple(rows), tuple(METRICS[c] for c in COLUMNS))


def tokens_note(result: Result) -> str:
    """The tokens' check, in a few words: identical, a near tie at position N, ..."""
    check = result.details.generation.tokens if result.details.generation else None
    if check is None or check.verdict is None:
        return "tokens not checked"
    if check.first_divergence is None:
        return f"tokens {check.verdict}"
    return (f"tokens: {check.verdict} at {check.first_divergence} "
            f"({check.agreeing}/{check.compared} agree)")  # fmt: skip


def pick_table(results: list[Result]) -> StudyTable:
    """Within the TTFT/TPOT budget, the most output tokens/s; and the fastest outright."""
    output, ttft, tpot = METRICS["output_tps"], METRICS["ttft"], METRICS["tpot"]
    rows = []
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
