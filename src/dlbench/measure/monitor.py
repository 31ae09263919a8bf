"""Resource use of the worker process around the timed region.

CPU utilisation comes from the process's own CPU times (psutil), read once
before and once after the timed loop: no sampling thread competes with the
benchmark for the GIL or a core. psutil's first cpu_percent() call only sets
its baseline and is discarded.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class ResourceUse:
    """cpu_percent is of one core, as `top` shows it: 200 means two cores busy."""

    cpu_percent: float
    peak_rss_mb: float
    load_avg_before: float | None
    load_avg_after: float | None


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
        self._process = psutil.Process()
        self._load_before: float | None = None

    def start(self) -> None:
        self._load_before = load_average()
        self._process.cpu_percent(interval=None)  # baseline; the value is meaningless

    def stop(self) -> ResourceUse:
        cpu = self._process.cpu_percent(interval=None)
        return ResourceUse(
            cpu_percent=cpu,
            peak_rss_mb=peak_rss_mb(),
            load_avg_before=self._load_before,
            load_avg_after=load_average(),
        )
