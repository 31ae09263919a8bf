"""torch's step on a CUDA device as a pipeline (measure.pipeline): CUDA events at the
step boundaries, one synchronise per window, and what limits a step.

The events are recorded on the stream the step's kernels go to (the current
stream: eager, autocast, torch.compile and cuDNN all launch there), so the
event after step N completes when step N's last kernel has. They come from a
pool reused across windows: creating one is a driver call the host would
otherwise pay inside the window.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable

import torch

# torch's sync debug mode warns with this text on each synchronising operation
SYNC_WARNING = "synchroniz"


class CudaEventPipeline:
    """A step that queues CUDA work and returns, timed by events between steps."""

    marker = "cuda-events"

    def __init__(self, step: Callable[[], object], device: torch.device) -> None:
        self._step = step
        self._device = device
        self._pool: list[torch.cuda.Event] = []
        self._used = 0

    def issue(self) -> object:
        return self._step()

    def begin_window(self) -> None:
        self._used = 0
        self._record()

    def mark(self) -> None:
        self._record()

    def end_window(self) -> list[float]:
        torch.cuda.synchronize(self._device)
        events = self._pool[: self._used]
        # elapsed_time is in milliseconds, at about half a microsecond's resolution
        return [a.elapsed_time(b) / 1000.0 for a, b in itertools.pairwise(events)]

    def wait(self) -> None:
        torch.cuda.synchronize(self._device)

    def _record(self) -> None:
        if self._used == len(self._pool):
            self._pool.append(torch.cuda.Event(enable_timing=True))
        self._pool[self._used].record(torch.cuda.current_stream(self._device))
        self._used += 1

    def count_hidden_syncs(self) -> int | None:
        """One step under torch's sync debug mode, which warns at each operation that
        makes the host wait for the device (`.item()`, a copy to the host, GradScaler's
        check for infinities): each one drains the queue the host had run ahead with."""
        self.wait()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                self.issue()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        self.wait()
        return sum(SYNC_WARNING in str(warning.message) for warning in caught)

    def kernel_time_s(self) -> tuple[float | None, str | None]:
        """The device's busy time in one step (device_busy_s)."""
        self.wait()

        def step() -> None:
            self.issue()
            self.wait()

        return device_busy_s(step)


def device_busy_s(work: Callable[[], object]) -> tuple[float | None, str | None]:
    """The device's busy time while `work` runs (the device idle before it, and `work`
    synchronising before it returns): the union of its kernels', copies' and memsets'
    spans as CUDA's profiler (CUPTI, through torch.profiler) records them; else None
    and why not."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as profiled:
            work()
        spans = sorted(
            (event.start_ns(), event.end_ns())
            for event in profiled.profiler.kineto_results.events()
            if event.device_type() == torch.autograd.DeviceType.CUDA
            and not event.is_user_annotation()
        )
    except Exception as exc:  # a machine whose CUPTI cannot profile: said, not fatal
        return None, f"no kernel time: torch.profiler failed ({type(exc).__name__}: {exc})"
    if not spans:
        return None, "no kernel time: the profiler recorded no device activity"
    return union_ns(spans) / 1e9, None


def union_ns(spans: list[tuple[int, int]]) -> int:
    """The total length covered by sorted (start, end) spans, overlaps counted once
    (kernels on several streams run at the same time)."""
    covered, reach = 0, None
    for start, end in spans:
        if reach is None or start > reach:
            covered += end - start
            reach = end
        elif end > reach:
            covered += end - reach
            reach = end
    return covered
