"""The step loop's two timing modes, and the throughput mode's measurement.

- latency (single-stream, LoadGen's queries): each step waited for before the
  clock is read (measure.timer), as a request's latency is;
- throughput (training, offline inference): steps pipelined in windows with
  one wait each (measure.pipeline), as a training job or a batch job runs.

On a synchronous device (a CPU) the two time the same thing; on a GPU the
throughput mode lets the host queue the next step while the device runs this
one. After the windows, an asynchronous device's pipeline is asked what limits
a step (worker.pipelined.diagnose): the host's time to issue it against its
interval, the share of the interval spent in kernels, and the synchronisations
it makes on its own; and the same steps each waited for give the per-step
synchronise's cost (`synced_samples_per_s`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from dlbench.backends.base import Job, Prepared
from dlbench.measure.instruments import Instruments, Reading
from dlbench.measure.pipeline import (
    WINDOW_S,
    DevicePipeline,
    HostClockPipeline,
    PipelinedTiming,
    StepPipeline,
    run_pipelined,
)
from dlbench.measure.timer import Clock, StopRule
from dlbench.results.details import Pipelined
from dlbench.spec.case import Settings
from dlbench.worker.result import Measurement

LATENCY, THROUGHPUT = "latency", "throughput"
# The synchronised steps after the windows: at least this many, for about this long.
SYNCED_STEPS, SYNCED_SECONDS = 3, 1.0


def timing_mode(job: Job, batch: int) -> str:
    """Throughput for training and offline inference, latency for single-stream and
    every LoadGen scenario (LoadGen times each query itself)."""
    case = job.case
    if case.driven_by_loadgen:
        return LATENCY
    if case.mode == "train" or case.effective_scenario(batch) == "offline":
        return THROUGHPUT
    return LATENCY


@dataclass(frozen=True)
class PipelinedMeasurement:
    timing: PipelinedTiming
    reading: Reading
    record: Pipelined


def measure_pipelined(prepared: Prepared, settings: Settings, batch: int) -> PipelinedMeasurement:
    """The windows inside the backend's context, the instruments bracketing them; then,
    on an asynchronous device, what limits a step (outside the measured region)."""
    pipeline: StepPipeline = prepared.pipeline or HostClockPipeline(prepared.step)
    rule = StopRule(settings.min_time_s, settings.min_iters, settings.warmup_iters)
    instruments = Instruments(prepared.device)

    def loop_start() -> None:
        if prepared.before_measure is not None:
            prepared.before_measure()
        instruments.start()

    with prepared.context():
        timing = run_pipelined(pipeline, rule, on_loop_start=loop_start)
        reading = instruments.stop()
        record = _record(timing, pipeline.marker)
        if prepared.pipeline is not None:
            record = diagnose(prepared.pipeline, record, batch)
    return PipelinedMeasurement(timing, reading, record)


def pipelined_measurement(
    job: Job, prepared: Prepared, measured: PipelinedMeasurement
) -> Measurement:
    """What the windows measured: samples are the inter-completion intervals, the rate
    is steps x batch over the windows' wall time (not batch over a mean interval)."""
    timing = measured.timing
    batch = prepared.batch_size or job.batch_size
    return Measurement(
        measured.reading,
        tuple(timing.intervals_s),
        device=prepared.device,
        batch=batch,
        samples_done=timing.steps * batch,
        details=prepared.details,
        rate=timing.steps_per_s() * batch,
        first_call_ms=timing.first_call_s * 1000.0,
        warmup_s=tuple(timing.warmup_s),
    )


def _record(timing: PipelinedTiming, marker: str) -> Pipelined:
    intervals = sorted(timing.intervals_s)
    issue = timing.host_issue_s()
    steps = timing.steps
    return Pipelined(
        marker=marker,
        window_s=WINDOW_S,
        windows=len(timing.windows),
        steps=steps,
        wall_s=timing.windows_wall_s,
        min_cover=timing.min_cover(),
        interval_ms=intervals[len(intervals) // 2] * 1000.0 if intervals else None,
        host_issue_ms=issue * 1000.0 if issue is not None else None,
        window_issue_ms=sum(w.issue_s for w in timing.windows) / steps * 1000.0 if steps else None,
    )


def diagnose(pipeline: DevicePipeline, record: Pipelined, batch: int) -> Pipelined:
    """An asynchronous device's step, asked after the windows: its hidden
    synchronisations, its kernel time over the interval, and the rate when each step
    is waited for. Each runs steps of its own, so none touches the measurement."""
    hidden_syncs = pipeline.count_hidden_syncs()
    synced = synced_steps_per_s(pipeline) * batch
    # last: a profiler once started may leave its hooks behind in the process
    busy_s, why = pipeline.kernel_time_s()
    interval = record.interval_ms
    return replace(
        record,
        device_busy=busy_s * 1000.0 / interval if busy_s is not None and interval else None,
        hidden_syncs=hidden_syncs,
        synced_samples_per_s=synced,
        notes=(*record.notes, *([why] if why else [])),
    )


def synced_steps_per_s(pipeline: StepPipeline, clock: Clock = time.perf_counter) -> float:
    """Steps per second with a wait after each, as the latency mode times them."""
    pipeline.wait()
    start = clock()
    steps = 0
    while steps < SYNCED_STEPS or clock() - start < SYNCED_SECONDS:
        pipeline.issue()
        pipeline.wait()
        steps += 1
    return steps / (clock() - start)
