"""Compare verdicts on samples with known shifts, the regression gate, the pivot."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace

import pytest
from conftest import cli
from factories import make_run, timed_run, with_result

from dlbench.report.compare import compare_runs, regressions
from dlbench.report.leaderboard import pivot
from dlbench.results.env import Ceilings
from dlbench.results.files import write_json
from dlbench.results.records import Run
from dlbench.spec.record_dict import ABSENT


def test_a_twenty_percent_shift_over_five_processes_is_slower():
    a, b = timed_run("a", 1.0, 1, processes=5), timed_run("b", 1.2, 2, processes=5)
    case = compare_runs(a, b).cases[0]
    assert case.verdict == "slower"
    assert (case.processes_a, case.processes_b) == (5, 5)
    assert case.ratio == pytest.approx(1.2, rel=0.05)
    assert case.interval[0] > 1.05 and case.interval[1] < 1.4
    assert case.p_value < 0.05


def test_one_process_per_side_is_inconclusive_however_many_iterations():
    # 400 iterations per side, 20% apart: iterations of one process are not replicates
    case = compare_runs(timed_run("a", 1.0, 1), timed_run("b", 1.2, 2)).cases[0]
    assert case.verdict.startswith("inconclusive (1 process per side")
    assert case.interval is None and not case.replicated


def test_one_process_per_side_is_called_only_beyond_two_x_and_never_gates():
    comparison = compare_runs(timed_run("a", 1.0, 1), timed_run("b", 2.5, 2))
    assert comparison.cases[0].verdict.startswith("slower (beyond 2x")
    assert regressions(comparison, 10) == []


def test_too_few_processes_to_reach_significance_say_so():
    a, b = timed_run("a", 1.0, 1, processes=2), timed_run("b", 1.5, 2, processes=2)
    case = compare_runs(a, b).cases[0]
    assert case.verdict.startswith("inconclusive (2 and 2 processes cannot show")


def test_identical_processes_are_no_significant_change():
    run = timed_run("a", 1.0, 1, processes=5)
    case = compare_runs(run, timed_run("b", 1.0, 1, processes=5)).cases[0]
    assert case.verdict == "no significant change"
    assert case.ratio == pytest.approx(1.0)


def test_same_distribution_other_draw_is_no_significant_change():
    a, b = timed_run("a", 1.0, 1, processes=5), timed_run("b", 1.0, 7, processes=5)
    assert compare_runs(a, b).cases[0].verdict == "no significant change"


def test_faster_and_throughput_direction():
    a, b = timed_run("a", 1.0, 1, processes=5), timed_run("b", 0.8, 2, processes=5)
    case = compare_runs(a, b, "throughput").cases[0]
    assert case.verdict == "faster"
    assert case.ratio == pytest.approx(1.25, rel=0.05)  # B does 25% more samples/s


def test_regressions_need_replication_and_the_interval_past_the_threshold():
    a, b = timed_run("a", 1.0, 1, processes=5), timed_run("b", 1.3, 2, processes=5)
    comparison = compare_runs(a, b)
    assert regressions(comparison, 10) and not regressions(comparison, 45)


def test_context_differences_are_reported():
    comparison = compare_runs(timed_run("a", 1.0, 1), timed_run("b", 1.0, 2, host="h2"))
    assert comparison.context["hostname"] == ("h1", "h2")


def caption(a: Run, b: Run) -> str:
    from dlbench.cli.terminal import comparison_table

    return str(comparison_table(compare_runs(a, b), "latency", a.id, b.id).caption)


def test_every_machine_fact_that_can_change_a_number_is_context():
    from dlbench.results.env import fingerprint

    here = fingerprint().to_dict()
    a, b = timed_run("a", 1.0, 1), timed_run("b", 1.0, 2)
    a, b = make_run(a.results, id="a", env=here), make_run(b.results, id="b", env=here)
    assert caption(a, b) == "same context"
    # the issue's example: one run had 2 CPUs available, the other 1
    b = make_run(b.results, id="b", env={**here, "cpu_available": 1, "cpu_governor": "powersave",
                                         "smt": True})  # fmt: skip
    lines = caption(a, b).splitlines()
    assert f"context differs: cpu_available: {here['cpu_available']} vs 1" in lines
    assert any(x.startswith("context differs: cpu_governor: ") for x in lines)
    assert any(x.startswith("context differs: smt: ") for x in lines)
    # every fact the fingerprint records but the installed frameworks' is compared
    for fact in set(here) - {"frameworks"}:
        changed = replace(fingerprint(), **{fact: ABSENT})  # unknown: differs from any value
        assert fact in compare_runs(a, make_run(b.results, id="b", env=changed)).context, fact


def test_differing_settings_are_listed_by_name():
    # the order compare has always printed them in (sorted by name), not the fields'
    a, b = timed_run("a", 1.0, 1), timed_run("b", 1.0, 2)
    in_a = {"min_time_s": 0.0, "min_iters": 3, "warmup_iters": 1, "timeout_s": 100.0, "seed": 1}
    in_b = {"min_time_s": 0.5, "min_iters": 5, "warmup_iters": 2, "seed": 2, "repeat": 2}
    a = make_run(a.results, id="a", env=b.env, settings=in_a)
    b = make_run(b.results, id="b", env=b.env, settings={**in_b, "label": "x"})
    settings = [x for x in caption(a, b).splitlines() if "settings." in x]
    assert settings == [
        "context differs: settings.label: none vs x",
        "context differs: settings.min_iters: 3 vs 5",
        "context differs: settings.min_time_s: 0.0 vs 0.5",
        "context differs: settings.repeat: 1 vs 2",
        "context differs: settings.seed: 1 vs 2",
        "context differs: settings.timeout_s: 100.0 vs 600.0",
        "context differs: settings.warmup_iters: 1 vs 2",
    ]


def test_a_fact_an_older_run_did_not_record_is_unknown():
    a, b = timed_run("a", 1.0, 1), timed_run("b", 1.0, 2)
    b = replace(b, env=replace(a.env, cpu_governor="performance"))  # a's predates the fact
    assert "context differs: cpu_governor: unknown vs performance" in caption(a, b)
    roofline = Ceilings(source_run="roof", values={"cpu|gflops|fp32": 100.0})
    with_ceilings = make_run(b.results, env=replace(a.env, ceilings=roofline))
    assert "ceilings" not in compare_runs(a, with_ceilings).context


def test_only_the_versions_of_the_compared_cases_frameworks_are_context():
    a, b = timed_run("a", 1.0, 1), timed_run("b", 1.0, 2)  # torch cases
    a = replace(a, env=replace(a.env, frameworks={"torch": "2.13.0", "jax": "0.10.2"}))
    b = replace(b, env=replace(b.env, frameworks={"torch": "2.13.0", "jax": "0.11.0"}))
    assert compare_runs(a, b).context == {}  # jax ran no case here
    b = replace(b, env=replace(b.env, frameworks={"torch": "2.14.0", "jax": "0.11.0"}))
    assert compare_runs(a, b).context == {"torch version": ("2.13.0", "2.14.0")}
    # the version the worker imported wins over the installed one
    a = with_result(a, 0, replace(a.results[0], framework_version="2.13.0"))
    b = with_result(b, 0, replace(b.results[0], framework_version="2.13.0"))
    assert compare_runs(a, b).context == {}
    b = with_result(b, 0, replace(b.results[0], framework_version="2.15.0"))
    assert compare_runs(a, b).context == {"torch version": ("2.13.0", "2.15.0")}


def test_unmatched_cases_are_listed():
    comparison = compare_runs(timed_run("a", 1.0, 1), timed_run("b", 1.0, 2, framework="jax"))
    assert not comparison.cases
    assert comparison.only_a and comparison.only_b


@pytest.mark.parametrize(("percent", "code"), [(10, 1), (45, 0)])
def test_fail_on_regression_gates_the_exit_code(tmp_path, percent, code):
    write_json(timed_run("a", 1.0, 1, processes=5), tmp_path / "a.json")
    write_json(timed_run("b", 1.3, 2, processes=5), tmp_path / "b.json")
    proc = cli(
        "compare",
        str(tmp_path / "a.json"),
        str(tmp_path / "b.json"),
        "--fail-on-regression",
        str(percent),
    )
    assert proc.returncode == code, proc.stderr
    assert "slower" in proc.stdout
    assert ("regression: mlp" in proc.stderr) == (code == 1)


def suite_run(run_id: str, median_ms: float, seed: int, workloads: list[str], **case) -> Run:
    """A --repeat 5 run of one case per workload (timed_run's), with `case` axes changed."""
    results = []
    for index, workload in enumerate(workloads):
        (result,) = timed_run(run_id, median_ms, seed + index, processes=5).results
        results.append(replace(result, case=replace(result.case, workload=workload, **case)))
    return make_run(results, id=run_id, settings={"repeat": 5}, env={"hostname": "h1"})


def gate(tmp_path, a: Run, b: Run, percent: str = "10") -> subprocess.CompletedProcess[str]:
    write_json(a, tmp_path / "a.json")
    write_json(b, tmp_path / "b.json")
    return cli("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
               "--fail-on-regression", percent)  # fmt: skip


def test_a_gate_with_no_case_in_common_is_a_user_error_naming_both_sides(tmp_path):
    # the issue's example: a baseline at --threads 2 against a run at --threads 1
    a = suite_run("a", 1.0, 1, ["mlp", "gemm"], threads=2)
    b = suite_run("b", 1.0, 1, ["mlp", "gemm"], threads=1)
    done = gate(tmp_path, a, b)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith("dlbench: error: --fail-on-regression: no case of A matches")
    assert "only in A: mlp" in line and "gemm" in line and "t=2" in line and "t=1" in line
    assert "key" in line  # how cases are matched
    assert "threads 2 vs 1" in line  # and the axis that kept them apart
    assert "only in A" in done.stdout  # the table is still printed


def test_many_unmatched_cases_are_named_up_to_three_then_counted(tmp_path):
    names = ["mlp", "gemm", "add", "conv", "mnist-cnn"]
    done = gate(tmp_path, suite_run("a", 1.0, 1, names), suite_run("b", 1.0, 1, names, threads=1))
    assert done.returncode == 2
    assert "and 2 more; only in B:" in done.stderr and done.stderr.count("and 2 more") == 2
    # two runs with no measured case at all are refused too
    assert gate(tmp_path, make_run([], id="a"), make_run([], id="b")).returncode == 2


def test_a_gate_judges_the_matched_cases_and_warns_of_the_unmatched(tmp_path):
    a = suite_run("a", 1.0, 1, ["mlp", "gemm"])
    slower = suite_run("b", 1.3, 2, ["mlp", "add"])
    done = gate(tmp_path, a, slower)
    assert done.returncode == 1, done.stderr  # the matched mlp regressed
    assert "regression: mlp" in done.stderr
    warning = next(x for x in done.stderr.splitlines() if "not gated" in x)
    assert "only in A: gemm" in warning and "only in B: add" in warning
    same = gate(tmp_path, a, suite_run("b", 1.0, 1, ["mlp", "add"]))
    assert same.returncode == 0, same.stderr  # unmatched cases warn, never fail
    assert "judged the 1 matched case(s) only" in same.stderr
    assert "not gated" not in gate(tmp_path, a, suite_run("b", 1.0, 1, ["mlp", "gemm"])).stderr


def test_a_case_that_failed_on_one_side_is_unmatched_and_says_so():
    a = suite_run("a", 1.0, 1, ["mlp", "gemm"])
    b = suite_run("b", 1.0, 1, ["mlp", "gemm"])
    b = with_result(b, 1, replace(b.results[1], status="failed", samples_ms=[]))
    comparison = compare_runs(a, b)
    assert [c.label for c in comparison.cases] == [a.results[0].case.label()]
    assert comparison.only_a == [f"{a.results[1].case.label()} (not measured in B)"]
    assert comparison.apart == {}  # B has the case: no axis kept it apart


def test_a_gate_over_single_processes_warns_that_it_cannot_fail(tmp_path):
    done = gate(tmp_path, timed_run("a", 1.0, 1), timed_run("b", 3.0, 2))
    assert done.returncode == 0  # beyond 2x from one process: named, never gated
    assert "cannot fail on 1 of 1 matched case(s)" in done.stderr and "--repeat 4" in done.stderr
    replicated = gate(
        tmp_path, timed_run("a", 1.0, 1, processes=5), timed_run("b", 1.0, 2, processes=5)
    )
    assert replicated.returncode == 0 and "warning" not in replicated.stderr
    # memory has one value per case: no test, whatever the processes
    write_json(timed_run("a", 1.0, 1, processes=5), tmp_path / "a.json")
    memory = cli("compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"),
                 "--metric", "memory", "--fail-on-regression", "10")  # fmt: skip
    assert memory.returncode == 0 and "no value per process to test" in memory.stderr


