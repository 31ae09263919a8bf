"""The isolated runner: real worker processes, real crashes, a parent that sleeps."""

from __future__ import annotations

import os
import time

import pytest
from conftest import FAST, null_case

from dlbench.launch.runner import describe_exit, run_case
from dlbench.launch.session import run_plan
from dlbench.results.store import open_store
from dlbench.spec.case import Settings


@pytest.mark.integration
def test_null_case_measures_and_reports_everything():
    result = run_case(null_case(), FAST)
    assert result.ok, result.error
    assert result.latency_ms is not None and result.latency_ms.n >= 3
    assert len(result.samples_ms) == result.latency_ms.n
    assert result.first_call_ms is not None and result.warmup_ms
    assert result.throughput > 0
    assert result.peak_rss_mb > 10
    assert result.cpu_percent is not None
    assert result.import_s is not None and result.setup_s is not None
    assert result.case.device == "cpu" and result.case.batch_size == 1000  # mlp's default, resolved
    assert result.gflops is None  # the null backend computes nothing and claims nothing


@pytest.mark.integration
def test_sleeping_step_is_timed_honestly():
    result = run_case(
        null_case(sleep_ms="20"), Settings(min_time_s=0.2, min_iters=3, warmup_iters=1)
    )
    assert result.ok, result.error
    assert 20.0 <= result.latency_ms.median < 40.0
    assert result.latency_ms.n >= 10  # 0.2 s of 20 ms steps


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("raise", "injected failure (null backend fault=raise)"),
        ("abort", "worker aborted (SIGABRT)"),
        ("segfault", "worker crashed with a segmentation fault (SIGSEGV)"),
        ("kill", "worker killed by SIGKILL (out of memory?"),
        ("exit", "worker exited with status 3 without reporting a result"),
    ],
)
@pytest.mark.integration
def test_failures_become_failed_results(fault, message):
    result = run_case(null_case(fault=fault), FAST)
    assert result.status == "failed"
    assert result.error.startswith(message)
    assert result.latency_ms is None
    assert result.case.workload == "mlp" and result.case.framework == "null"


@pytest.mark.integration
def test_segfault_log_tail_is_kept():
    result = run_case(null_case(fault="segfault"), FAST)
    assert "Segmentation fault" in (result.error_detail or "")


@pytest.mark.integration
def test_a_hanging_case_is_killed_at_the_timeout():
    start = time.monotonic()
    settings = Settings(min_time_s=0.0, min_iters=1, warmup_iters=0, timeout_s=3.0)
    result = run_case(null_case(fault="hang"), settings)
    assert result.status == "failed"
    assert result.error.startswith("timed out after 3 s")
    assert time.monotonic() - start < 30


def test_signal_descriptions():
    assert describe_exit(-9).startswith("worker killed by SIGKILL")
    assert describe_exit(-15) == "worker killed by SIGTERM"
    assert describe_exit(-200) == "worker killed by signal 200"
    assert describe_exit(None) == "worker did not report a result"


@pytest.mark.integration
def test_parent_sleeps_while_the_worker_runs():
    """A busy-waiting parent would burn about as much CPU as the case's wall time."""
    settings = Settings(min_time_s=2.0, min_iters=3, warmup_iters=0, timeout_s=60)
    start_cpu, start_wall = time.process_time(), time.monotonic()
    result = run_case(null_case(sleep_ms="50"), settings)
    parent_cpu = time.process_time() - start_cpu
    wall = time.monotonic() - start_wall
    assert result.ok, result.error
    assert wall > 2.0
    # Starting the spawned worker costs the parent a little CPU; waiting costs none.
    assert parent_cpu < 0.25 * wall, f"parent used {parent_cpu:.2f} s CPU in {wall:.2f} s"


@pytest.mark.integration
def test_a_suite_goes_on_after_failures_and_stores_everything(tmp_path):
    cases = [null_case(fault="raise"), null_case(), null_case(fault="abort"), null_case()]
    with open_store(tmp_path / "s.sqlite") as store:
        run = run_plan("test", cases, FAST, store)
        stored = store.load_run(run.id)
    assert [r.status for r in run.results] == ["failed", "ok", "failed", "ok"]
    assert run.failures == 2
    assert stored.results == run.results
    assert stored.finished_at is not None


@pytest.mark.integration
def test_cpu_percent_of_a_sleeping_step_is_near_zero():
    result = run_case(
        null_case(sleep_ms="10"), Settings(min_time_s=0.3, min_iters=3, warmup_iters=0)
    )
    assert result.ok
    assert 0.0 <= result.cpu_percent < 20.0


@pytest.mark.alone
def test_cpu_percent_of_a_busy_step_is_about_one_core():
    # The null backend's busy wait keeps one thread on a core, for a second: a
    # 0.2 s loop once read half a core in CI (something the tests' lock does not
    # hold took the cores for a moment); a second of it averages such a moment out.
    result = run_case(
        null_case(spin_ms="2"), Settings(min_time_s=1.0, min_iters=10, warmup_iters=0)
    )
    assert result.ok
    assert 50.0 < result.cpu_percent <= 105.0
    assert result.latency_ms.median >= 2.0


