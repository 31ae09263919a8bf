"""Interrupted runs are resumed: finished cases kept once, the rest run, nothing lost.

A run stopped midway by a fault (a lock held too long, a full disk) keeps what
it stored and prints the exact command that resumes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import psutil
import pytest
from conftest import cli, dlbench, spawn_dlbench
from faults import fill, held_lock, read_only, refused, small_disk

from dlbench.results.store import open_store
from dlbench.results.store_faults import LOCK_TIMEOUT_ENV

# starts a process or imports a framework: not in the fast tier (tests/conftest.py)
pytestmark = pytest.mark.integration

SUITE = """
settings: {min_time: 0.4, min_iters: 3, warmup: 0}
cases:
  - workload: [mlp, mnist-cnn, add, gemm]
    framework: "null"
    options: {sleep_ms: 40}
"""


def wait_for_results(path, count: int, deadline: float) -> dict:
    while True:
        if path.exists():
            data = json.loads(path.read_text())
            if len(data["results"]) >= count:
                return data
        assert time.monotonic() < deadline, f"never reached {count} result(s)"
        time.sleep(0.05)


def test_kill_9_then_resume_runs_each_case_exactly_once(tmp_path, isolated_store):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    proc = spawn_dlbench(
        "run",
        str(suite),
        "--quiet",
        "--json",
        str(tmp_path / "r.json"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first = wait_for_results(tmp_path / "r.json", 1, time.monotonic() + 60)
    workers = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGKILL)  # no cleanup at all: like a power cut for dlbench
    proc.wait()
    psutil.wait_procs(workers, timeout=10)
    run_id = first["id"]
    with open_store(isolated_store) as store:
        interrupted = store.load_run(run_id)
    assert interrupted.finished_at is None and 1 <= len(interrupted.results) < 4
    kept = [r.started_at for r in interrupted.results]

    resumed = dlbench("run", "--resume", run_id, "--json", str(tmp_path / "r2.json"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming run {run_id}" in resumed.stderr
    with open_store(isolated_store) as store:
        final = store.load_run(run_id)
        assert store.result_seqs(run_id) == [0, 1, 2, 3]
    assert final.finished_at is not None
    assert [r.case.workload for r in final.results] == ["mlp", "mnist-cnn", "add", "gemm"]
    assert [r.started_at for r in final.results[: len(kept)]] == kept  # not re-measured
    assert all(r.ok for r in final.results)
    assert len(json.loads((tmp_path / "r2.json").read_text())["results"]) == 4


def test_resume_refuses_complete_unknown_and_mixed_requests(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "settings: {min_time: 0, min_iters: 1, warmup: 0}\n"
        'cases: [{workload: mlp, framework: "null"}]\n'
    )
    done = dlbench("run", str(suite), "--json", str(tmp_path / "r.json"), "--quiet")
    run_id = json.loads((tmp_path / "r.json").read_text())["id"]
    assert done.returncode == 0
    complete = cli("run", "--resume", run_id)
    assert complete.returncode == 2 and "is complete; nothing to resume" in complete.stderr
    unknown = cli("run", "--resume", "no-such-run")
    assert unknown.returncode == 2 and "no run 'no-such-run'" in unknown.stderr
    mixed = cli("run", "--resume", run_id, "--workload", "mlp")
    assert mixed.returncode == 2 and "drop --workload" in mixed.stderr


def stopped(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    """Wait for a run started by spawn_dlbench, as a completed process."""
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def resumed_exactly_once(run_id: str, db, kept: int, *args: str) -> None:
    """`dlbench run --resume` finishes the run: the kept cases are not measured again."""
    with open_store(db, read_only=True) as store:
        before = store.load_run(run_id)
    assert before.finished_at is None and len(before.results) == kept
    resumed = dlbench("run", "--resume", run_id, "--db", str(db), "--quiet", *args)
    assert resumed.returncode == 0, resumed.stderr
    with open_store(db, read_only=True) as store:
        final = store.load_run(run_id)
        assert store.result_seqs(run_id) == [0, 1, 2, 3]
    assert final.finished_at is not None
    assert [r.started_at for r in final.results[:kept]] == [r.started_at for r in before.results]


def test_a_lock_held_in_the_middle_of_a_run_stops_it_with_the_resume_command(
    tmp_path, isolated_store
):
    suite, out = tmp_path / "s.yaml", tmp_path / "r.json"
    suite.write_text(SUITE)
    env = {**os.environ, LOCK_TIMEOUT_ENV: "0.5"}
    proc = spawn_dlbench("run", str(suite), "--quiet", "--json", str(out), env=env)
    run_id = wait_for_results(out, 1, time.monotonic() + 60)["id"]
    with held_lock(isolated_store):  # another writer, until this run gives up
        result = stopped(proc)
    line = refused(result, f"store {isolated_store} is locked by another process", alone=False)
    assert line.endswith(f"1 finished case(s) of run {run_id} are stored in {isolated_store}; "
                         f"once that is fixed, resume with: "
                         f"dlbench run --resume {run_id} --json {out}")  # fmt: skip
    resumed_exactly_once(run_id, isolated_store, 1)


def test_ctrl_c_while_a_run_waits_for_the_lock_keeps_its_cases(tmp_path, isolated_store):
    suite, out = tmp_path / "s.yaml", tmp_path / "r.json"
    suite.write_text(SUITE)
    env = {**os.environ, LOCK_TIMEOUT_ENV: "60"}
    proc = spawn_dlbench("run", str(suite), "--quiet", "--json", str(out), env=env)
    run_id = wait_for_results(out, 1, time.monotonic() + 60)["id"]
    with held_lock(isolated_store):
        while "waiting up to 59 s more" not in proc.stderr.readline():
            assert proc.poll() is None
        time.sleep(0.5)  # into the wait itself, not the line's last microseconds
        proc.send_signal(signal.SIGINT)
        result = stopped(proc)
    assert result.returncode == 130 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"dlbench: interrupted; 1 finished case(s) of run {run_id} are stored in "
        f"{isolated_store}; resume with: dlbench run --resume {run_id} --json {out}"
    )
    resumed_exactly_once(run_id, isolated_store, 1)


@pytest.mark.parametrize("full", ["store", "run file"])
def test_a_full_disk_in_the_middle_of_a_run_keeps_what_was_stored(tmp_path, full):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    with small_disk(tmp_path / "disk") as disk:
        db = disk / "s.sqlite" if full == "store" else tmp_path / "s.sqlite"
        out = tmp_path / "r.json" if full == "store" else disk / "r.json"
        proc = spawn_dlbench("run", str(suite), "--quiet", "--json", str(out), "--db", str(db))
        run_id = wait_for_results(out, 1, time.monotonic() + 60)["id"]
        filler = fill(disk)
        result = stopped(proc)
        # the store's write fails before the second case is kept; a run file's after it
        kept = 1 if full == "store" else 2
        why = f"store {db}: the disk is full" if full == "store" else "No space left on device"
        line = refused(result, why, alone=False)
        assert line.endswith(
            f"{kept} finished case(s) of run {run_id} are stored in {db}; once that is "
            f"fixed, resume with: dlbench run --resume {run_id} --db {db} --json {out}"
        )
        filler.unlink()
        resumed_exactly_once(run_id, db, kept, "--json", str(out))


def test_plots_that_cannot_be_written_after_the_run_say_the_run_is_stored(tmp_path, isolated_store):
    out, plots = tmp_path / "r.json", tmp_path / "charts" / "plots"
    plots.parent.mkdir()
    proc = spawn_dlbench("run", "-w", "mlp", "-f", "null", "--sweep", "batch=1,2", "--min-time",
                         "0.4", "--quiet", "--plots", str(plots), "--json", str(out))  # fmt: skip
    run_id = wait_for_results(out, 1, time.monotonic() + 60)["id"]
    with read_only(plots.parent):  # checked when the run started, refused when it ends
        result = stopped(proc)
    line = refused(result, f"cannot write {plots}", alone=False)
    assert line.endswith(
        f"run {run_id} is stored: print its study again with `dlbench show {run_id} --plots DIR`"
    )
    with open_store(isolated_store, read_only=True) as store:
        run = store.load_run(run_id)
    assert run.finished_at is not None and len(run.results) == 2
    assert not plots.exists()