def test_pivot_by_machine_has_one_row_per_machine_relative_to_baseline():
    runs = [timed_run("a", 1.0, 1, "h1", "CPU A"), timed_run("b", 2.0, 2, "h2", "CPU B")]
    table = pivot(runs, "machine", "latency", "CPU A")
    assert table.rows == ["CPU A (h1)", "CPU B (h2)"]
    column = table.columns[0]
    assert table.relative("CPU B (h2)", column) == pytest.approx(2.0, rel=0.05)


def test_pivot_by_framework_keeps_each_frameworks_best_compile_mode():
    fast, slow = timed_run("a", 1.0, 1), timed_run("b", 3.0, 2)
    slow = with_result(
        slow, 0, replace(slow.results[0], case=replace(slow.results[0].case, compile="script"))
    )
    table = pivot([fast, slow], "framework", "latency", "torch")
    assert table.rows == ["torch"] and len(table.columns) == 1
    assert table.cells[("torch", table.columns[0])] == pytest.approx(1.0, rel=0.05)


def test_compare_cli_pivot_over_files(tmp_path):
    for name, median, host in (("a", 1.0, "h1"), ("b", 2.0, "h2")):
        write_json(timed_run(name, median, 1, host, f"CPU {host}"), tmp_path / f"{name}.json")
    proc = cli("compare", "--by", "machine", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert proc.returncode == 0, proc.stderr
    assert "CPU h2 (h2)" in proc.stdout and "(2.00x)" in proc.stdout
    json.loads((tmp_path / "a.json").read_text())  # the files are untouched run files


def test_a_verdict_and_a_gate_on_a_disturbed_side_name_it(tmp_path):
    """A 106 ms -> 0.688 ms change was called faster without saying one side was
    flagged interference: the verdict and the gate now name the flagged side."""
    a, b = timed_run("a", 1.0, 1, processes=5), timed_run("b", 1.3, 2, processes=5)
    b = with_result(b, 0, replace(b.results[0], flags=["interference"]))
    case = compare_runs(a, b).cases[0]
    assert case.verdict == "slower" and case.flagged == "B: interference"
    done = gate(tmp_path, a, b)
    assert done.returncode == 1
    assert "regression: mlp" in done.stderr
    assert "disturbed while measured (B: interference): measure again to confirm" in (
        " ".join(done.stderr.split())
    )
    assert "B: interference" in " ".join(done.stdout.split())  # beside the verdict
    # a flag that is no disturbance (low-n-p99) names nothing
    b = with_result(b, 0, replace(b.results[0], flags=["low-n-p99"]))
    assert compare_runs(a, b).cases[0].flagged == ""
