"""Interrupted runs are resumed: finished cases kept once, the rest run, nothing lost."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import psutil
from conftest import cli, dlbench, spawn_dlbench

from dlbench.results.store import Store

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
    with Store(isolated_store) as store:
        interrupted = store.load_run(run_id)
    assert interrupted.finished_at is None and 1 <= len(interrupted.results) < 4
    kept = [r.started_at for r in interrupted.results]

    resumed = dlbench("run", "--resume", run_id, "--json", str(tmp_path / "r2.json"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming run {run_id}" in resumed.stderr
    with Store(isolated_store) as store:
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
