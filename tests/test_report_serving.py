"""The serving study's tables and charts, LoadGen's log read back, and its flags."""

from __future__ import annotations

import csv
import io
import json

import pytest
from factories import make_result, make_run

from dlbench.report.charts.svg import curve_chart
from dlbench.report.studies.serving import serving_charts, serving_tables
from dlbench.report.studies.study_output import study_csv
from dlbench.results.details import LoadGen
from dlbench.results.flags import result_flags
from dlbench.spec.record_dict import from_dict, to_dict
from dlbench.worker.loadgen_log import loadgen_outcome


def attempt(qps: float, p99: float, keeps: bool) -> dict:
    return {"target_qps": qps, "samples_per_s": qps * 0.99, "latency_ms": {"99": p99},
            "keeps_bound": keeps, "verdict": "VALID" if keeps else "INVALID"}  # fmt: skip


def peak_result(framework: str, peak: float | None, bound: float = 10.0, **loadgen):
    tries = [attempt(500, 2.0, True), attempt(1000, 40.0, False), attempt(750, 6.0, True)]
    details = {
        "verdict": "VALID" if peak else "INVALID",
        "perf_constraints_met": peak is not None,
        "latency_ms": {"50": 1.0, "90": 2.0, "99": 6.0 if peak else 40.0},
        "tries": tries,
        "peak_qps": peak,
        **loadgen,
    }
    return make_result(
        framework=framework, compile="default", scenario="server", batch_size=1, loadgen=True,
        find_peak=True, latency_bound_ms=bound, latency_percentile=99.0, streams=2,
        cpu_percent=120.0, peak_rss_mb=200.0, details={"loadgen": details},
    )  # fmt: skip


def single_stream(framework: str, p90: float):
    return make_result(
        framework=framework, compile="default", scenario="single-stream", batch_size=1,
        loadgen=True, cpu_percent=100.0, peak_rss_mb=150.0,
        details={"loadgen": {"verdict": "VALID", "latency_ms": {"90": p90}}},
    )  # fmt: skip


def serving_run():
    return make_run(
        [
            peak_result("onnxruntime", 750.0),
            peak_result("torch", 375.0),
            peak_result("openvino", None, peak_note="one query takes 12 ms, more than the bound"),
            single_stream("onnxruntime", 0.01),
            single_stream("torch", 0.04),
        ],
        suite="serving",
    )


def test_the_peak_table_has_the_rate_its_p99_cpu_and_memory_relative_to_the_baseline():
    peak, latency = serving_tables(serving_run(), "torch")
    assert "p99 <= 10 ms" in peak.title and peak.metric.key == "peak_qps"
    assert [c.key for c in peak.columns] == ["loadgen_p99", "cpu", "memory"]
    rows = {row.label.split(" ")[0]: row for row in peak.rows}
    assert rows["onnxruntime"].value == 750.0 and rows["onnxruntime"].relative == 2.0
    assert rows["onnxruntime"].extra == (6.0, 120.0, 200.0)
    assert rows["openvino"].value is None and rows["openvino"].note.startswith("none: one query")
    assert latency.metric.key == "loadgen_p90"
    assert [row.value for row in latency.rows] == [0.01, 0.04]


def test_the_tables_csv_keeps_one_value_a_row_and_the_companion_columns_as_rows():
    rows = list(csv.DictReader(io.StringIO(study_csv(serving_tables(serving_run(), "torch")))))
    onnx = [r for r in rows if r["case"].startswith("onnxruntime") and "peak" in r["table"]]
    assert {r["metric"]: float(r["value"]) for r in onnx} == {
        "peak_qps": 750.0, "loadgen_p99": 6.0, "cpu": 120.0, "memory": 200.0
    }  # fmt: skip


