"""--repeat N: fresh processes round-robin, merged into one result per case;
disturbed processes run again; resume continues the repeats; A/A passes the gate."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest
from conftest import cli, dlbench
from factories import make_case, make_result, samples

from dlbench.errors import RunInterrupted
from dlbench.launch.session import Outputs, resume_run, run_plan
from dlbench.measure.energy import EnergyUse
from dlbench.measure.stats import summarize
from dlbench.results.details import Details, Epoch, Training
from dlbench.results.repeats import add_process, processes, slots_done
from dlbench.results.store import open_store
from dlbench.spec.case import Settings


def process(median_ms: float, seed: int, flags: tuple[str, ...] = ()) -> object:
    ms = samples(median_ms, seed, n=50)
    return make_result(
        latency_ms=summarize([x / 1000 for x in ms]),
        samples_ms=ms,
        throughput=1000 / median_ms,
        flags=list(flags),
    )


def test_the_headline_comes_from_the_processes_and_the_samples_are_pooled():
    merged = None
    for index, median in enumerate((1.0, 3.0, 2.0)):
        merged = add_process(merged, process(median, index))
    listed = processes(merged)
    assert [round(p.values["median_ms"], 1) for p in listed] == [1.0, 3.0, 2.0]
    headline = statistics.median(p.values["median_ms"] for p in listed)
    assert merged.latency_ms.median == pytest.approx(headline)
    assert len(merged.samples_ms) == 150 and merged.latency_ms.n == 150
    assert merged.throughput == pytest.approx(500.0, rel=0.05)  # median of 1000, 333, 500
    assert "noisy" in merged.flags  # the processes disagree by far more than 10%


def test_the_spread_shown_is_between_the_processes_not_the_pooled_samples():
    from dlbench.report.table import iqr_percent

    merged = None
    for index, median in enumerate((1.0, 1.04, 1.08, 1.12), start=1):
        merged = add_process(merged, process(median, index))
    between = merged.details.processes.spread.median_ms_relative_iqr
    assert iqr_percent(merged) == f"{100 * between:.1f}%"
    pooled = merged.latency_ms.iqr / merged.latency_ms.median
    assert abs(between - pooled) > 0.005  # the two differ here: the test can tell them apart
    single = process(1.0, 9)
    assert iqr_percent(single) == f"{100 * single.latency_ms.iqr / single.latency_ms.median:.1f}%"


def test_a_disturbed_process_is_kept_but_left_out_and_its_repeat_runs_again():
    merged = add_process(None, process(1.0, 1))
    merged = add_process(merged, process(5.0, 2, flags=("interference",)))
    assert slots_done(merged) == 1  # the disturbed one leaves its repeat open
    merged = add_process(merged, process(1.1, 3))
    assert slots_done(merged) == 2
    listed = processes(merged)
    assert [p.used for p in listed] == [True, False, True]
    assert merged.latency_ms.median < 1.2 and "interference" not in merged.flags
    # a repeat disturbed three times in a row is given up on, and counted done
    stubborn = add_process(None, process(1.0, 1, flags=("stalled",)))
    for seed in (2, 3):
        stubborn = add_process(stubborn, process(1.0, seed, flags=("stalled",)))
    assert slots_done(stubborn) == 1 and "stalled" in stubborn.flags


def test_a_process_that_fails_after_others_measured_fails_the_case_and_keeps_them():
    merged = add_process(None, process(1.0, 1))
    merged = add_process(merged, process(1.1, 2))
    crashed = make_result(status="failed", error="worker exited with signal 9")
    merged = add_process(merged, crashed)
    assert not merged.ok and merged.status == "failed"
    assert merged.error == "process 3 of the case: worker exited with signal 9"
    listed = processes(merged)
    assert [p.status for p in listed] == ["ok", "ok", "failed"]
    assert all(p.samples_ms for p in listed[:2])  # nothing measured is lost


def test_time_to_train_is_the_median_of_the_processes_and_compare_reads_each():
    from dlbench.report.compare import process_values
    from dlbench.results.metrics import METRICS

    merged = None
    for seconds in (30.0, 20.0, 10.0):
        one = process(1.0, int(seconds))
        trained = replace(
            one,
            case=replace(one.case, mode="train"),
            samples_ms=[seconds * 1000.0 / 3] * 3,  # its samples are three epochs
            details=Details(training=Training(epochs=[Epoch()] * 3, time_to_train_s=seconds)),
        )
        merged = add_process(merged, trained)
    assert merged.details.training.time_to_train_s == 20.0  # the median, not the last one's
    assert sorted(process_values(merged, METRICS["time_to_train"])) == [10.0, 20.0, 30.0]
    assert "low-n-p99" not in merged.flags  # a training result's samples are epochs


def test_each_metric_is_merged_by_the_rule_the_metrics_table_gives_it():
    from dlbench.results.metrics import METRICS, Merge, Metric

    merged = None
    for index, (median, cpu, joules) in enumerate(
        ((1.0, 90, 0.3), (3.0, 110, 0.1), (2.0, 100, 0.2))
    ):
        one = process(median, index)
        merged = add_process(
            merged,
            replace(
                one,
                cpu_percent=cpu,
                peak_rss_mb=100.0 + index,
                flops_per_sample=2e6,
                details=Details(energy=EnergyUse(joules_per_sample=joules, mean_power_w=50.0)),
            ),
        )
    assert METRICS["cpu"].merge is Merge.MEDIAN_OF_PROCESSES and merged.cpu_percent == 100
    assert merged.details.energy == EnergyUse(joules_per_sample=0.2, mean_power_w=50.0)
    assert METRICS["p99"].merge is Merge.POOLED
    assert merged.latency_ms.p99 == summarize([s / 1000 for s in merged.samples_ms]).p99
    assert merged.gflops == pytest.approx(merged.throughput * 2e6 / 1e9)  # FROM_THROUGHPUT
    assert METRICS["memory"].merge is Merge.NOT_MERGED and merged.peak_rss_mb == 102.0
    # a value one used process lacks is not a median of the others: the newest's stands
    lacking = add_process(merged, replace(process(5.0, 7), details=Details(energy=EnergyUse())))
    assert lacking.details.energy == EnergyUse()
    with pytest.raises(ValueError, match="process_key"):
        Metric("x", "X", "", "x", True, merge=Merge.MEDIAN_OF_PROCESSES)


class ScriptedRunner:
    """Stands in for run_case: records the order and returns made-up processes."""

    def __init__(self, flag_first_of: str | None = None) -> None:
        self.order: list[str] = []
        self.flag_first_of = flag_first_of

    def __call__(self, case, settings, on_note, files_dir):
        self.order.append(case.workload)
        flags = ()
        if case.workload == self.flag_first_of and self.order.count(case.workload) == 1:
            flags = ("interference",)
        result = process(1.0 + len(self.order) / 100, len(self.order), flags)
        return replace(result, case=case)


def test_repeats_run_round_robin_and_a_disturbed_one_runs_again(tmp_path):
    cases = [make_case(workload="mlp"), make_case(workload="gemm")]
    runner = ScriptedRunner(flag_first_of="gemm")
    with open_store(tmp_path / "s.sqlite") as store:
        run = run_plan("t", cases, Settings(repeat=3), store, Outputs(), runner=runner)
        stored = store.load_run(run.id)
    assert runner.order == ["mlp", "gemm", "mlp", "gemm", "mlp", "gemm", "gemm"]
    mlp, gemm = stored.results
    assert len(processes(mlp)) == 3 and len(processes(gemm)) == 4
    assert [p.used for p in processes(gemm)] == [False, True, True, True]


def test_the_progress_is_told_of_each_process_a_disturbed_repeat_adds(tmp_path):
    """The bar's total was the plan's cases x repeats: a disturbed process's re-run went
    past it (--resume said '9 of 9 left' and stopped at 6/9)."""
    from dlbench.launch.session import Progress

    class Counting(Progress):
        finished = added = 0

        def case_finished(self, index, total, result, run) -> None:
            self.finished += 1

        def process_added(self) -> None:
            self.added += 1

    cases = [make_case(workload="mlp"), make_case(workload="gemm")]
    progress = Counting()
    with open_store(tmp_path / "s.sqlite") as store:
        run_plan("t", cases, Settings(repeat=3), store, Outputs(), progress,
                 runner=ScriptedRunner(flag_first_of="gemm"))  # fmt: skip
    assert progress.added == 1 and progress.finished == len(cases) * 3 + progress.added


def test_resume_continues_the_repeats_of_an_interrupted_run(tmp_path):
    cases = [make_case(workload="mlp"), make_case(workload="gemm")]

    class Interrupting(ScriptedRunner):
        def __call__(self, case, settings, on_note, files_dir):
            if len(self.order) == 3:
                raise KeyboardInterrupt
            return super().__call__(case, settings, on_note, files_dir)

    with open_store(tmp_path / "s.sqlite") as store:
        with pytest.raises(RunInterrupted) as stop:
            run_plan("t", cases, Settings(repeat=3), store, Outputs(), runner=Interrupting())
        run_id = stop.value.run.id
        interrupted = store.load_run(run_id)
        assert [slots_done(r) for r in interrupted.results] == [2, 1]
        runner = ScriptedRunner()
        resume_run(interrupted, cases, Settings(repeat=3), store, Outputs(), runner=runner)
        finished = store.load_run(run_id)
    assert runner.order == ["mlp", "gemm", "gemm"]
    assert [len(processes(r)) for r in finished.results] == [3, 3]
    assert finished.finished_at is not None


@pytest.mark.alone
@pytest.mark.slow
def test_a_real_a_a_pair_with_repeats_passes_the_gate(tmp_path):
    outs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        # 4 processes a side: the fewest whose Mann-Whitney test can reach p < 0.05, so
        # the gate could fire here (with 3 it can only say "inconclusive"). ONNX Runtime,
        # a real framework that starts in a fifth of torch's time: this test runs alone,
        # so its 8 processes' start-up is wall time of the whole suite (4 s, not 15)
        done = dlbench("run", "-w", "mlp", "-f", "onnxruntime", "--threads", "1",
                       "--repeat", "4", "--min-time", "0.05", "-q", "--json", str(out))  # fmt: skip
        assert done.returncode == 0, done.stderr
        outs.append(out)
    (result,) = json.loads(outs[0].read_text())["results"]
    assert len(result["details"]["processes"]["summaries"]) >= 4
    # 20%: a gate the false +31% and +49% "regressions" would have failed, with
    # room for the drift of two runs made one after the other on a shared machine
    gate = dlbench("compare", str(outs[0]), str(outs[1]), "--fail-on-regression", "20")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "4/4" in gate.stdout and "inconclusive" not in gate.stdout, gate.stdout


def test_a_suite_sets_a_default_repeat_and_a_bad_one_is_refused(tmp_path):
    from dlbench.errors import UserError
    from dlbench.plan.build import RunRequest, build_plan

    suite = tmp_path / "s.yaml"
    suite.write_text('settings: {repeat: 3}\ncases:\n  - {workload: mlp, framework: "null"}\n')
    assert build_plan(RunRequest(suite=str(suite))).settings.repeat == 3
    given = RunRequest(suite=str(suite), settings=(("repeat", 2),))
    assert build_plan(given).settings.repeat == 2  # --repeat wins over the suite
    suite.write_text('settings: {repeat: 0}\ncases:\n  - {workload: mlp, framework: "null"}\n')
    with pytest.raises(UserError, match="repeat"):
        build_plan(RunRequest(suite=str(suite)))
    refused = cli("run", "-w", "mlp", "-f", "null", "--repeat", "0")
    assert refused.returncode == 2 and "--repeat" in refused.stderr
