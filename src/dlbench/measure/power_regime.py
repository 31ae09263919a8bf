"""A ceiling's burst and sustained rates: windows of back-to-back kernels, timed on the device.

A GPU under a power cap has two ceilings. From a cool start a bf16 GEMM on an
H100 ran at ~730 TFLOP/s for its first 150 ms at 1980 MHz; once the cap pulled
the SM clock down to ~1350 MHz it settled at ~670 (bench/gpu_memory_kernels.py).
One figure over both is neither. So the kernel runs back to back, in windows
of several calls each (~20 ms), with the next windows queued before the host
waits for one: the device never idles between them, and the host waits once
per window, never per call. Each window is timed on the device (the backend's
`WindowQueue`: CUDA events, or the host clock on a synchronous device) and the
GPU's SM clock, power and limits are read (measure.gpu_probe) as it ends.

- burst: the windows of the first `burst_s` (at least one per kernel), as the
  rate over them (their work over their time);
- sustained: the median window rate of the windows that began after
  `sustain_s` of continuous work, over `measure_s` of windows.

Each figure keeps the SM clock and power seen during it. A ceiling of several
kernels (device memory: copy, add and a sum, whose read:write mixes reach
different bandwidths) runs them in turn, window by window, and each figure is
its best kernel's. This loop is framework-free; tests drive it with real
kernels on the CPU, where the host clock times the windows.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dlbench.measure.gpu_probe import GpuProbe, GpuReading
from dlbench.read_only import read_only

# From a cool start an H100's SM clock held 1980 MHz for ~50 ms of a bf16 GEMM and
# the power cap engaged by ~160 ms: the first 150 ms is the burst a short case sees.
BURST_S = 0.15
# Long enough that an event's resolution (~0.5 us) and a call's launch are lost in it,
# short enough that the burst holds several windows.
WINDOW_S = 0.02
MIN_CALLS = 2  # a window is several calls, never one
MIN_WINDOWS_PER_KERNEL = 3  # in each figure, of each kernel
# Windows queued ahead of the one waited for: the device has work while the host
# reads NVML and queues the next
DEPTH = 2


class WindowQueue(Protocol):
    """The backend's kernels, queued window by window and timed on the device."""

    timed_by: str  # "cuda-events" or "host-clock"
    gpu_uuid: str | None  # the NVIDIA GPU's, for its NVML readings; None: no such GPU

    def launch(self, kernel: str, calls: int) -> None:
        """Queue `calls` calls of `kernel` as one window after what is queued; return
        without waiting (a synchronous device has run them when this returns)."""

    def wait_oldest(self) -> float:
        """Wait for the oldest window launched; its seconds on the device."""


@dataclass(frozen=True)
class WindowKernel:
    """A kernel a ceiling runs, and the work one call does (FLOPs or bytes)."""

    name: str
    work_per_call: float


@dataclass(frozen=True)
class RegimePlan:
    """How long each phase runs. `sustain_s` 0: the sustained figure is taken over
    every window (a CPU, which has no power regime)."""

    sustain_s: float
    measure_s: float  # the windows after sustain_s (a burst-only run's windows in all)
    min_windows: int  # windows of the last phase, at least
    warmup_calls: int
    run_sustained: bool  # run to sustain_s + measure_s; else stop after measure_s
    burst_s: float = BURST_S
    window_s: float = WINDOW_S


@dataclass(frozen=True)
class RegimeFigure:
    """One ceiling figure (burst or sustained) and what the GPU did during it."""

    rate: float  # in the record's unit: its best kernel's
    kernel: str  # which kernel gave it
    windows: int  # of every kernel
    seconds: float  # their time on the device
    after_s: float  # continuous work before its first window
    sm_clock_mhz: float | None = None  # median of the readings as its windows ended
    power_w: float | None = None  # likewise
    temperature_c: int | None = None  # the highest read
    limits: tuple[str, ...] = ()  # clock limits seen during it
    # several kernels: each one's (read-only, as a result's details are throughout)
    by_kernel: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_kernel", read_only(self.by_kernel))


