"""A resource timeline of one worker process, sampled from the parent.

The parent samples between its sleeping waits on the worker, so no sampling
thread runs inside the benchmark process to compete with it. Each sample
costs a handful of /proc reads (and a few NVML calls where a GPU is watched).
CPU use is computed from cumulative CPU-time deltas, never from psutil's
module-wide `cpu_percent` state, which any other caller in the parent would
disturb.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import psutil

from dlbench.measure.gpu_telemetry import GpuTelemetry, GpuTelemetryReading, throttle_verdict
from dlbench.measure.monitor import load_average
from dlbench.untyped import JSONValue

DEFAULT_INTERVAL_S = 0.5
# 4000 points cover 33 minutes at 0.5 s before the first halving: a typical
# case keeps every sample, and a week-long one still stores a bounded list.
MAX_POINTS = 4000
MIB = 1024 * 1024


@dataclass(frozen=True)
class TimelinePoint:
    """One sample of a case's timeline (a result's details.timeline.points): the interval
    since the sample before it (the first: since the sampler's origin), ending at `t`.

    A reading the sampler could not take is None, and left out of the JSON: an exited
    worker's memory, the load average or I/O wait where the OS has none, the GPUs where
    none is watched."""

    t: float  # seconds since the sampler's origin (details.timeline.origin_epoch_s)
    # the worker and its descendants: % of one core (above 100 on several)
    cpu_percent: float
    cpu_cores: tuple[float, ...]  # each logical CPU's busy %
    rss_mb: float | None = None  # the worker and its descendants
    system_cpu_percent: float | None = None  # the mean of cpu_cores
    iowait_percent: float | None = None  # of all CPUs' time, counted idle in cpu_cores
    load1: float | None = None  # the 1-minute load average
    gpu: tuple[GpuTelemetryReading, ...] | None = None  # each watched GPU's reading
    # keys a point stored otherwise holds (a run another tool wrote or edited), kept as
    # they came after the named ones, read-only: spec.record_dict's REST_FIELD, spelt
    # out here because measure sits below spec
    other: Mapping[str, JSONValue] = field(
        default_factory=lambda: MappingProxyType({}), metadata={"rest": True}
    )


@dataclass(frozen=True)
class TimelineSummary:
    """Means and maxima of a timeline's points over the measured region (a result's
    details.timeline.summary); a reading with no data is None, and left out of JSON."""

    samples: int | None = None
    window: str | None = None  # "measured", or "whole case" where no point fell inside it
    load_avg_mean: float | None = None
    cpu_percent_mean: float | None = None
    system_cpu_percent_mean: float | None = None
    rss_mb_max: float | None = None
    gpu_util_mean: float | None = None
    gpu_mem_used_mb_max: float | None = None
    gpu_process_mem_mb_max: float | None = None
    sm_clock_mhz_mean: float | None = None
    temperature_c_max: float | None = None
    power_w_mean: float | None = None
    throttle: str | None = None  # the GPU's throttle verdict (gpu_telemetry)


class TimelineSampler:
    """Samples the CPU, memory and (optionally) GPU use of a process and its children.

    Call `sample()` about every `interval` seconds while the process runs; it
    never raises, and a process that has gone ends the sampling quietly.
    """

    def __init__(
        self,
        pid: int,
        interval: float = DEFAULT_INTERVAL_S,
        gpu: GpuTelemetry | None = None,
        max_points: int = MAX_POINTS,
    ) -> None:
        self.origin_epoch_s = time.time()
        self._origin = time.perf_counter()
        self._interval = interval
        self._gpu = gpu
        self._max_points = max(2, max_points)
        self._points: list[TimelinePoint] = []
        self._process: psutil.Process | None = None
        self._last_wall = self._origin
        self._last_cpu_s = 0.0
        self._last_cores = _core_times()
        self._last_iowait = _iowait_times()
        # The CPUs the worker may run on: only others' use of these contends with it
        # (results.flags). Read once: the worker inherits the parent's at its start.
        self.cpu_set: tuple[int, ...] | None = None
        try:
            self._process = psutil.Process(pid)
            self._last_cpu_s, _, _ = self._tree_usage(self._process)
            self.cpu_set = _affinity(self._process)
        except psutil.Error:
            self._process = None

    @property
    def interval(self) -> float:
        """Seconds to wait before the next sample; doubles each time the points are halved."""
        return self._interval

    @property
    def active(self) -> bool:
        """False once the process was found gone: further samples do nothing."""
        return self._process is not None

    @property
    def points(self) -> tuple[TimelinePoint, ...]:
        """The points so far (a copy: a result keeps them as they are now)."""
        return tuple(self._points)

    def sample(self) -> None:
        """Append one point, or end the sampling if the process has exited.

        A process that exited but is not yet reaped (a zombie) still has its
        CPU times: the point it gives covers the interval up to its exit, so a
        measured region shorter than the interval, which no regular point
        covers, is still judged (results.flags). Sampling ends after it.
        """
        if self._process is None:
            return
        cpu_s: float | None  # None: an exited process whose CPU times are gone too
        try:
            cpu_s, rss, pids = self._tree_usage(self._process)
        except psutil.ZombieProcess:
            cpu_s, rss, pids = self._exited_usage(self._process)
            self._process = None
            if cpu_s is None:
                return
        except psutil.Error:
            self._process = None  # exited (or became unreadable) between our checks
            return
        now = time.perf_counter()
        cores = _core_times()
        wall = now - self._last_wall
        cpu_cores = _core_percents(self._last_cores, cores)
        system = _mean(cpu_cores)
        # Time the CPUs sat waiting for I/O counts as idle above; the interference
        # flag adds it back (steal, time the hypervisor took, is already busy).
        iowait = _iowait_times()
        share: float | None = None
        if iowait is not None and self._last_iowait is not None and wall > 0 and cores:
            share = (iowait - self._last_iowait) / (wall * len(cores)) * 100
        self._last_iowait = iowait
        load = load_average()
        gpu: tuple[GpuTelemetryReading, ...] | None = None
        if self._gpu is not None:
            # GpuTelemetry guards each field; this only guards the guard.
            with contextlib.suppress(Exception):
                gpu = self._gpu.read(pids)
        point = TimelinePoint(
            t=round(now - self._origin, 3),
            # A child that exited unwaited takes its CPU time with it: never below zero.
            cpu_percent=round(max(0.0, cpu_s - self._last_cpu_s) / wall * 100, 1)
            if wall > 0
            else 0.0,
            cpu_cores=cpu_cores,
            # an exited process has no memory left to read
            rss_mb=round(rss / MIB, 1) if rss is not None else None,
            system_cpu_percent=round(system, 1) if system is not None else None,
            iowait_percent=round(min(100.0, max(0.0, share)), 1) if share is not None else None,
            load1=round(load, 2) if load is not None else None,
            gpu=gpu,
        )
        self._last_wall, self._last_cpu_s, self._last_cores = now, cpu_s, cores
        self._points.append(point)
        if len(self._points) > self._max_points:
            # Halve the resolution rather than grow without bound or drop the start.
            self._points = self._points[::2]
            self._interval *= 2

    def forget_gpu(self) -> None:
        """Drop the GPU readings, for a case that turned out to run on the CPU."""
        self._points = [replace(point, gpu=None) for point in self._points]

    def summary(self, window: tuple[float, float] | None = None) -> TimelineSummary:
        """Means and maxima over the points inside `window` (epoch seconds), else all
        points; its `window` says which were used."""
        chosen = self._points
        scope = "whole case"
        if window is not None:
            start, end = window[0] - self.origin_epoch_s, window[1] - self.origin_epoch_s
            inside = [p for p in self._points if start <= p.t <= end]
            if inside:
                chosen, scope = inside, "measured"
        gpus = [d for p in chosen for d in p.gpu or ()]
        return TimelineSummary(
            samples=len(chosen),
            window=scope,
            load_avg_mean=_mean(p.load1 for p in chosen),
            cpu_percent_mean=_mean(p.cpu_percent for p in chosen),
            system_cpu_percent_mean=_mean(p.system_cpu_percent for p in chosen),
            rss_mb_max=_max(p.rss_mb for p in chosen),
            gpu_util_mean=_mean(d.gpu_util_percent for d in gpus),
            gpu_mem_used_mb_max=_max(d.gpu_mem_used_mb for d in gpus),
            gpu_process_mem_mb_max=_max(d.gpu_process_mem_mb for d in gpus),
            sm_clock_mhz_mean=_mean(d.sm_clock_mhz for d in gpus),
            temperature_c_max=_max(d.temperature_c for d in gpus),
            power_w_mean=_mean(d.power_w for d in gpus),
            throttle=throttle_verdict(p.gpu or () for p in chosen),
        )

    @staticmethod
    def _exited_usage(process: psutil.Process) -> tuple[float | None, None, set[int]]:
        """(CPU seconds, no RSS, pids) of a process that exited and awaits its reaping."""
        try:
            times = process.cpu_times()
        except psutil.Error:
            return None, None, set()
        cpu_s = times.user + times.system + times.children_user + times.children_system
        return cpu_s, None, {process.pid}

    @staticmethod
    def _tree_usage(process: psutil.Process) -> tuple[float, int | None, set[int]]:
        """(CPU seconds, RSS bytes, pids) of the process and its live descendants.

        A raise means the process itself is gone; a child that vanishes is skipped.
        The children_* times hold the children the process has already waited
        for, so the CPU total does not drop when a helper process ends. RSS
        counts pages shared between the processes once per process, as `top` does.
        """
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                # Exited, not yet waited for: its memory already reads as zero.
                raise psutil.ZombieProcess(process.pid)
            times = process.cpu_times()
            rss = process.memory_info().rss
        cpu_s = times.user + times.system + times.children_user + times.children_system
        pids = {process.pid}
        for child in process.children(recursive=True):
            try:
                with child.oneshot():
                    child_times = child.cpu_times()
                    child_rss = child.memory_info().rss
            except psutil.Error:
                continue
            cpu_s += child_times.user + child_times.system
            cpu_s += child_times.children_user + child_times.children_system
            rss += child_rss
            pids.add(child.pid)
        return cpu_s, rss, pids


def _affinity(process: psutil.Process) -> tuple[int, ...] | None:
    """The process's CPU affinity, None where the OS has none to read (macOS)."""
    read = getattr(process, "cpu_affinity", None)
    if read is None:
        return None
    try:
        return tuple(sorted(read()))
    except (psutil.Error, OSError, ValueError):
        return None


