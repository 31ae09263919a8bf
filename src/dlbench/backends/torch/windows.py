"""A ceiling case's kernels as windows (measure.power_regime's WindowQueue).

On a CUDA device the calls are queued back to back on the device's current
stream, with an event after each window: a window's time is the span between
its event and the one before it, so the host waits once per window (for the
oldest), never per call, and the device never idles while windows are queued.
Where torch runs synchronously (the CPU) or can only wait for everything (MPS),
the host clock times each window, with one wait at its end.

The `copy` case also runs the memory ceiling's other kernels (workloads.copy:
MEMORY_KERNELS) on tensors of its shape, seeded, allocated here once.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

import torch

from dlbench.backends.base import Job, Prepared
from dlbench.backends.torch.models import KERNELS
from dlbench.backends.torch.precision import AUTOCAST_DTYPES
from dlbench.errors import CaseError
from dlbench.measure.power_regime import WindowQueue
from dlbench.workloads.copy import MEMORY_KERNELS

Call = Callable[[], object]


class CudaEventWindows:
    """Windows timed by CUDA events on the device's current stream (where torch's
    kernels go), the oldest waited for while the next are queued."""

    timed_by = "cuda-events"

    def __init__(self, calls: Mapping[str, Call], device: torch.device) -> None:
        self._calls = calls
        self._stream = torch.cuda.current_stream(device)
        self._pending: deque[tuple[torch.cuda.Event, torch.cuda.Event]] = deque()
        # NVML finds the GPU by this, whatever CUDA_VISIBLE_DEVICES renumbered
        self.gpu_uuid: str | None = str(torch.cuda.get_device_properties(device).uuid)

    def launch(self, kernel: str, calls: int) -> None:
        # Queued behind another window, this one starts where that one ends; on an
        # idle device, at an event recorded now
        start = self._pending[-1][1] if self._pending else self._event()
        call = self._calls[kernel]
        for _ in range(calls):
            call()
        self._pending.append((start, self._event()))

    def wait_oldest(self) -> float:
        start, end = self._pending.popleft()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0  # elapsed_time is in milliseconds

    def _event(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(self._stream)
        return event


class HostClockWindows:
    """Windows timed by the host clock, with one wait for the device at each end."""

    timed_by = "host-clock"
    gpu_uuid: str | None = None

    def __init__(self, calls: Mapping[str, Call], wait: Callable[[], None]) -> None:
        self._calls = calls
        self._wait = wait
        self._done: deque[float] = deque()

    def launch(self, kernel: str, calls: int) -> None:
        call = self._calls[kernel]
        began = time.perf_counter()
        for _ in range(calls):
            call()
        self._wait()
        self._done.append(time.perf_counter() - began)

    def wait_oldest(self) -> float:
        return self._done.popleft()


def window_queue(job: Job, prepared: Prepared) -> WindowQueue:
    """The case's own kernel (its step, unsynchronised where the device is
    asynchronous) and, for copy, the memory ceiling's other kernels."""
    device = torch.device(job.device)
    calls: dict[str, Call] = {job.workload.name: _unsynchronised(prepared, device)}
    if job.workload.name == MEMORY_KERNELS[0].name:
        calls.update(memory_kernels(job, device))
    if device.type == "cuda":
        return CudaEventWindows(calls, device)
    if device.type == "mps":
        return HostClockWindows(calls, torch.mps.synchronize)
    return HostClockWindows(calls, lambda: None)  # torch on a CPU returns when done


def memory_kernels(job: Job, device: torch.device) -> dict[str, Call]:
    """add and sum (MEMORY_KERNELS after copy) on seeded tensors of the copy's shape
    and type: what each reads and writes is what MEMORY_KERNELS counts."""
    dtype = AUTOCAST_DTYPES.get(job.case.precision, torch.float32)
    size = job.params["size"]
    generator = torch.Generator(device=device).manual_seed(job.seed)
    x, y = (
        torch.randn((job.batch_size, size, size), generator=generator, device=device, dtype=dtype)
        for _ in range(2)
    )
    out, flat = torch.empty_like(x), x.view(-1)
    total = torch.empty((), device=device, dtype=dtype)
    built: dict[str, Call] = {
        "add": lambda: KERNELS["add"](x, y, out),  # reads x and y, writes out
        "sum": lambda: torch.sum(flat, dim=0, out=total),  # reads x
    }
    return {kernel.name: built[kernel.name] for kernel in MEMORY_KERNELS[1:]}


def _unsynchronised(prepared: Prepared, device: torch.device) -> Call:
    if device.type != "cuda":
        return prepared.step  # synchronous on a CPU; MPS waits in its step
    if prepared.pipeline is None:
        raise CaseError("the torch step has no unsynchronised form on this CUDA device")
    return prepared.pipeline.issue
