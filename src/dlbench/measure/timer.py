"""The timing loop: first call, warm-up, then iterate until the stop rule holds.

The clock is injected so the loop is tested exactly with a fake clock. The
step passed in must return only when its work is complete (the backend
synchronises device work inside it), so `clock()` after it is honest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]
# Samples kept at most: a step faster than a few µs stops here, not at min_time.
MAX_ITERS = 100_000
Step = Callable[[], object]


@dataclass(frozen=True)
class StopRule:
    """Measure until BOTH min_time_s of measured time AND min_iters samples.

    Requiring both keeps fast steps from stopping on too few samples and slow
    steps from stopping before the time budget has averaged out noise.
    `max_iters` caps very fast steps (e.g. the null backend) so a run ends.
    """

    min_time_s: float = 1.0
    min_iters: int = 10
    warmup_iters: int = 3
    max_iters: int = MAX_ITERS

    def done(self, samples: int, measured_s: float) -> bool:
        if samples >= self.max_iters:
            return True
        return samples >= self.min_iters and measured_s >= self.min_time_s


@dataclass(frozen=True)
class Timing:
    """Raw times in seconds; statistics are computed from these, never stored instead."""

    first_call_s: float
    warmup_s: list[float] = field(default_factory=list)
    samples_s: list[float] = field(default_factory=list)
    loop_wall_s: float = 0.0


def time_once(step: Step, clock: Clock) -> float:
    start = clock()
    step()
    return clock() - start


def run_timed(
    step: Step,
    rule: StopRule,
    clock: Clock = time.perf_counter,
    on_loop_start: Callable[[], None] | None = None,
    settle: Callable[[list[float]], StopRule] | None = None,
) -> Timing:
    """Time `step`: the first call apart (compilation, lazy init), warm-up, samples.

    `on_loop_start` runs after warm-up, just before the measured loop, so a
    resource monitor brackets the steady state only. `settle`, given the
    warm-up times, may replace the stop rule of the measured loop: the ranks
    of a DistributedDataParallel case agree there on one step count.
    """
    first_call_s = time_once(step, clock)
    warmup_s = [time_once(step, clock) for _ in range(rule.warmup_iters)]
    if settle is not None:
        rule = settle(warmup_s)
    if on_loop_start is not None:
        on_loop_start()
    samples: list[float] = []
    measured = 0.0
    loop_start = clock()
    # The loop body is kept minimal: two clock reads, the step, an append.
    while not rule.done(len(samples), measured):
        start = clock()
        step()
        elapsed = clock() - start
        samples.append(elapsed)
        measured += elapsed
    loop_wall_s = clock() - loop_start
    return Timing(first_call_s, warmup_s, samples, loop_wall_s)
