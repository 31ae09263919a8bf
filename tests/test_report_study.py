"""The cpu-inference study report: tables from results, and the suite end to end."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
from conftest import dlbench
from factories import make_result, make_run

from dlbench.measure.stats import summarize
from dlbench.report.studies.cpu_inference import study_tables
from dlbench.results.records import Result, Run
from dlbench.spec.registry import PRECISIONS


def result(framework: str, compile_mode: str, scenario: str, median_ms: float, **values) -> Result:
    batch = 1000 if scenario == "offline" else 1
    return make_result(
        framework=framework,
        compile=compile_mode,
        batch_size=batch,
        scenario=scenario,
        latency_ms=summarize([median_ms / 1000.0] * 5),
        samples_ms=[median_ms] * 5,
        throughput=batch / median_ms * 1000.0,
        cpu_percent=100.0,
        peak_rss_mb=100.0 + median_ms,
        **values,
    )


def study_run() -> Run:
    results = [
        result("torch", "eager", "offline", 0.5),
        result("torch", "eager", "single-stream", 0.05),
        result("onnxruntime", "default", "offline", 0.4),
        result("onnxruntime", "default", "single-stream", 0.01),
        result("tensorflow", "xla", "offline", 0.7),
    ]
    return make_run(results, suite="cpu-inference")


def test_article_table_multiplies_the_per_sample_loop_and_says_so():
    tables = study_tables(study_run(), "torch")
    article = next(t for t in tables if t.metric.key == "latency" and "article" in t.title)
    rows = {row.label: row for row in article.rows}
    assert rows["onnxruntime"].value == pytest.approx(0.01 * 1000)  # 1000 calls of batch 1
    assert rows["onnxruntime"].relative == pytest.approx(10.0 / 0.5)
    assert "NOT a fair comparison" in article.title
    assert "tensorflow" not in rows  # the article ran TF eager, which this run lacks


def test_fair_tables_never_mix_scenarios():
    tables = study_tables(study_run(), "torch")
    offline = next(t for t in tables if t.metric.key == "latency" and "offline" in t.title)
    single = next(t for t in tables if t.metric.key == "latency" and "single-stream" in t.title)
    assert {r.note for r in offline.rows} == {"batch 1000"}
    assert {r.note for r in single.rows} == {"batch 1"}
    by_label = {r.label: r for r in offline.rows}
    assert by_label["onnxruntime [default] t=2"].relative == pytest.approx(0.4 / 0.5)
    assert by_label["torch [eager] t=2"].spread == (0.5, 0.5)


def test_int8_and_one_thread_rows_stand_beside_fp32_but_the_article_keeps_its_cases():
    run = study_run()
    run = replace(run, results=[*run.results,
        # written before SQNR was measured: agreement and its floor only
        result("onnxruntime", "default", "offline", 0.2, precision="int8",
               details={"check": {"agreement": 0.97, "measure": "top-1 agreement",
                                  "floor": 0.9}}),
        result("onnxruntime", "default", "offline", 0.9, threads=1),
        result("onnxruntime", "default", "single-stream", 0.002, threads=1, precision="int8",
               details={"check": {"agreement": 0.95, "measure": "top-1 agreement",
                                  "sqnr_db": 14.24, "min_sqnr_db": 10.0}}),
    ])  # fmt: skip
    tables = study_tables(run, "torch")
    article = next(t for t in tables if t.metric.key == "latency" and "article" in t.title)
    assert {row.label: row.value for row in article.rows}["onnxruntime"] == pytest.approx(10.0)
    offline = next(t for t in tables if t.metric.key == "latency" and "offline" in t.title)
    labels = {row.label for row in offline.rows}
    assert {"onnxruntime [default] int8 t=2", "onnxruntime [default] t=1"} <= labels
    picks = next(t for t in tables if t.metric.key == "pick")
    fastest, most, least = picks.rows
    assert fastest.label == "fastest at batch 1: onnxruntime [default] int8 t=1, batch 1"
    # what int8 cost: the SQNR that passed it, and the agreement beside it
    assert fastest.note == "int8: SQNR 14.2 dB, 0.950 top-1 agreement"
    assert fastest.metric.key == "latency"
    assert most.label.startswith("highest throughput: onnxruntime [default] int8 t=2")
    assert most.note == "int8: SQNR not measured, 0.970 top-1 agreement"
    assert least.metric.key == "memory" and least.value == pytest.approx(100.002)


def test_missing_baseline_leaves_relative_empty():
    tables = study_tables(study_run(), "jax")
    assert all(row.relative is None for t in tables for row in t.rows)


# The cpu-inference study's shapes, each kind of case once: the article's method
# per framework, both scenarios and both thread counts on one framework (the fair
# tables and the thread sweep), and int8 beside fp32 on each framework that has it
# (torch's PT2E int8, a cold Inductor compile, is tested in test_worker_quantized).
SMALL_CPU_INFERENCE_SUITE = """
name: cpu-inference
cases:
  - {workload: mlp, framework: torch, compile: eager, scenario: [offline, single-stream],
     sweep: {threads: [1, all]}}
  - {workload: mlp, framework: [tensorflow, jax], scenario: offline}
  - {workload: mlp, framework: onnxruntime, scenario: [offline, single-stream]}
  - {workload: mlp, framework: openvino, scenario: single-stream}
  - {workload: mlp, framework: onnxruntime, precision: [int8, int8-dynamic],
     scenario: single-stream}
  - {workload: mlp, framework: openvino, precision: int8, scenario: single-stream}
  - {workload: mlp, framework: torch, compile: eager, precision: int8-dynamic,
     scenario: single-stream}
