"""The measurement skeleton every loop shares: what brackets a measured region,
and the one Result built from it.

The step loop, the epoch loop, a DDP rank and a LoadGen test each time their
own work, and nothing else: each starts `Instruments` just before its region
and stops them just after (outside the timed steps), then hands the reading
and its samples to `result_from`. A newly measured quantity is its meter (in
measure/), its metric (results/metrics.py) and two lines here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from dlbench.backends.base import Job
from dlbench.measure.energy import EnergyMeter, EnergyReading
from dlbench.measure.monitor import ProcessMonitor, ResourceUse
from dlbench.measure.stats import summarize, throughput
from dlbench.results.details import Details
from dlbench.results.metrics import with_rates
from dlbench.results.records import STATUS_OK, Result, base_result


@dataclass(frozen=True)
class Reading:
    """What the instruments saw over one measured region."""

    usage: ResourceUse
    # None where this process meters nothing (a DDP rank whose CPU rank 0 meters)
    energy: EnergyReading | None

    def recorded_in(self, details: Details, samples_done: float) -> Details:
        """`details` with the region's place on the wall clock (to pick it out of the
        parent's timeline) and its energy per sample."""
        window = [self.usage.wall_start_epoch_s, self.usage.wall_end_epoch_s]
        if self.energy is None:
            return replace(details, measured_wall=window)
        return replace(details, measured_wall=window, energy=self.energy.to_details(samples_done))


class Instruments:
    """The resource monitor and the energy meter: start() just before the region,
    stop() just after. Neither samples during it: each reads its counters twice."""

    def __init__(self, device: str, meter_energy: bool = True) -> None:
        self._monitor = ProcessMonitor()
        self._meter = EnergyMeter.for_device(device) if meter_energy else None

    def start(self) -> None:
        self._monitor.start()
        if self._meter is not None:
            self._meter.start()

    def stop(self) -> Reading:
        energy = self._meter.stop() if self._meter is not None else None
        return Reading(self._monitor.stop(), energy)


def result_from(
    job: Job,
    reading: Reading,
    samples_s: Sequence[float],
    *,
    device: str,
    batch: int,
    samples_done: float,
    details: Details,
    rate: float | None = None,
    first_call_ms: float | None = None,
    warmup_s: Sequence[float] = (),
    status: str = STATUS_OK,
    error: str | None = None,
) -> Result:
    """The Result of one measured region: statistics of its samples, rates (`rate`
    as given, else batch over the mean sample), work per sample, resource use and
    energy, added to `details` (the backend's). The null backend claims no FLOPs."""
    case = job.case
    stats = summarize(list(samples_s)) if samples_s else None
    if rate is None and stats is not None:
        rate = throughput(batch, stats)
    real_work = case.framework != "null"
    flops = job.workload.flops_per_sample(job.params, case.mode) if real_work else None
    moved = job.workload.bytes_per_sample(job.params, case.mode) if real_work else None
    usage = reading.usage
    result = base_result(
        case,
        status,
        error=error,
        device=device,
        batch_size=batch,
        params=job.params,
        # time-to-train serves no queries: its case keeps the scenario it was given
        scenario=case.scenario if job.workload.epoch_based else case.effective_scenario(batch),
        latency_ms=stats,
        throughput=rate,
        primary_metric=job.workload.primary_metric,
        flops_per_sample=flops,
        bytes_per_sample=moved,
        first_call_ms=first_call_ms,
        warmup_ms=to_ms(warmup_s),
        samples_ms=to_ms(samples_s),
        cpu_percent=usage.cpu_percent,
        peak_rss_mb=usage.peak_rss_mb,
        load_avg_before=usage.load_avg_before,
        load_avg_after=usage.load_avg_after,
    )
    result.details = reading.recorded_in(details, samples_done)
    return with_rates(result)  # GFLOP/s and GB/s from the rate and the work per sample


def to_ms(samples_s: Sequence[float]) -> list[float]:
    """Milliseconds rounded to the nanosecond: finer than any clock, and compact in JSON."""
    return [round(s * 1000.0, 6) for s in samples_s]
