"""Run one case in a fresh spawned worker process and always get a Result back.

The parent blocks in `Process.join`, which waits on the child's sentinel with
select(): it uses no CPU while the case runs, so it steals nothing from the
benchmark. A raise, crash, OOM kill or timeout becomes a failed Result.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import tempfile
import time
from multiprocessing.process import BaseProcess
from pathlib import Path

from dlbench.config import Case, Settings
from dlbench.launch.worker import base_result, now_iso, worker_main
from dlbench.results.records import STATUS_FAILED, Result

LOG_TAIL_LINES = 20
SIGNAL_HINTS = {
    signal.SIGKILL: "killed by SIGKILL (out of memory? the kernel's OOM killer sends it)",
    signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGBUS: "crashed with a bus error (SIGBUS)",
    signal.SIGILL: "crashed on an illegal instruction (SIGILL)",
    signal.SIGFPE: "crashed on a floating-point exception (SIGFPE)",
}


def run_case(case: Case, settings: Settings) -> Result:
    """Run `case` in its own process; never raises for a failing case."""
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="dlbench-case-") as scratch:
        result_path = Path(scratch) / "result.json"
        log_path = Path(scratch) / "worker.log"
        process = context.Process(
            target=worker_main,
            args=(case.to_dict(), settings.to_dict(), str(result_path), str(log_path), os.getpid()),
            name=f"dlbench-worker {case.label()}",
        )
        started_at, wall_start = now_iso(), time.perf_counter()
        timed_out = False
        try:
            process.start()  # inside the try: Ctrl-C during the spawn must kill it too
            process.join(settings.timeout_s)
            timed_out = process.is_alive()
        finally:
            # Also on Ctrl-C: never leave a worker (or its helpers) running, or
            # multiprocessing's exit handler would wait for it forever.
            _kill_group(process)
            if process.pid is not None:
                process.join()
        result = _collect(case, process, result_path, log_path, timed_out, settings.timeout_s)
    if result.started_at is None:
        result.started_at = started_at
        result.duration_s = time.perf_counter() - wall_start
    return result


def _kill_group(process: BaseProcess) -> None:
    """SIGKILL the worker's process group (it calls setsid), or the worker alone."""
    if process.pid is None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        if process.is_alive():
            process.kill()


def _collect(
    case: Case,
    process: BaseProcess,
    result_path: Path,
    log_path: Path,
    timed_out: bool,
    timeout_s: float,
) -> Result:
    """The worker's own Result if it wrote one, else a failed Result saying why."""
    if result_path.exists():
        # Written atomically, so if it exists it is complete.
        return Result.from_dict(json.loads(result_path.read_text(encoding="utf-8")))
    if timed_out:
        error = f"timed out after {timeout_s:g} s (--timeout); the worker was killed"
    else:
        error = describe_exit(process.exitcode)
    return base_result(case, STATUS_FAILED, error=error, error_detail=_log_tail(log_path))


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker did not report a result"
    if exitcode < 0:
        number = -exitcode
        try:
            hint = SIGNAL_HINTS.get(
                signal.Signals(number), f"killed by {signal.Signals(number).name}"
            )
        except ValueError:
            hint = f"killed by signal {number}"
        return f"worker {hint}"
    return f"worker exited with status {exitcode} without reporting a result"


def _log_tail(log_path: Path) -> str | None:
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return "\n".join(lines[-LOG_TAIL_LINES:]) or None