def test_the_resource_tracker_is_told_once_to_keep_quiet(monkeypatch):
    from dlbench.launch.runner import TRACKER_WARNING, _quiet_resource_tracker

    monkeypatch.setenv("PYTHONWARNINGS", "default::DeprecationWarning")
    _quiet_resource_tracker()
    _quiet_resource_tracker()
    import os

    assert os.environ["PYTHONWARNINGS"] == f"default::DeprecationWarning,{TRACKER_WARNING}"


def test_a_worker_gets_its_request_as_one_document_and_reads_it_back_whole(tmp_path):
    """Case, settings and every path the worker writes to, typed, in one JSON
    document: no positional strings, no paths in environment variables."""
    import contextlib
    import json
    from pathlib import Path

    from dlbench.launch.runner import _worker_process, worker_request
    from dlbench.spec.worker_request import (
        REQUEST_VERSION,
        SHARED_COMPILE_CACHE_ENV,
        CaseOutputs,
        WorkerRequest,
    )

    case, settings = null_case(sleep_ms="2"), Settings(min_time_s=0.5, seed=7)
    request = worker_request(case, settings, tmp_path, files_dir=tmp_path / "files")
    with contextlib.ExitStack() as stack:
        process = _worker_process(request, stack)
    (document,) = process._args  # type: ignore[attr-defined]  # what is pickled to the child
    assert json.loads(document)["version"] == REQUEST_VERSION
    back = WorkerRequest.from_json(document)
    assert back == request and back.case == case and back.settings.seed == 7
    assert back.outputs.progress_path == tmp_path / "progress.txt"
    assert back.outputs.files_dir == tmp_path / "files"
    # the test suite's shared compiler cache (tests/conftest.py) travels in it too
    assert back.shared_compile_cache == Path(os.environ[SHARED_COMPILE_CACHE_ENV])
    alone = WorkerRequest(case, settings, Path("r.json"), Path("w.log"), 1)
    assert WorkerRequest.from_json(alone.to_json()).shared_compile_cache is None
    assert WorkerRequest.from_json(alone.to_json()).outputs == CaseOutputs()
    for bad in (
        "[]",
        f'{{"version": {REQUEST_VERSION}}}',  # no case, no paths
        alone.to_json().replace(f'"version": {REQUEST_VERSION}', '"version": 1'),
        alone.to_json().replace('"parent_pid": 1', '"parent_pid": "1"'),
        alone.to_json().replace('"log_path": "w.log"', '"log_path": 3'),
    ):
        with pytest.raises(ValueError):
            WorkerRequest.from_json(bad)


def test_what_the_parent_adds_goes_on_a_copy_of_the_workers_result():
    """The timeline (and the flags, the parent's clock) are added with `replace`: the
    Result read from the worker's file is left as it was read."""
    import os

    from factories import make_result

    from dlbench.launch.runner import _with_timeline
    from dlbench.measure.timeline import TimelineSampler

    read = make_result()
    sampler = TimelineSampler(os.getpid())
    sampler.sample()
    sampler.sample()
    added = _with_timeline(read, sampler, gpu_note=None)
    assert added is not read and added.details is not read.details
    assert read.details.timeline is None and added.details.timeline is not None
    assert added.details.timeline.points == sampler.points
    assert _with_timeline(read, None, gpu_note=None) is read  # nothing sampled: as read


def test_the_worker_entry_point_is_imported_only_where_it_is_sent():
    import pickle
    from multiprocessing.reduction import ForkingPickler

    from dlbench.launch.runner import SpawnedFunction
    from dlbench.launch.worker_entry import WORKER_ENTRY
    from dlbench.worker.process import worker_main

    target = SpawnedFunction(*WORKER_ENTRY)
    assert pickle.loads(ForkingPickler.dumps(target)) is worker_main  # what the child gets
    with pytest.raises(RuntimeError, match="runs only in the process it is sent to"):
        target()


@pytest.mark.integration
def test_the_parent_runs_a_case_without_importing_worker_code():
    """The parent's contracts in pyproject.toml, checked at run time across a real case."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import sys
        from dlbench.launch.runner import run_case
        from dlbench.spec.case import Case, Settings

        case = Case(workload="mlp", framework="null", compile="default", device="cpu", threads=1)
        result = run_case(case, Settings(min_time_s=0.0, min_iters=3, warmup_iters=1))
        assert result.ok, result.error
        frameworks = {"torch", "tensorflow", "keras", "jax", "jaxlib", "onnxruntime", "openvino",
                      "onnx", "transformers", "nncf", "torchao", "tf2onnx"}
        print(sorted(m for m in sys.modules if m.partition(".")[0] in frameworks
                     or m.startswith(("dlbench.worker", "dlbench.backends"))))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