@dataclass(frozen=True)
class PowerRegimes:
    """A ceiling case's burst and sustained figures (details.power_regimes)."""

    unit: str  # GFLOP/s or GB/s
    timed_by: str
    calls_per_window: Mapping[str, int]  # read-only, as a result's details are throughout
    burst: RegimeFigure
    sustained: RegimeFigure | None = None  # None: the run stopped before sustain_s
    # the burst began with no clock limit in force (None: no GPU readings)
    cool_start: bool | None = None
    start: GpuReading | None = None  # the reading just before the burst
    power_source: str | None = None
    gpu_readings: str | None = None  # why there are none

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls_per_window", read_only(self.calls_per_window))


@dataclass(frozen=True)
class Window:
    kernel: str
    calls: int
    seconds: float
    start_s: float  # continuous device time before it
    reading: GpuReading | None

    @property
    def end_s(self) -> float:
        return self.start_s + self.seconds


@dataclass(frozen=True)
class RegimeRun:
    """What the windows measured: the record, and the case's own kernel's windows as
    the result's samples (seconds per call, one per window of its headline phase)."""

    record: PowerRegimes
    samples_s: list[float]
    calls: int  # of every kernel, over every window
    first_call_s: float
    warmup_s: list[float]


def run_regimes(
    queue: WindowQueue,
    kernels: Sequence[WindowKernel],
    plan: RegimePlan,
    unit: str,
    probe: GpuProbe | None = None,
    no_probe: str | None = None,
    on_start: Callable[[], None] = lambda: None,
) -> RegimeRun:
    """Warm each kernel up, size its windows, then run the phases (kernels[0] is the
    case's own: the result's samples are its windows). `on_start` is called just
    before the first window (the instruments' start)."""
    own = kernels[0].name
    first_call_s = _timed(queue, own, 1)
    warmup_s = [_timed(queue, own, 1) for _ in range(plan.warmup_calls)]
    calls = {kernel.name: _calls_per_window(queue, kernel.name, own, plan) for kernel in kernels}
    start = probe.read() if probe else None
    on_start()
    windows = _run_windows(queue, [k.name for k in kernels], calls, plan, probe)
    work = {k.name: k.work_per_call for k in kernels}
    sustained = [w for w in windows if w.start_s >= plan.sustain_s]
    headline = sustained if _enough(sustained, kernels) else windows
    record = PowerRegimes(
        unit=unit,
        timed_by=queue.timed_by,
        calls_per_window=calls,
        burst=_burst(windows, work, plan.burst_s),
        sustained=_median_figure(sustained, work, plan.sustain_s)
        if _enough(sustained, kernels)
        else None,
        cool_start=None if start is None else not start.limits,
        start=start,
        power_source=probe.power_source if probe else None,
        gpu_readings=no_probe,
    )
    return RegimeRun(
        record=record,
        samples_s=[w.seconds / w.calls for w in headline if w.kernel == own],
        calls=sum(w.calls for w in windows),
        first_call_s=first_call_s,
        warmup_s=warmup_s,
    )


def _calls_per_window(queue: WindowQueue, kernel: str, own: str, plan: RegimePlan) -> int:
    """Calls that fill a window of about plan.window_s, from one timed call (another
    kernel than the case's own makes its first call before)."""
    if kernel != own:
        _timed(queue, kernel, 1)  # its first call: allocation, autotuning
    return max(MIN_CALLS, math.ceil(plan.window_s / max(_timed(queue, kernel, 1), 1e-9)))


def _timed(queue: WindowQueue, kernel: str, calls: int) -> float:
    """One window on its own, waited for: the first call, warm-up and sizing."""
    queue.launch(kernel, calls)
    return queue.wait_oldest()


