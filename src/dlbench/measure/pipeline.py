"""The throughput timing mode: steps pipelined in windows, one wait per window.

The latency mode (measure.timer) waits for each step's device work before it
reads the clock, which is right for a request's latency and wrong for training
or offline throughput: the host cannot queue step N+1 while the device runs
step N, so wherever launching a step takes a good part of its device time the
device idles at every step boundary. A training job never waits like that.

Here the host issues steps back to back inside a window of about `window_s`,
a completion marker after each (a CUDA event where the backend has one), and
waits for the device once, at the window's end, for the stop rule. The headline
is steps x batch over the windows' wall time; each step's figure is the time
between consecutive markers, its inter-completion time. The markers of a
window start at one taken as it begins, so a window's intervals add up to its
wall time less the wait's own return (recorded: `cover`).

The pipeline is the backend's (a `StepPipeline`); this loop is framework-free,
and tested with a fake clock and a synchronous pipeline.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from dlbench.measure.timer import MAX_ITERS, Clock, StopRule

# About two stop-rule checks a second: a wait per window costs one drain of the
# device's queue (a step's launch latency), under 0.1% of a 0.5 s window.
WINDOW_S = 0.5


class StepPipeline(Protocol):
    """One step split so that the host can run ahead of the device.

    `marker` names how completions are timed: "cuda-events" (an event recorded
    after each step, read after the wait), "host-clock" (a synchronous device:
    the clock when the step returned), "window-mean" (a framework that can only
    wait for all its queued work: each step of a window is given the window's
    mean, so its distribution is of windows, not steps).
    """

    marker: str

    def issue(self) -> object:
        """Queue one step's work and return without waiting for it."""

    def begin_window(self) -> None:
        """The marker a window's first interval starts from."""

    def mark(self) -> None:
        """A completion marker after the steps issued so far."""

    def end_window(self) -> list[float]:
        """Wait for every issued step; the seconds between consecutive markers since
        begin_window (one per step marked)."""

    def wait(self) -> None:
        """Wait for every issued step (the warm-up's per-step wait)."""


class DevicePipeline(StepPipeline, Protocol):
    """An asynchronous device's pipeline, and what it can tell of one step once the
    measurement is over (each runs a step of its own, never inside a window)."""

    def count_hidden_syncs(self) -> int | None:
        """Synchronisations one step makes on its own (a `.item()`, a host copy), each
        of which stalls the host's run-ahead; None where they cannot be counted."""

    def kernel_time_s(self) -> tuple[float | None, str | None]:
        """(the device's busy time in one step's kernels, None), or (None, why not)."""


@dataclass(frozen=True)
class Window:
    """One window: its wall time (first issue to the wait's return), its steps, the
    host's time inside issue() over them, and what its intervals add up to."""

    wall_s: float
    steps: int
    issue_s: float
    intervals_s: float

    @property
    def cover(self) -> float:
        """The intervals' sum over the wall time: 1.0 when the markers saw all of it."""
        return self.intervals_s / self.wall_s if self.wall_s > 0 else 1.0


@dataclass(frozen=True)
class PipelinedTiming:
    """Raw times in seconds: the first call and warm-up (each step waited for, its
    issue time apart), then the windows' inter-completion intervals."""

    first_call_s: float
    warmup_s: list[float] = field(default_factory=list)
    warmup_issue_s: list[float] = field(default_factory=list)
    intervals_s: list[float] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    loop_wall_s: float = 0.0

    @property
    def steps(self) -> int:
        return sum(window.steps for window in self.windows)

    @property
    def windows_wall_s(self) -> float:
        return sum(window.wall_s for window in self.windows)

    def steps_per_s(self) -> float:
        """Steps over the windows' wall time: what a loop that never waits achieves."""
        wall = self.windows_wall_s
        return self.steps / wall if wall > 0 else 0.0

    def host_issue_s(self) -> float | None:
        """Median host time to issue one step onto an empty queue (the warm-up's
        steps start after a wait), or None without warm-up."""
        return statistics.median(self.warmup_issue_s) if self.warmup_issue_s else None

    def min_cover(self) -> float:
        return min((window.cover for window in self.windows), default=1.0)


