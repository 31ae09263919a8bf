"""The command line: real subprocesses for exit codes and output, as a user sees them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli, dlbench, spawn_dlbench

from dlbench.cli.main import main

NULL_SUITE = """
name: harness
settings: {min_time: 0, min_iters: 3, warmup: 1}
cases:
  - workload: [mlp, mnist-cnn]
    framework: "null"
"""


@pytest.mark.integration
def test_run_writes_json_csv_and_the_store(tmp_path, isolated_store):
    suite = tmp_path / "harness.yaml"
    suite.write_text(NULL_SUITE)
    proc = dlbench(
        "run", str(suite), "--json", str(tmp_path / "r.json"), "--csv", str(tmp_path / "r.csv")
    )
    assert proc.returncode == 0, proc.stderr
    run = json.loads((tmp_path / "r.json").read_text())
    assert run["suite"] == "harness" and run["finished_at"]
    assert [r["case"]["workload"] for r in run["results"]] == ["mlp", "mnist-cnn"]
    assert all(r["status"] == "ok" for r in run["results"])
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 3
    assert "null (harness)" in proc.stdout
    shown = dlbench("show", run["id"])  # from the store ($DLBENCH_DB)
    assert shown.returncode == 0 and run["id"] in shown.stdout
    shown = dlbench("show", str(tmp_path / "r.json"))
    assert shown.returncode == 0 and "mnist-cnn" in shown.stdout


@pytest.mark.integration
def test_a_failed_case_makes_the_exit_code_non_zero(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(
        NULL_SUITE + '  - workload: mlp\n    framework: "null"\n    options: {fault: abort}\n'
    )
    proc = dlbench("run", str(suite), "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 1
    assert "worker aborted (SIGABRT)" in proc.stdout
    statuses = [r["status"] for r in json.loads((tmp_path / "r.json").read_text())["results"]]
    assert statuses == ["ok", "ok", "failed"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--workload", "nope"], "unknown workload 'nope'"),
        (["run", "-w", "mlp", "--framework", "caffe"], "unknown framework 'caffe'"),
        (["run", "-w", "mlp", "--compile", "turbo"], "unknown compile mode 'turbo'"),
        (["run", "-w", "mlp", "--batch-size", "0"], "expected an integer from 1 to"),
        (["run", "-w", "mlp", "--threads", "2000"], "integer from 1 to 1024, got 2000"),
        (["run", "-w", "mlp", "--min-time", "soon"], "expected a number from 0 to 86400"),
        (["run", "-w", "mlp", "--warmup", "-1"], "integer from 0 to 100000, got -1"),
        (["run", "missing-suite.yaml"], "cannot read suite file missing-suite.yaml"),
        (["run", "--bogus"], "unrecognized arguments: --bogus"),
        (["list", "gizmos"], "invalid choice: 'gizmos'"),
        (["show", "no-such-run"], "neither a run file nor a run id"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_user_errors_exit_2_with_one_line_and_no_traceback(args, message):
    proc = cli(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("dlbench") and message in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "args", [["run", "--workload", "nope"], ["frobnicate"], ["run", "--min-time", "soon"]]
)
@pytest.mark.integration
def test_the_real_entry_point_exits_2_with_one_line(args):
    # the in-process checks above, through a real interpreter: the entry point,
    # argparse's own exit and a bad option value each end in one line, no traceback
    proc = dlbench(*args)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_invalid_yaml_file_is_a_user_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cases: [unclosed\n")
    assert main(["run", str(bad)]) == 2
    assert "invalid YAML at line" in capsys.readouterr().err


@pytest.mark.integration
def test_list_shows_what_is_installed(capsys):
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for name in ("torch", "null", "add", "gemm", "mlp", "mnist-cnn", "quick"):
        assert name in text


def test_list_frameworks_names_each_frameworks_own_options():
    """--option's help sends the reader here: every option an entry takes, as it takes it."""
    from dlbench.cli.info_commands import framework_options
    from dlbench.spec.registry import FRAMEWORKS

    assert framework_options(FRAMEWORKS["torch"]) == "optimizer=fused, ceiling=burst|sustained"
    assert "sleep_ms=N" in framework_options(FRAMEWORKS["null"])
    assert framework_options(FRAMEWORKS["jax"]) == "-"


