"""The timing loop, tested exactly with a fake clock."""

from __future__ import annotations

import pytest

from dlbench.measure.timer import StopRule, run_timed


class FakeClock:
    """Time advances only when the fake step runs, by scripted durations."""

    def __init__(self, durations: list[float], default: float) -> None:
        self.now = 100.0
        self.durations = list(durations)
        self.default = default
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def step(self) -> None:
        self.calls += 1
        self.now += self.durations.pop(0) if self.durations else self.default


def test_first_call_and_warmup_are_kept_apart_from_samples():
    clock = FakeClock([5.0, 1.0, 1.0, 1.0], default=2.0)
    timing = run_timed(clock.step, StopRule(min_time_s=10.0, min_iters=3, warmup_iters=3), clock)
    assert timing.first_call_s == 5.0
    assert timing.warmup_s == [1.0, 1.0, 1.0]
    assert timing.samples_s == [2.0] * 5  # 5 x 2 s reaches min_time 10 s
    assert timing.loop_wall_s == 10.0
    assert clock.calls == 1 + 3 + 5


def test_min_iters_holds_even_when_min_time_is_reached_early():
    clock = FakeClock([], default=10.0)
    timing = run_timed(clock.step, StopRule(min_time_s=1.0, min_iters=4, warmup_iters=0), clock)
    assert timing.samples_s == [10.0] * 4
    assert timing.warmup_s == []


def test_min_time_holds_even_when_min_iters_is_reached_early():
    clock = FakeClock([], default=0.25)
    timing = run_timed(clock.step, StopRule(min_time_s=3.0, min_iters=2, warmup_iters=1), clock)
    assert len(timing.samples_s) == 12


def test_max_iters_caps_a_step_that_takes_no_time():
    clock = FakeClock([], default=0.0)
    rule = StopRule(min_time_s=1.0, min_iters=1, warmup_iters=0, max_iters=50)
    timing = run_timed(clock.step, rule, clock)
    assert len(timing.samples_s) == 50


def test_loop_start_hook_runs_once_after_warmup_before_samples():
    clock = FakeClock([], default=1.0)
    seen: list[int] = []
    rule = StopRule(min_time_s=0.0, min_iters=2, warmup_iters=2)
    run_timed(clock.step, rule, clock, on_loop_start=lambda: seen.append(clock.calls))
    assert seen == [3]  # first call + 2 warm-ups done, no sample yet


def test_step_errors_propagate():
    def broken() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_timed(broken, StopRule(), FakeClock([], 1.0))


def test_settle_replaces_the_stop_rule_after_warmup_as_ddp_ranks_agree():
    clock = FakeClock([5.0, 1.0, 3.0], default=2.0)
    seen: list[list[float]] = []

    def settle(warmup_s: list[float]) -> StopRule:
        seen.append(list(warmup_s))
        return StopRule(min_time_s=0.0, min_iters=7, warmup_iters=0)

    rule = StopRule(min_time_s=100.0, min_iters=1, warmup_iters=2)
    timing = run_timed(clock.step, rule, clock, settle=settle)
    assert seen == [[1.0, 3.0]]  # the warm-up times, once
    assert timing.samples_s == [2.0] * 7  # the agreed count, not 100 s of steps