def run_pipelined(
    pipeline: StepPipeline,
    rule: StopRule,
    window_s: float = WINDOW_S,
    clock: Clock = time.perf_counter,
    on_loop_start: Callable[[], None] | None = None,
) -> PipelinedTiming:
    """Time `pipeline`'s steps: the first call apart, warm-up with a wait after each
    step, then windows of back-to-back steps until the stop rule holds (its
    min_time counts the windows' wall time, its iterations the steps)."""
    first_call_s = _waited(pipeline, clock)[0]
    warmup_s: list[float] = []
    warmup_issue_s: list[float] = []
    for _ in range(rule.warmup_iters):
        total, issued = _waited(pipeline, clock)
        warmup_s.append(total)
        warmup_issue_s.append(issued)
    # no window longer than the whole measurement asked for: a short --min-time (a
    # test's, a smoke run's) is not stretched to window_s; 0 makes one-step windows
    window_s = min(window_s, rule.min_time_s)
    per_window = _steps_per_window(warmup_s, window_s)
    windows: list[Window] = []
    intervals_s: list[float] = []
    windows_wall_s = 0.0  # PipelinedTiming.windows_wall_s, summed as the windows come
    if on_loop_start is not None:
        on_loop_start()
    loop_start = clock()
    while not rule.done(len(intervals_s), windows_wall_s):
        budget = min(rule.max_iters - len(intervals_s), per_window)
        window, intervals = _window(pipeline, window_s, budget, clock)
        windows.append(window)
        intervals_s.extend(intervals)
        windows_wall_s += window.wall_s
    loop_wall_s = clock() - loop_start
    return PipelinedTiming(
        first_call_s, warmup_s, warmup_issue_s, intervals_s, windows, loop_wall_s
    )


def _steps_per_window(warmup_s: list[float], window_s: float) -> int:
    """At most the steps the device runs in window_s, judged by a waited-for warm-up
    step: the host issues far faster than the device runs (a CUDA stream queues about
    a thousand launches), so a window ended on the host's clock alone would queue
    seconds of work."""
    if not warmup_s:
        return MAX_ITERS if window_s > 0 else 1
    return max(1, int(window_s / max(statistics.median(warmup_s), 1e-9)))


def _waited(pipeline: StepPipeline, clock: Clock) -> tuple[float, float]:
    """One step waited for: (its whole time, the host's time to issue it)."""
    start = clock()
    pipeline.issue()
    issued = clock()
    pipeline.wait()
    return clock() - start, issued - start


def _window(
    pipeline: StepPipeline, window_s: float, budget: int, clock: Clock
) -> tuple[Window, list[float]]:
    """Steps issued back to back until window_s of host time or `budget` steps, then
    one wait. The loop body is two clock reads, the step, its marker."""
    start = clock()
    pipeline.begin_window()
    steps, issue_s = 0, 0.0
    while True:
        before = clock()
        pipeline.issue()
        pipeline.mark()
        after = clock()
        issue_s += after - before
        steps += 1
        if steps >= budget or after - start >= window_s:
            break
    intervals = pipeline.end_window()
    wall = clock() - start
    return Window(wall, steps, issue_s, sum(intervals)), intervals


class HostClockPipeline:
    """A synchronous step (it returns when its work is done: a CPU, or a backend that
    waits inside its step) as a pipeline: markers are the host clock after each."""

    marker = "host-clock"

    def __init__(self, step: Callable[[], object], clock: Clock = time.perf_counter) -> None:
        self._step = step
        self._clock = clock
        self._marks: list[float] = []

    def issue(self) -> object:
        return self._step()

    def begin_window(self) -> None:
        self._marks = [self._clock()]

    def mark(self) -> None:
        self._marks.append(self._clock())

    def end_window(self) -> list[float]:
        marks = self._marks
        return [later - earlier for earlier, later in itertools.pairwise(marks)]

    def wait(self) -> None:
        return None


Output = TypeVar("Output")


class WindowMeanPipeline(Generic[Output]):
    """A framework that queues work asynchronously but can only wait for all of it
    (JAX's block_until_ready, TensorFlow's host copy): `issue` queues a step and
    returns what `block` waits for; each step of a window gets the window's mean."""

    marker = "window-mean"

    def __init__(
        self,
        issue: Callable[[], Output],
        block: Callable[[Output], object],
        clock: Clock = time.perf_counter,
    ) -> None:
        self._issue = issue
        self._block = block
        self._clock = clock
        self._last: Output | None = None  # the newest step's output; None before the first
        self._steps = 0
        self._start = 0.0

    def issue(self) -> Output:
        self._last = self._issue()
        return self._last

    def begin_window(self) -> None:
        self._steps, self._start = 0, self._clock()

    def mark(self) -> None:
        self._steps += 1

    def end_window(self) -> list[float]:
        self.wait()
        if not self._steps:
            return []
        mean = (self._clock() - self._start) / self._steps
        return [mean] * self._steps

    def wait(self) -> None:
        if self._last is not None:  # nothing issued yet: nothing to wait for
            self._block(self._last)

    def count_hidden_syncs(self) -> int | None:
        return None  # no framework-neutral way to count a JAX or TensorFlow step's waits

    def kernel_time_s(self) -> tuple[float | None, str | None]:
        return None, "no kernel time: read from torch's profiler only"