@pytest.mark.integration
def test_env_json_has_the_fingerprint(capsys):
    assert main(["env", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    for key in (
        "cpu_model",
        "cpu_logical",
        "ram_gb",
        "gpus",
        "os",
        "python",
        "frameworks",
        "thread_env",
        "niceness",
    ):
        assert key in env
    assert env["cpu_logical"] >= 1 and env["niceness"] == os.getpriority(os.PRIO_PROCESS, 0)


@pytest.mark.integration
def test_importing_dlbench_imports_no_framework():
    """Nor worker or backend code (the contracts in pyproject.toml, at run time)."""
    code = (
        "import sys, dlbench, dlbench.cli.main, dlbench.plan.build, dlbench.api, "
        "dlbench.launch.runner, dlbench.launch.preflight, dlbench.results.env; "
        "dlbench.results.env.fingerprint(); "
        # planning a case reads its workload, whose arrays are made only in the worker
        "from dlbench.plan.validate import validate_case; from dlbench.spec.case import Case; "
        "[validate_case(Case(w, 'null', 'default')) for w in ('mlp', 'mnist-cnn', 'gemm')]; "
        "print([m for m in ('torch', 'tensorflow', 'jax', 'onnxruntime', 'openvino', 'numpy', "
        "'dlbench.worker', 'dlbench.backends') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.integration
def test_ctrl_c_kills_the_worker_and_keeps_finished_cases(tmp_path):
    import os
    import signal
    import time

    import psutil

    suite = tmp_path / "slow.yaml"
    suite.write_text(
        "settings: {min_time: 0, min_iters: 2, warmup: 0}\ncases:\n"
        '  - {workload: mlp, framework: "null"}\n'
        '  - {workload: mlp, framework: "null", options: {fault: hang}}\n'
    )
    proc = spawn_dlbench("run", str(suite), "--quiet", "--json", str(tmp_path / "r.json"))
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 60
    while (
        not (tmp_path / "r.json").exists()
        or not json.loads((tmp_path / "r.json").read_text())["results"]
    ):
        assert time.monotonic() < deadline, "first case never finished"
        time.sleep(0.1)
    while not (workers := parent.children(recursive=True)):  # the hanging case's worker
        assert time.monotonic() < deadline, "second worker never started"
        time.sleep(0.1)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted; 1 finished case(s) of run" in stderr
    run_id = json.loads((tmp_path / "r.json").read_text())["id"]
    assert f"resume with: dlbench run --resume {run_id}" in stderr
    assert "Traceback" not in stderr
    run = json.loads((tmp_path / "r.json").read_text())
    assert [r["status"] for r in run["results"]] == ["ok"]
    time.sleep(0.5)
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]


def _start_hanging_run(tmp_path: Path) -> tuple[subprocess.Popen[str], list]:
    import time

    import psutil

    suite = tmp_path / "hang.yaml"
    suite.write_text('cases: [{workload: mlp, framework: "null", options: {fault: hang}}]\n')
    proc = spawn_dlbench("run", str(suite), "--quiet")
    deadline = time.monotonic() + 60
    while not (workers := psutil.Process(proc.pid).children(recursive=True)):
        assert time.monotonic() < deadline, "worker never started"
        time.sleep(0.1)
    time.sleep(1.0)  # let the worker reach its hanging step
    return proc, workers


def _gone(workers: list, timeout: float = 10.0) -> bool:
    import psutil

    _, alive = psutil.wait_procs(workers, timeout=timeout)
    return not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.integration
def test_sigterm_to_dlbench_kills_the_worker_too(tmp_path):
    import signal

    proc, workers = _start_hanging_run(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in stderr
    assert _gone(workers)


@pytest.mark.integration
def test_a_worker_dies_with_a_parent_killed_hard(tmp_path):
    import signal

    proc, workers = _start_hanging_run(tmp_path)
    proc.send_signal(signal.SIGKILL)  # no cleanup code runs in the parent
    proc.communicate(timeout=30)
    assert _gone(workers)


def test_output_path_that_is_a_directory_is_a_user_error(tmp_path):
    proc = cli("run", "-w", "mlp", "-f", "null", "--json", str(tmp_path))
    assert proc.returncode == 2
    assert "it is a directory" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.integration
def test_env_survives_an_odd_nvidia_smi(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'Odd GPU, [N/A], 550.1'\necho 'garbage line'\n")
    fake.chmod(0o755)
    import os

    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    proc = dlbench("env", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["gpus"] == [
        {"name": "Odd GPU", "memory_mb": None, "driver": "550.1"}
    ]


def test_a_single_valued_option_given_twice_is_refused_not_overridden():
    done = cli("run", "-w", "mlp", "-f", "torch", "-t", "1", "-t", "2", "--dry-run")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--threads/-t takes one value, given 1 and 2: for several, --sweep threads=" in (
        done.stderr
    )
    # the same value twice says nothing new: it stands; a repeatable one builds a matrix
    assert cli("run", "-w", "mlp", "-f", "torch", "-t", "1", "-t", "1", "--dry-run").returncode == 0
    matrix = cli("run", "-w", "mlp", "-f", "torch", "-b", "1", "-b", "2", "--dry-run")
    assert matrix.returncode == 0 and matrix.stdout.count("mlp /") == 2
    shown = cli("show", "a", "--db", "x.sqlite", "--db", "y.sqlite")
    assert shown.returncode == 2 and "--db takes one value" in shown.stderr
