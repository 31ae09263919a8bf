"""Resource use of the worker process around the timed region.

CPU utilisation is the process's CPU time (all threads) over wall time,
read once before and once after the timed loop: no sampling thread competes
with the benchmark for the GIL or a core. The CPU time comes from
CLOCK_PROCESS_CPUTIME_ID (time.process_time), which counts nanoseconds;
psutil's cpu_percent reads /proc tick counts (10 ms), too coarse for a
sub-second loop (it reported 230% for 2 CPUs on a 30 ms window).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class ResourceUse:
    """cpu_percent is of one core, as `top` shows it: 200 means two cores busy."""

    cpu_percent: float
    peak_rss_mb: float
    load_avg_before: float | None
    load_avg_after: float | None
    # time.time() at start and stop: where the region sits on other clocks
    # (the parent's resource timeline)
    wall_start_epoch_s: float = 0.0
    wall_end_epoch_s: float = 0.0


def load_average() -> float | None:
    """1-minute system load average, or None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    if sys.platform != "win32":
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Linux reports KiB, macOS bytes.
        return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
    return psutil.Process().memory_info().peak_wset / (1024 * 1024)


class ProcessMonitor:
    """Brackets a region: call start() just before it and stop() just after."""

    def __init__(self) -> None:
        self._load_before: float | None = None
        self._cpu_start = 0.0
        self._wall_start = 0.0
        self._epoch_start = 0.0

    def start(self) -> None:
        self._load_before = load_average()
        self._cpu_start = time.process_time()
        self._wall_start = time.perf_counter()
        self._epoch_start = time.time()

    def stop(self) -> ResourceUse:
        cpu_s = time.process_time() - self._cpu_start
        wall_s = time.perf_counter() - self._wall_start
        return ResourceUse(
            cpu_percent=100.0 * cpu_s / wall_s if wall_s > 0 else 0.0,
            peak_rss_mb=peak_rss_mb(),
            load_avg_before=self._load_before,
            load_avg_after=load_average(),
            wall_start_epoch_s=self._epoch_start,
            wall_end_epoch_s=time.time(),
        )
