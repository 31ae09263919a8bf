"""The one Result every measured region becomes.

The step loop, the epoch loop, a DDP rank and a LoadGen test bracket their
region with the instruments (measure.instruments) and hand the reading and
their samples to `result_from`: statistics, rates, work per sample and
resource use come out the same for every loop, and the reading records
itself into the details (`Reading.recorded_in`), so a newly measured quantity
needs no line here.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlbench.backends.base import Job
from dlbench.measure.instruments import Reading
from dlbench.measure.stats import summarize, throughput
from dlbench.results.details import Details
from dlbench.results.metrics import with_rates
from dlbench.results.records import STATUS_OK, Result, base_result
from dlbench.spec.registry import precision_info


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
    setup_s: float | None = None,
) -> Result:
    """The Result of one measured region: statistics of its samples, rates (`rate`
    as given, else batch over the mean sample), work per sample, resource use and
    energy, added to `details` (the backend's). The null backend claims no FLOPs."""
    case = job.case
    stats = summarize(list(samples_s)) if samples_s else None
    if rate is None and stats is not None:
        rate = throughput(batch, stats)
    # the null backend does no work; a server's is its own, unknown to the client
    real_work = case.framework != "null" and not job.workload.served
    flops = job.workload.flops_per_sample(job.params, case.mode) if real_work else None
    value_bytes = precision_info(case.precision).value_bytes
    moved = job.workload.bytes_per_sample(job.params, case.mode, value_bytes) if real_work else None
    usage = reading.usage
    result = base_result(
        case,
        status,
        error=error,
        device=device,
        batch_size=batch,
        params=job.params,
        # time-to-train serves no queries: its case keeps the scenario it was given
        # nor does a server's load: its profile is the case's own fields
        scenario=case.scenario
        if job.workload.epoch_based or job.workload.served
        else case.effective_scenario(batch),
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
        details=reading.recorded_in(details, samples_done),
        setup_s=setup_s,
    )
    return with_rates(result)  # GFLOP/s and GB/s from the rate and the work per sample


def to_ms(samples_s: Sequence[float]) -> list[float]:
    """Milliseconds rounded to the nanosecond: finer than any clock, and compact in JSON."""
    return [round(s * 1000.0, 6) for s in samples_s]
