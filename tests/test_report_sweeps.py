"""Latency against throughput over a sweep, the Pareto front, and the pick under a budget."""

from __future__ import annotations

from factories import make_result, make_run

from dlbench.measure.stats import summarize
from dlbench.report.charts.svg import curve_chart
from dlbench.report.studies.sweeps import budget_table, pareto_front, sweep_charts


def swept(framework: str, batch: int, median_ms: float, p99_ms: float, **values):
    samples = [median_ms] * 98 + [p99_ms] * 2
    return make_result(
        framework=framework, compile="default", batch_size=batch,
        latency_ms=summarize([s / 1000.0 for s in samples]), samples_ms=samples,
        throughput=batch / median_ms * 1000.0, max_abs_diff=1e-6, **values,
    )  # fmt: skip


def sweep_run():
    check = {"agreement": 0.96, "sqnr_db": 21.5, "min_sqnr_db": 10.0}
    int8 = {"precision": "int8", "details": {"check": check}}
    return make_run(
        [
            swept("onnxruntime", 1, 0.01, 0.02),  # 100k/s at 0.01 ms: on the front
            swept("onnxruntime", 64, 0.2, 0.3),  # 320k/s
            swept("onnxruntime", 512, 4.0, 9.0),  # 128k/s at 4 ms: beaten by bs=64
            swept("openvino", 1, 0.02, 0.03),  # beaten by onnxruntime bs=1
            swept("openvino", 512, 1.0, 1.5, **int8),  # 512k/s: on the front
        ]
    )


def test_the_pareto_front_keeps_what_nothing_beats_on_both():
    points = [(100, 1.0), (200, 2.0), (150, 3.0), (200, 1.5)]
    assert pareto_front(points) == {(100, 1.0), (200, 1.5)}


def test_a_sweep_draws_a_line_per_configuration_labelled_by_batch_with_the_front_ringed():
    (chart,) = sweep_charts(sweep_run())
    lines = {curve.label: curve for curve in chart.curves}
    assert set(lines) == {
        "onnxruntime [default] t=2", "openvino [default] t=2", "openvino [default] int8 t=2"
    }  # fmt: skip
    onnx = {p.label: p.marked for p in lines["onnxruntime [default] t=2"].points}
    assert onnx == {"bs=1": True, "bs=64": True, "bs=512": False}
    assert chart.log_y and not chart.log_x  # 0.01 to 4 ms, but 100k to 512k samples/s
    svg = curve_chart(chart)
    assert svg.count("<polyline") == 3 and "bs=512" in svg and "log scale" in svg


def test_a_run_without_a_sweep_draws_no_sweep_chart():
    assert sweep_charts(make_run([swept("onnxruntime", 1, 0.01, 0.02)])) == []


def test_the_budget_pick_is_the_most_throughput_whose_p99_fits():
    (row,) = budget_table(sweep_run(), 2.0).rows
    assert row.label == "mlp cpu: openvino [default] int8 bs=512 t=2"
    assert row.note == "int8: SQNR 21.5 dB, 0.960 agreement"
    assert row.extra[0] == 1.5 and row.extra[2:4] == (21.5, 0.96)  # p99, SQNR, agreement
    (tight,) = budget_table(sweep_run(), 0.5).rows
    assert tight.label == "mlp cpu: onnxruntime [default] bs=64 t=2"
    (none,) = budget_table(sweep_run(), 0.001).rows
    assert none.value is None and none.note.startswith("none within 0.001 ms; lowest p99 0.0")


def test_the_html_report_draws_the_sweep_inline():
    from dlbench.report.html import render

    page = render([sweep_run()])
    assert "median latency against throughput" in page and page.count("<polyline") >= 3


def test_the_budget_table_skips_workloads_only_loadgen_measured():
    # LoadGen's rates belong to the serving tables; a run of them alone has no pick
    served = swept("onnxruntime", 1, 0.01, 0.02, loadgen=True, scenario="single-stream")
    assert budget_table(make_run([served]), 2.0).rows == ()
    assert sweep_charts(make_run([served])) == []


def test_a_threads_only_sweep_draws_a_line_per_configuration_labelled_by_threads():
    run = make_run(
        [
            swept("onnxruntime", 1, 0.02, 0.03, threads=1),
            swept("onnxruntime", 1, 0.012, 0.02, threads=2),
            swept("openvino", 1, 0.03, 0.04, threads=1),
            swept("openvino", 1, 0.02, 0.03, threads=2),
        ]
    )
    (chart,) = sweep_charts(run)
    assert "a point per thread count" in chart.title
    lines = {curve.label: [p.label for p in curve.points] for curve in chart.curves}
    assert lines == {"onnxruntime [default]": ["t=1", "t=2"], "openvino [default]": ["t=1", "t=2"]}
