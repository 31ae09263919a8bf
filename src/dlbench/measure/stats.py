"""Summary statistics of per-iteration samples (pure Python, exact for tests)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# IQR above this fraction of the median marks a result as noisy.
NOISE_THRESHOLD = 0.10


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (NumPy's default method), q in [0, 100]."""
    if not sorted_values:
        raise ValueError("percentile of no samples")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = math.ceil(position)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


@dataclass(frozen=True)
class LatencyStats:
    """Latency statistics in milliseconds."""

    median: float
    mean: float
    p90: float
    p99: float
    std: float
    iqr: float
    min: float
    max: float
    n: int

    @property
    def noisy(self) -> bool:
        return self.median > 0 and self.iqr / self.median > NOISE_THRESHOLD


def summarize(samples_s: Sequence[float]) -> LatencyStats:
    """Statistics of samples given in seconds, reported in milliseconds."""
    if not samples_s:
        raise ValueError("cannot summarise zero samples")
    ms = sorted(s * 1000.0 for s in samples_s)
    return LatencyStats(
        median=percentile(ms, 50),
        mean=statistics.fmean(ms),
        p90=percentile(ms, 90),
        p99=percentile(ms, 99),
        std=statistics.stdev(ms) if len(ms) > 1 else 0.0,
        iqr=percentile(ms, 75) - percentile(ms, 25),
        min=ms[0],
        max=ms[-1],
        n=len(ms),
    )


def throughput(batch_size: int, stats: LatencyStats) -> float:
    """Sustained samples per second: batch over the mean step time.

    The mean (not the median) is used because total samples / total time is
    what a user running the loop for long gets, stalls included.
    """
    return batch_size / (stats.mean / 1000.0) if stats.mean > 0 else math.inf
