"""The cpu-inference study: the seed article's three tables, then done fairly.

The article timed a per-sample loop (1000 calls of batch 1) for ONNX Runtime
and OpenVINO against one batched call of 1000 for the others, and ranked them
together. Its tables are rebuilt here from the same runs (fp32, every
thread), labelled as what they are; the fair tables compare offline with
offline and single-stream with single-stream, int8 rows beside fp32 and one
thread beside all. A last table answers the article's readers: which to
pick for the fastest batch-1 answer, the most throughput, the least memory,
each with what its precision cost in accuracy.
"""

from __future__ import annotations

from dlbench.report.run_charts import quartiles
from dlbench.report.studies.study import (
    Row,
    StudyTable,
    baseline_label,
    case_label,
    int8_cost,
    ok_results,
    relative_rows,
)
from dlbench.results.metrics import METRICS, Metric, read
from dlbench.results.records import Result, Run

WORKLOAD = "mlp"
# The article's three measures.
STUDY_METRICS = tuple(METRICS[key] for key in ("latency", "cpu", "memory"))
# What the article ran for each framework: (compile mode, scenario).
ARTICLE_METHOD = {
    "torch": ("eager", "offline"),
    "tensorflow": ("eager", "offline"),
    "jax": ("jit", "offline"),
    "onnxruntime": ("default", "single-stream"),
    "openvino": ("default", "single-stream"),
}
ARTICLE_TITLE = (
    "As the article measured it: time to predict {n} samples; onnxruntime and openvino "
    "in a loop of {n} single-sample calls, the others in one batched call "
    "(NOT a fair comparison)"
)


def study_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    results = ok_results(run, WORKLOAD)
    tables = []
    for metric in STUDY_METRICS:
        tables.append(article_table(results, metric, baseline))
        for scenario in ("offline", "single-stream"):
            tables.append(fair_table(results, metric, scenario, baseline))
    tables.append(pick_table(results))
    return [t for t in tables if t.rows]


def _find(results: list[Result], framework: str, compile_mode: str, scenario: str) -> Result | None:
    """The case the article ran: fp32, with every thread (its code set none)."""
    most = max((r.case.threads for r in results), default=0)
    return next(
        (
            r
            for r in results
            if (r.case.framework, r.case.compile, r.case.scenario, r.case.precision)
            == (framework, compile_mode, scenario, "fp32")
            and r.case.threads == most
        ),
        None,
    )


def article_table(results: list[Result], metric: Metric, baseline: str) -> StudyTable:
    offline_batch = (
        next((r.case.batch_size for r in results if r.case.scenario == "offline"), 1000) or 1000
    )
    entries = []
    for framework, (compile_mode, scenario) in ARTICLE_METHOD.items():
        result = _find(results, framework, compile_mode, scenario)
        value = read(metric, result) if result else None
        if result is None or value is None:
            continue
        looped = scenario == "single-stream" and metric.key == "latency"
        note = f"{offline_batch} x batch-1 loop" if scenario == "single-stream" else "one batch"
        entries.append((framework, value * offline_batch if looped else value, None, note))
    title = f"{metric.title} ({metric.unit}) - " + ARTICLE_TITLE.format(n=offline_batch)
    return StudyTable(title, metric, relative_rows(entries, baseline))


def fair_table(results: list[Result], metric: Metric, scenario: str, baseline: str) -> StudyTable:
    group = [r for r in results if r.case.scenario == scenario]
    entries = []
    for result in group:
        value = read(metric, result)
        if value is None:
            continue
        spread = quartiles(result) if metric.key == "latency" else None
        batch = f"batch {result.case.batch_size}"
        entries.append((case_label(result), value, spread, batch))
    title = f"{metric.title} ({metric.unit}) - fair, {scenario}: same weights, outputs checked"
    return StudyTable(title, metric, relative_rows(entries, baseline_label(group, baseline)))


# The deployment questions of the article's readers, on its small machines.
PICKS = (
    ("fastest at batch 1", "single-stream", "latency"),
    ("highest throughput", "offline", "throughput"),
    ("lowest memory", None, "memory"),
)


def pick_table(results: list[Result]) -> StudyTable:
    """Which to pick: the best case for each question, with what its precision cost."""
    rows = []
    for question, scenario, key in PICKS:
        metric = METRICS[key]
        measured = [
            (r, value)
            for r in results
            if scenario in (None, r.case.scenario) and (value := read(metric, r)) is not None
        ]
        if not measured:
            continue
        best, value = max(measured, key=lambda pair: _better(metric, pair[1]))
        label = f"{question}: {case_label(best)}, batch {best.case.batch_size}"
        rows.append(Row(label, value, None, note=accuracy_cost(best), metric=metric))
    title = "Which to pick: fastest at batch 1, highest throughput, lowest memory (all cases)"
    return StudyTable(title, METRICS["pick"], tuple(rows))


def _better(metric: Metric, value: float) -> float:
    return value if metric.higher_is_better else -value


def accuracy_cost(result: Result) -> str:
    """What the case's precision cost against fp32: int8's SQNR and agreement, else the
    difference."""
    cost = int8_cost(result)
    if cost is not None:
        return f"{result.case.precision}: {cost}"
    if result.max_abs_diff is not None:
        return f"{result.case.precision}: max |diff| {result.max_abs_diff:.2g} from the reference"
    return result.case.precision