def test_the_chart_draws_every_rate_tried_with_the_peak_ringed_and_the_bound():
    (chart,) = serving_charts(serving_run())
    assert chart.limit == 10.0 and chart.name == "serving-mlp-cpu-10ms"
    onnx = next(c for c in chart.curves if c.label.startswith("onnxruntime"))
    assert [(p.x, p.y, p.marked) for p in onnx.points] == [
        (495.0, 2.0, False), (990.0, 40.0, False), (742.5, 6.0, True)
    ]  # fmt: skip
    svg = curve_chart(chart)
    assert svg.count("<polyline") == 3 and "bound 10 ms" in svg
    # one ringed peak: onnxruntime's (torch's peak is no rate of these tries, openvino has none)
    assert svg.count('r="6" fill="none"') == 1


def test_a_png_of_the_chart_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    from dlbench.report.charts.png import curve_chart as png

    (chart,) = serving_charts(serving_run())
    path = png(chart, tmp_path / "chart.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_flags_say_when_the_bound_was_missed_and_loadgen_said_invalid():
    missed = peak_result("openvino", None)
    assert {"over-bound", "loadgen-invalid"} <= set(result_flags(missed, 2))
    assert not {"over-bound", "loadgen-invalid"} & set(result_flags(peak_result("torch", 375.0), 2))


def mllog(key: str, value, error: bool = False) -> str:
    record = {"key": key, "value": value, "metadata": {"is_error": error}}
    return ":::MLLOG " + json.dumps(record)


def test_loadgens_detail_log_is_read_into_its_verdict_rate_and_milliseconds(tmp_path):
    log = tmp_path / "mlperf_log_detail.txt"
    log.write_text(
        "\n".join(
            [
                "some other line",
                mllog("result_validity", "INVALID"),
                mllog("result_perf_constraints_met", False),
                mllog("result_invalid_reason", "Reduce target QPS to improve latency. "),
                mllog("early_stopping_met", False),
                mllog("early_stopping_result", " * Only processed 40 queries."),
                mllog("result_completed_samples_per_sec", 812.5),
                mllog("result_scheduled_samples_per_sec", 850.0),
                mllog("result_overlatency_query_count", 7),
                mllog("result_99.00_percentile_latency_ns", 12_500_000),
                mllog("result_99.90_percentile_latency_ns", 20_000_000),
                mllog("result_min_latency_ns", 1_000_000),
                mllog("error_runtime", "Too many outstanding queries.", error=True),
            ]
        )
    )
    outcome = loadgen_outcome(log, "server", 1)
    assert outcome.verdict == "INVALID" and outcome.perf_constraints_met is False
    assert outcome.invalid_reason and outcome.invalid_reason.startswith("Reduce target QPS")
    assert "Early stopping not met: * Only processed 40" in outcome.invalid_reason
    assert outcome.samples_per_s == 812.5 and outcome.scheduled_samples_per_s == 850.0
    assert outcome.latency_ms == {"99": 12.5, "99.9": 20.0, "min": 1.0}
    assert outcome.over_bound == 7
    assert outcome.errors == ("error_runtime: Too many outstanding queries.",)
    assert outcome.queries is None and outcome.version is None  # not in this log
    assert outcome.per_query_latency_ms is None and outcome.ttft_percentiles_ms is None


def test_a_loadgen_value_of_another_type_than_loadgen_logs_is_none(tmp_path):
    log = tmp_path / "mlperf_log_detail.txt"
    log.write_text(
        "\n".join(
            [
                mllog("result_validity", "VALID"),
                mllog("result_query_count", 1024),
                mllog("loadgen_version", "6.0.17 @ d6147c7eb7"),
                mllog("result_overlatency_query_count", "7"),  # a count is an integer
                mllog("result_scheduled_samples_per_sec", True),
                mllog("early_stopping_result", ["a list"]),
            ]
        )
    )
    outcome = loadgen_outcome(log, "server", 1)
    assert (outcome.verdict, outcome.queries) == ("VALID", 1024)
    assert outcome.version == "6.0.17 @ d6147c7eb7"
    assert outcome.over_bound is None and outcome.scheduled_samples_per_s is None
    assert outcome.early_stopping is None and outcome.errors == ()
    # its JSON is what the LoadGen record reads: a field LoadGen did not give is left out
    assert to_dict(outcome) == {"verdict": "VALID", "invalid_reason": None,
                                "perf_constraints_met": None, "early_stopping": None,
                                "queries": 1024, "samples_per_s": None, "latency_ms": {},
                                "errors": [], "version": "6.0.17 @ d6147c7eb7"}  # fmt: skip
    record = from_dict(LoadGen, {"scenario": "server", **to_dict(outcome)})
    assert to_dict(record) == {"scenario": "server", "verdict": "VALID", "queries": 1024,
                               "errors": [], "version": "6.0.17 @ d6147c7eb7"}  # fmt: skip


def test_multi_stream_samples_per_second_come_from_the_mean_query_latency(tmp_path):
    log = tmp_path / "mlperf_log_detail.txt"
    log.write_text(mllog("result_mean_query_latency_ns", 2_000_000))
    outcome = loadgen_outcome(log, "multi-stream", 8)
    assert outcome.samples_per_s == pytest.approx(4000.0)
    assert outcome.per_query_latency_ms == {"mean": 2.0}


# The built-in serving suite's shapes (its name selects its study), one case of each
# kind: find-peak at 10 ms on two frameworks, DistilBERT's 100 ms bound on one
# stream (at 16 tokens, the length test_backends_models exports it at: the session's
# artifact cache then holds its ONNX file once), and a single-stream LoadGen run.
SMALL_SERVING_SUITE = """
name: serving
settings: {min_time: 0.2, min_iters: 5, warmup: 2, timeout: 300}
cases:
  - {workload: mlp, framework: [onnxruntime, torch], scenario: server, find_peak: true,
     latency_bound_ms: 10}
  - {workload: distilbert, framework: openvino, scenario: server, find_peak: true,
     latency_bound_ms: 100, streams: 1, params: {seq: 16}}
  - {workload: mlp, framework: openvino, scenario: single-stream, loadgen: true}
"""


@pytest.mark.slow
def test_serving_suite_end_to_end(tmp_path):
    from conftest import dlbench

    pytest.importorskip("mlperf_loadgen")
    # The serving study on a few of its cases, in short LoadGen runs: the tables,
    # charts, verdicts and find-peak tries are under test, not the peaks.
    suite = tmp_path / "serving.yaml"
    suite.write_text(SMALL_SERVING_SUITE)
    proc = dlbench("run", str(suite), "--min-time", "0.2", "--min-iters", "5",
                   "--plots", str(tmp_path / "plots"), "--json", str(tmp_path / "run.json"),
                   timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads((tmp_path / "run.json").read_text())
    frameworks = {r["case"]["framework"] for r in run["results"]}
    assert frameworks == {"onnxruntime", "openvino", "torch"}
    for result in run["results"]:
        loadgen = result["details"]["loadgen"]
        assert loadgen["verdict"] in ("VALID", "INVALID") and loadgen["latency_ms"], loadgen
        if result["case"].get("find_peak"):
            assert loadgen["tries"], loadgen  # every rate tried is kept
    for title in ("mlp cpu: peak server QPS with p99 <= 10 ms",
                  "distilbert seq=16 cpu: peak server QPS with p99 <= 100 ms",
                  "mlp cpu: single-stream latency, p90"):  # fmt: skip
        assert title in proc.stdout, proc.stdout[-3000:]
    for chart in ("serving-mlp-cpu-10ms", "serving-distilbert-seq-16-cpu-100ms"):
        assert (tmp_path / "plots" / f"{chart}.png").read_bytes().startswith(b"\x89PNG")


def test_labels_with_dollar_signs_are_drawn_as_text(tmp_path):
    """A "$" in a case or file name is text, not the start of matplotlib's mathtext."""
    pytest.importorskip("matplotlib")
    from dlbench.report.charts.model import Bar, BarChart
    from dlbench.report.charts.png import bar_chart

    chart = BarChart(
        "run $x^ of a$b.onnx", "ms", (Bar("a$b.onnx / torch", 1.0), Bar("$\\frac{", 2.0))
    )
    path = bar_chart(chart, tmp_path / "dollars.png")
    assert path.read_bytes().startswith(b"\x89PNG")
