"""The worker process: set up, run exactly one case, write its Result to a file.

This module is imported in a freshly spawned interpreter, so it must not
import NumPy or a framework at module level: CaseProcess loads NumPy at one BLAS
thread, sets the case's thread variables, then the one framework of the case is
imported (and that import is timed).
The launcher (dlbench.launch) starts `worker_main`; nothing here runs in the
parent.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from dlbench.atomic import write_atomic
from dlbench.backends.framework_guard import block_other_frameworks, frameworks_in_process
from dlbench.errors import CaseSkipped, first_line
from dlbench.lifeline import die_with_parent
from dlbench.results.details import Details, NumpyBlas
from dlbench.results.records import STATUS_SKIPPED, base_result, now_iso
from dlbench.spec.case import Case
from dlbench.spec.record_dict import from_dict
from dlbench.spec.registry import precision_info
from dlbench.spec.worker_request import WorkerRequest
from dlbench.untyped import JSONObject
from dlbench.worker.compile_cache import compile_cache_detail, private_compile_caches
from dlbench.worker.steps import execute, failed_from_exception
from dlbench.worker.thread_vars import THREAD_VARS  # set before import


def limit_numpy_blas() -> JSONObject:
    """NumPy's own BLAS pool at one thread, set before any framework loads.

    No backend times NumPy's BLAS (each framework runs its own kernels), yet
    NumPy's OpenBLAS starts a pool sized by OPENBLAS_NUM_THREADS whose threads
    can spin beside the measured loop and take cores from the framework (the
    null case, one Python loop, read up to 206% CPU). NumPy is loaded by now
    (CaseProcess loads it first): launch.worker_entry made it load at one
    thread, and threadpoolctl holds it there and reports it. It limits the BLAS
    libraries loaded at this moment, NumPy's alone: a framework's own BLAS, loaded
    later, keeps the case's thread count.
    """
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
    pools = [pool for pool in threadpool_info() if pool.get("user_api") == "blas"]
    return {
        "threads": max((int(pool["num_threads"]) for pool in pools), default=None),
        "libraries": sorted({str(pool.get("internal_api")) for pool in pools}),
    }


class CaseProcess:
    """The set-up every process that measures a case shares: the worker and each
    DDP rank. Built first, before any framework loads: the thread variables are
    read when OpenMP and friends load, and the other frameworks are hidden."""

    def __init__(self, case: Case, shared_compile_cache: Path | None = None) -> None:
        self.case = case
        self._shared_compile_cache = shared_compile_cache
        # NumPy loads here, its BLAS pool at the one thread the process was started with
        # (launch.worker_entry), before the case's count is set for what loads after it
        importlib.import_module("numpy")
        for name in THREAD_VARS:
            os.environ[name] = str(case.threads)
        block_other_frameworks(
            case.framework,
            hide_incidental=case.user_model is None,
            quantizes=precision_info(case.precision).quantized,
        )
        self._numpy_blas: JSONObject = {}
        self._work_began = time.time()

    @contextmanager
    def measuring(self) -> Iterator[None]:
        """Around the case's work: NumPy's BLAS at one thread, private compiler caches."""
        self._numpy_blas = limit_numpy_blas()
        self._work_began = time.time()  # wall-clock: compared with files' mtimes
        with private_compile_caches(self._shared_compile_cache):
            yield

    def recorded_in(self, details: Details) -> Details:
        """A result's details (its loop's, as its Result is made: worker.result) with what
        they record of the process it ran in."""
        return replace(
            details,
            frameworks_in_process=frameworks_in_process(),
            numpy_blas=from_dict(NumpyBlas, self._numpy_blas),
            compile_cache=compile_cache_detail(
                self.case,
                self._work_began,
                _compiled_by(details),
                shared=self._shared_compile_cache is not None,
            ),
        )


def _compiled_by(details: Details) -> float:
    """When the case's compilation was over (epoch seconds): as its timed loop began;
    for time-to-train, whose first epoch holds it, as its region ended; now where it
    recorded no region."""
    window = details.measured_wall
    if not window:
        return time.time()
    return window[-1] if details.training is not None else window[0]


def _redirect_output(log_path: Path) -> None:
    """Send this process's stdout/stderr (and C-level writes) to the case log."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)


def worker_main(document: str) -> None:
    """Process entry point (spawned by the runner): the case's request, as one document."""
    request = WorkerRequest.from_json(document)
    if hasattr(os, "setsid"):
        os.setsid()  # own process group: the runner can kill helpers we start too
    die_with_parent(request.parent_pid)
    _redirect_output(request.log_path)
    faulthandler.enable()  # a segfault's Python stack lands in the log
    case = request.case
    started_at = now_iso()
    wall_start = time.perf_counter()
    process = CaseProcess(case, request.shared_compile_cache)
    try:
        with process.measuring():  # execute imports the framework
            result = execute(case, request.settings, request.outputs, process.recorded_in)
    except CaseSkipped as exc:
        device = exc.device or case.device
        result = base_result(case, STATUS_SKIPPED, error=first_line(exc), device=device)
    except Exception as exc:  # any failure of the case is recorded, not raised
        result = failed_from_exception(case, exc)
    # The wrapper's own: when the process began and how long it took, case and all, on a
    # copy of the Result (made once by its loop, worker.result); a failure's too
    result = replace(result, started_at=started_at, duration_s=time.perf_counter() - wall_start)
    write_atomic(request.result_path, json.dumps(result.to_dict()))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter and framework teardown: it can hang or crash after the
    # result is safely written, and it is not part of any measurement.
    os._exit(0)