"""


@pytest.mark.slow
def test_cpu_inference_suite_end_to_end(tmp_path):
    suite = tmp_path / "cpu-inference.yaml"
    suite.write_text(SMALL_CPU_INFERENCE_SUITE)
    proc = dlbench(
        "run",
        str(suite),
        "--min-time",
        "0.05",
        "--min-iters",
        "5",
        "--plots",
        str(tmp_path / "plots"),
        "--json",
        str(tmp_path / "run.json"),
        "--csv",
        str(tmp_path / "run.csv"),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads((tmp_path / "run.json").read_text())
    frameworks = {r["case"]["framework"] for r in run["results"]}
    assert frameworks == {"torch", "tensorflow", "jax", "onnxruntime", "openvino"}
    fp32 = [r for r in run["results"] if r["case"]["precision"] == "fp32"]
    assert all(r["max_abs_diff"] is not None and r["max_abs_diff"] < 1e-4 for r in fp32)
    int8 = [r for r in run["results"] if r["case"]["precision"] != "fp32"]
    assert {(r["case"]["framework"], r["case"]["precision"]) for r in int8} == {
        ("onnxruntime", "int8"), ("onnxruntime", "int8-dynamic"), ("openvino", "int8"),
        ("torch", "int8-dynamic"),
    }  # fmt: skip
    bound = PRECISIONS["int8"].min_sqnr_db
    assert all(r["details"]["check"]["sqnr_db"] >= bound for r in int8)
    # one thread beside every thread available
    assert {r["case"]["threads"] for r in fp32} == {1, max(r["case"]["threads"] for r in fp32)}
    assert "As the article measured it" in proc.stdout and "fair, offline" in proc.stdout
    assert "Which to pick" in proc.stdout and "fastest at batch 1" in proc.stdout
    for metric in ("latency", "cpu", "memory"):
        png = (tmp_path / "plots" / f"cpu-inference-{metric}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000
    with open(tmp_path / "plots" / "cpu-inference-tables.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["metric"] for row in rows} == {"latency", "cpu", "memory", "throughput"}
    assert (tmp_path / "plots" / "sweep-mlp-cpu.png").read_bytes().startswith(b"\x89PNG")


def test_a_study_tables_value_column_names_its_quantity_not_only_its_unit():
    """A text-generation table's first number is TTFT: its header says so ("TTFT ms", not
    "ms"), and a table of picks, which mixes units, heads its column too."""
    import io

    from rich.console import Console

    from dlbench.report.studies.study import Row, StudyTable
    from dlbench.report.studies.study_output import rich_table
    from dlbench.results.metrics import METRICS

    ttft, pick = METRICS["ttft"], METRICS["pick"]
    tables = (
        StudyTable("Text generation", ttft, (Row("torch [eager]", 224.0, 1.0),)),
        StudyTable("Which to pick", pick, (Row("lowest TTFT", 152.0, None, metric=ttft),)),
    )
    for table, header in zip(tables, ("TTFT ms", pick.column), strict=True):
        out = io.StringIO()
        Console(file=out, width=120).print(rich_table(table, "torch"))
        heads = out.getvalue().splitlines()[2]  # the title, the rule, then the headers
        assert f" {header} " in heads, heads
