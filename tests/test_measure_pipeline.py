"""The throughput mode's windows, tested exactly with a fake clock and a simulated
asynchronous device (a queue the host runs ahead of), and for real on torch's CPU."""

from __future__ import annotations

import pytest

from dlbench.measure.pipeline import (
    HostClockPipeline,
    WindowMeanPipeline,
    run_pipelined,
)
from dlbench.measure.timer import StopRule


class SimulatedDevice:
    """A host that takes `issue_s` to queue a step and a device that takes `device_s` to
    run it, starting when it is queued and the step before is done: an event marker
    completes when the step before it does."""

    def __init__(self, issue_s: float, device_s: float) -> None:
        self.now = 0.0
        self.issue_s, self.device_s = issue_s, device_s
        self.device_free_at = 0.0
        self.marks: list[float] = []
        self.marker = "cuda-events"

    def clock(self) -> float:
        return self.now

    def issue(self) -> None:
        self.now += self.issue_s
        self.device_free_at = max(self.now, self.device_free_at) + self.device_s

    def begin_window(self) -> None:
        self.marks = [max(self.now, self.device_free_at)]

    def mark(self) -> None:
        self.marks.append(self.device_free_at)

    def end_window(self) -> list[float]:
        self.wait()
        return [b - a for a, b in zip(self.marks, self.marks[1:], strict=False)]

    def wait(self) -> None:
        self.now = max(self.now, self.device_free_at)


def test_a_device_bound_step_is_timed_at_the_devices_pace_with_no_gap_between_steps():
    device = SimulatedDevice(issue_s=0.001, device_s=0.010)
    rule = StopRule(min_time_s=1.0, min_iters=5, warmup_iters=2)
    timing = run_pipelined(device, rule, window_s=0.25, clock=device.clock)
    # each window's first step waits for the host to issue it; the rest follow on
    firsts = {sum(w.steps for w in timing.windows[:i]) for i in range(len(timing.windows))}
    assert [timing.intervals_s[i] for i in sorted(firsts)] == pytest.approx(
        [0.011] * len(timing.windows)
    )
    rest = [t for i, t in enumerate(timing.intervals_s) if i not in firsts]
    assert rest == pytest.approx([0.010] * len(rest))
    # a window holds about window_s of the device's work (judged by the warm-up)
    assert all(w.wall_s <= 0.25 + 0.011 for w in timing.windows)
    # steps over the windows' wall time: the device's rate, not 1 / (issue + device)
    assert timing.steps_per_s() == pytest.approx(100.0, rel=0.01)
    assert timing.windows_wall_s >= 1.0 and len(timing.windows) >= 4
    assert timing.min_cover() == pytest.approx(1.0, abs=0.01)
    assert timing.host_issue_s() == pytest.approx(0.001)
    # warm-up waits for each step: issue + device
    assert timing.warmup_s == pytest.approx([0.011, 0.011])


def test_a_host_bound_step_is_timed_at_the_hosts_pace():
    device = SimulatedDevice(issue_s=0.004, device_s=0.001)
    timing = run_pipelined(device, StopRule(1.0, 5, 1), window_s=0.5, clock=device.clock)
    assert timing.steps_per_s() == pytest.approx(250.0, rel=0.01)
    assert sorted(timing.intervals_s)[len(timing.intervals_s) // 2] == pytest.approx(0.004)
    assert timing.host_issue_s() == pytest.approx(0.004)


def test_the_stop_rule_counts_steps_and_window_time_and_max_iters_caps_a_window():
    device = SimulatedDevice(issue_s=0.0, device_s=0.001)
    rule = StopRule(min_time_s=5.0, min_iters=1, warmup_iters=0, max_iters=7)
    timing = run_pipelined(device, rule, window_s=10.0, clock=device.clock)
    assert timing.steps == 7 and len(timing.intervals_s) == 7 and len(timing.windows) == 1


def test_the_loop_start_hook_runs_after_warmup_before_the_first_window():
    device = SimulatedDevice(issue_s=0.001, device_s=0.001)
    seen: list[float] = []
    timing = run_pipelined(
        device,
        StopRule(0.0, 1, 3),
        clock=device.clock,
        on_loop_start=lambda: seen.append(device.now),
    )
    # the first call and three warm-ups, each issued and waited for: 4 x 2 ms
    assert seen == [pytest.approx(0.008)] and len(timing.warmup_s) == 3


def test_a_synchronous_step_on_the_host_clock_gives_its_own_time_per_step():
    ticks = iter(range(10_000))

    def clock() -> float:
        return float(next(ticks))

    pipeline = HostClockPipeline(lambda: None, clock)
    timing = run_pipelined(pipeline, StopRule(5.0, 3, 0), window_s=2.0, clock=clock)
    assert all(interval > 0 for interval in timing.intervals_s)
    assert timing.steps == len(timing.intervals_s)


def test_a_window_mean_pipeline_blocks_once_and_gives_each_step_the_mean():
    blocked: list[object] = []
    now = [0.0]

    def issue() -> object:
        now[0] += 0.5
        return now[0]

    pipeline = WindowMeanPipeline(issue, blocked.append, clock=lambda: now[0])
    timing = run_pipelined(pipeline, StopRule(1.0, 2, 0), window_s=1.0, clock=lambda: now[0])
    assert set(timing.intervals_s) == {0.5}
    # the first call's wait, then one per window, none per step
    assert len(blocked) == 1 + len(timing.windows)


@pytest.mark.integration
def test_torch_cpu_training_runs_in_the_throughput_mode_and_records_it(tmp_path):
    from dlbench.launch.runner import run_case
    from dlbench.spec.case import Case, Settings

    case = Case("mlp", "torch", "eager", mode="train", device="cpu", batch_size=8, threads=1)
    result = run_case(case, Settings(min_time_s=0.3, min_iters=5, warmup_iters=2))
    assert result.ok, result.error
    details = result.details
    assert details.timing_mode == "throughput"
    record = details.pipelined
    assert record is not None and record.marker == "host-clock"
    assert record.steps == len(result.samples_ms) >= 5
    # the headline is steps x batch over the windows' wall time
    assert result.throughput == pytest.approx(record.steps * 8 / record.wall_s, rel=1e-6)
    assert record.min_cover is not None and 0.9 < record.min_cover <= 1.0
    # a CPU is synchronous: nothing to diagnose on a device
    assert record.hidden_syncs is None and record.synced_samples_per_s is None


@pytest.mark.integration
def test_single_stream_inference_stays_in_the_latency_mode(tmp_path):
    from dlbench.launch.runner import run_case
    from dlbench.spec.case import Case, Settings

    case = Case("mlp", "torch", "eager", device="cpu", batch_size=1, threads=1)
    result = run_case(case, Settings(min_time_s=0.1, min_iters=5, warmup_iters=1))
    assert result.ok and result.details.timing_mode == "latency"
    assert result.details.pipelined is None


def test_a_short_min_time_makes_short_windows_and_zero_makes_one_step_windows():
    device = SimulatedDevice(issue_s=0.0001, device_s=0.001)
    timing = run_pipelined(device, StopRule(0.05, 5, 1), window_s=0.5, clock=device.clock)
    assert timing.windows_wall_s < 0.1  # not stretched to half a second
    device = SimulatedDevice(issue_s=0.0, device_s=0.001)
    timing = run_pipelined(device, StopRule(0.0, 4, 0), window_s=0.5, clock=device.clock)
    assert [w.steps for w in timing.windows] == [1, 1, 1, 1]
