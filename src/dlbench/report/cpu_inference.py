"""The cpu-inference study: the seed article's three tables, then done fairly.

The article timed a per-sample loop (1000 calls of batch 1) for ONNX Runtime
and OpenVINO against one batched call of 1000 for the others, and ranked them
together. Its tables are rebuilt here from the same runs, labelled as what
they are; the fair tables compare offline with offline and single-stream
with single-stream.
"""

from __future__ import annotations

from dlbench.report.study import (
    StudyTable,
    baseline_label,
    case_label,
    ok_results,
    quartiles,
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
    return [t for t in tables if t.rows]


def _find(results: list[Result], framework: str, compile_mode: str, scenario: str) -> Result | None:
    return next(
        (
            r
            for r in results
            if (r.case.framework, r.case.compile, r.case.scenario)
            == (framework, compile_mode, scenario)
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