def _run_windows(
    queue: WindowQueue,
    names: list[str],
    calls: dict[str, int],
    plan: RegimePlan,
    probe: GpuProbe | None,
) -> list[Window]:
    """Windows back to back, each kernel in turn, DEPTH queued ahead, until the plan's
    last phase is long enough; the windows queued past it are waited for, not kept."""
    order = itertools.cycle(names)
    launched: deque[str] = deque()

    def launch() -> None:
        name = next(order)
        queue.launch(name, calls[name])
        launched.append(name)

    for _ in range(DEPTH):
        launch()
    windows: list[Window] = []
    elapsed = 0.0
    while True:
        seconds = queue.wait_oldest()
        name = launched.popleft()
        reading = probe.read() if probe else None
        windows.append(Window(name, calls[name], seconds, elapsed, reading))
        elapsed += seconds
        if _done(windows, elapsed, names, plan):
            break
        launch()
    while launched:  # the device's queue drains before the output check
        queue.wait_oldest()
        launched.popleft()
    return windows


def _done(windows: list[Window], elapsed: float, names: list[str], plan: RegimePlan) -> bool:
    start = plan.sustain_s if plan.run_sustained else 0.0
    last_phase = [w for w in windows if w.start_s >= start]
    timed = elapsed - start >= plan.measure_s and elapsed >= plan.burst_s
    counted = len(last_phase) >= plan.min_windows
    each = all(
        sum(w.kernel == name for w in last_phase) >= MIN_WINDOWS_PER_KERNEL for name in names
    )
    return timed and counted and each


def _enough(windows: list[Window], kernels: Sequence[WindowKernel]) -> bool:
    return all(sum(w.kernel == k.name for w in windows) >= MIN_WINDOWS_PER_KERNEL for k in kernels)


def _rate(windows: Sequence[Window], work: dict[str, float]) -> float:
    """Their work over their time, in units of 1e9 per second (GFLOP/s, GB/s)."""
    return sum(work[w.kernel] * w.calls for w in windows) / sum(w.seconds for w in windows) / 1e9


def _burst(windows: list[Window], work: dict[str, float], burst_s: float) -> RegimeFigure:
    """The windows that ended within burst_s, and each kernel's first whatever its end."""
    firsts = {next(i for i, w in enumerate(windows) if w.kernel == name) for name in work}
    chosen = [w for i, w in enumerate(windows) if w.end_s <= burst_s or i in firsts]
    by_kernel = {
        name: _rate([w for w in chosen if w.kernel == name], work)
        for name in work
        if any(w.kernel == name for w in chosen)
    }
    return _figure(chosen, by_kernel, after_s=0.0)


def _median_figure(windows: list[Window], work: dict[str, float], after_s: float) -> RegimeFigure:
    by_kernel = {
        name: statistics.median(_rate([w], work) for w in windows if w.kernel == name)
        for name in work
    }
    return _figure(windows, by_kernel, after_s)


def _figure(windows: list[Window], by_kernel: dict[str, float], after_s: float) -> RegimeFigure:
    best = max(by_kernel, key=by_kernel.__getitem__)
    readings = [w.reading for w in windows if w.reading is not None]
    clocks = [r.sm_clock_mhz for r in readings if r.sm_clock_mhz is not None]
    powers = [r.power_w for r in readings if r.power_w is not None]
    temperatures = [r.temperature_c for r in readings if r.temperature_c is not None]
    return RegimeFigure(
        rate=by_kernel[best],
        kernel=best,
        windows=len(windows),
        seconds=sum(w.seconds for w in windows),
        after_s=after_s,
        sm_clock_mhz=statistics.median(clocks) if clocks else None,
        power_w=statistics.median(powers) if powers else None,
        temperature_c=max(temperatures) if temperatures else None,
        limits=tuple(sorted({name for r in readings for name in r.limits})),
        by_kernel=by_kernel if len(by_kernel) > 1 else {},
    )
