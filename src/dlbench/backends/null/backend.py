"""The null backend: does no work, so it measures dlbench's own overhead.

It exists for the harness's own tests and for `bench/harness_overhead.py`,
and is labelled as such everywhere it appears. Its options inject faults
(raise, abort, segfault, kill, hang, exit), a fixed sleep or a busy wait per
step, so the runner's failure capture, timing and CPU accounting are
exercised for real.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
import time
from collections.abc import Callable

from dlbench import __version__
from dlbench.backends.base import Backend, Job, Prepared
from dlbench.errors import CaseError
from dlbench.results.details import Details
from dlbench.untyped import JSONObject


def _noop() -> None:
    return None


def _spin(seconds: float) -> None:
    """Busy-wait on one thread: a step whose CPU use is known (one core)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        continue


class NullBackend(Backend):
    name = "null"

    def version(self) -> str:
        return __version__

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        return {"intra_op": intra_op, "inter_op": inter_op}

    def resolve_device(self, requested: str) -> str:
        # It computes nothing, so it runs where the harness runs: a result labelled
        # cuda:99 would claim a device that did no work, or does not exist.
        if requested in ("auto", "cpu"):
            return "cpu"
        raise CaseError(
            f"device {requested!r} asked for, but the null backend does no work and runs "
            "on the CPU only; use --device cpu or auto"
        )

    def prepare(self, job: Job) -> Prepared:
        options = dict(job.case.options)
        fault = options.get("fault")
        if fault is not None and fault != STEP_FAULT:
            inject_fault(fault)
        sleep_s = float(options.get("sleep_ms", 0)) / 1000.0
        spin_s = float(options.get("spin_ms", 0)) / 1000.0
        step: Callable[[], None] = _noop
        if sleep_s > 0:
            step = functools.partial(time.sleep, sleep_s)
        elif spin_s > 0:
            step = functools.partial(_spin, spin_s)
        if fault == STEP_FAULT:
            step = _failing_after(step, calls=FAULT_AFTER_CALLS)
        details = Details(extra={"null": "no computation"})
        return Prepared(step=step, device=job.device, details=details)


# "step-raise": the step raises from this call on (after the first call and warm-up)
STEP_FAULT = "step-raise"
FAULT_AFTER_CALLS = 20


def _failing_after(step: Callable[[], None], calls: int) -> Callable[[], None]:
    done = [0]

    def failing() -> None:
        done[0] += 1
        if done[0] > calls:
            raise CaseError(f"injected failure in step {done[0]} (null backend fault=step-raise)")
        step()

    return failing


def inject_fault(fault: str) -> None:
    """Fail the way `fault` names, to test that the runner records it."""
    if fault == "raise":
        raise CaseError("injected failure (null backend fault=raise)")
    if fault == "abort":
        os.abort()
    if fault == "segfault":
        ctypes.string_at(0)
    if fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "exit":
        sys.stderr.write("null backend: exiting with status 3 as asked\n")
        sys.stderr.flush()
        os._exit(3)
    if fault == "hang":
        while True:
            time.sleep(3600)