def _core_times() -> list[tuple[float, float]]:
    """(busy, total) cumulative seconds per logical CPU, as psutil.cpu_percent counts them."""
    try:
        per_core = psutil.cpu_times(percpu=True)
    except (psutil.Error, OSError):
        return []
    result = []
    for times in per_core:
        # Linux counts guest time inside user and nice as well: do not count it twice.
        total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
        idle = times.idle + getattr(times, "iowait", 0.0)
        result.append((total - idle, total))
    return result


def _iowait_times() -> float | None:
    """Cumulative seconds all CPUs spent waiting for I/O (None where the OS has no such count)."""
    try:
        return getattr(psutil.cpu_times(), "iowait", None)
    except (psutil.Error, OSError):
        return None


def _core_percents(
    before: Sequence[tuple[float, float]], after: Sequence[tuple[float, float]]
) -> tuple[float, ...]:
    """Busy % of each core between two readings (0 for a core with no elapsed ticks)."""
    if len(before) != len(after):  # a CPU went on- or offline: no common baseline
        return (0.0,) * len(after)
    percents = []
    for (busy0, total0), (busy1, total1) in zip(before, after, strict=True):
        elapsed = total1 - total0
        share = (busy1 - busy0) / elapsed * 100 if elapsed > 0 else 0.0
        percents.append(round(min(100.0, max(0.0, share)), 1))
    return tuple(percents)


def _numbers(values: Iterable[object]) -> list[float]:
    return [
        float(v)
        for v in values
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]


def _mean(values: Iterable[object]) -> float | None:
    numbers = _numbers(values)
    return round(sum(numbers) / len(numbers), 2) if numbers else None


def _max(values: Iterable[object]) -> float | None:
    numbers = _numbers(values)
    return max(numbers) if numbers else None
