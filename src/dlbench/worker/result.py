"""The one Result every measured region becomes, made once.

Every loop kind brackets its region with the instruments (measure.instruments) and
freezes what it measured as it ends: a `Measurement` (the reading, the samples, the
details it built). Its checks run before the Result exists and give a `Verdict`.
`result_from` makes the Result from them, the loop's set-up time and what the worker
set up around the loop (`ProcessSetup`: the framework's import and thread pools, its
version, the process's own record) in one call: statistics, rates, work per sample
and resource use come out the same for every loop, and the reading records itself
into the details (`Reading.recorded_in`), so a newly measured quantity needs no line
here. Nothing sets a field of a Result after it; only the worker's wrapper
(worker.process.worker_main) puts the process's start and duration on a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from dlbench.backends.base import Job
from dlbench.measure.instruments import Reading
from dlbench.measure.stats import LatencyStats, summarize, throughput
from dlbench.results.details import Details, OutputCheck
from dlbench.results.metrics import with_rates
from dlbench.results.records import STATUS_FAILED, STATUS_OK, Result, base_result
from dlbench.spec.loop_kinds import loop_kind
from dlbench.spec.registry import precision_info
from dlbench.untyped import JSONObject


@dataclass(frozen=True)
class Measurement:
    """What one loop measured, frozen as it ends: the instruments' reading over its
    region, its samples (seconds each), the work they did, and the details it built
    (the backend's, with the loop's own records)."""

    reading: Reading
    samples_s: tuple[float, ...]
    device: str
    batch: int
    samples_done: float  # what the energy is shared over
    details: Details
    rate: float | None = None  # None: the batch over the mean sample
    first_call_ms: float | None = None
    warmup_s: tuple[float, ...] = ()
    # each step reads the weights once for all of its sequences (a generation's batch):
    # a sequence's bytes are the batch's share of a batch of one's (workloads.decoder)
    weights_shared: bool = False

    @cached_property
    def latency(self) -> LatencyStats | None:
        """The samples' statistics, computed once: the Result's latency and, where the
        loop gave no rate, its throughput are both read from them."""
        return summarize(list(self.samples_s)) if self.samples_s else None

    def samples_per_s(self) -> float | None:
        """The rate as the loop gave it, else the batch over the mean sample."""
        if self.rate is not None:
            return self.rate
        stats = self.latency
        return throughput(self.batch, stats) if stats is not None else None


@dataclass(frozen=True)
class Verdict:
    """What a loop's checks found, decided before its Result is made: why the case
    fails (None: it passes), and what the output check records (the Result's
    max_abs_diff, details.check; a training step's details.final_loss). A check whose
    record is part of the loop's own details (a generation's tokens) gives its error
    alone."""

    error: str | None = None
    max_abs_diff: float | None = None
    check: OutputCheck | None = None  # None: the details' own
    final_loss: float | None = None  # None: the details' own

    def recorded_in(self, details: Details) -> Details:
        """`details` with what the checks record."""
        return replace(
            details,
            check=self.check if self.check is not None else details.check,
            final_loss=self.final_loss if self.final_loss is not None else details.final_loss,
        )


PASSED = Verdict()


@dataclass(frozen=True)
class ProcessSetup:
    """What the worker set up around a case's loop (worker.steps.execute, a DDP rank):
    the framework's import time, the thread pools it reports, its version (read as the
    Result is made, after the loop: a server reports its own as it runs), and what the
    process records of itself into the details (worker.process.CaseProcess)."""

    import_s: float | None = None
    threads: JSONObject | None = None  # None: the details' own
    version: Callable[[], str] | None = None
    recorded: Callable[[Details], Details] | None = None


# A runner called on its own (a test): nothing set up around it
BARE = ProcessSetup()


def result_from(
    job: Job,
    measured: Measurement,
    *,
    setup_s: float | None,
    verdict: Verdict = PASSED,
    process: ProcessSetup = BARE,
) -> Result:
    """The Result of one measured region, made once: statistics of its samples, rates
    (the measurement's, else batch over the mean sample), work per sample, resource use
    and energy, added to its details; the set-up time; the checks' verdict (a failure
    fails the case, with its reason); what the worker set up around the loop. The null
    backend claims no FLOPs."""
    case = job.case
    # the null backend does no work; a server's is its own, unknown to the client
    real_work = case.framework != "null" and not job.workload.served
    flops = job.workload.flops_per_sample(job.params, case.mode) if real_work else None
    value_bytes = precision_info(case.precision).value_bytes
    moved = job.workload.bytes_per_sample(job.params, case.mode, value_bytes) if real_work else None
    if measured.weights_shared and moved is not None and measured.batch != 1:
        moved = moved / measured.batch
    details = verdict.recorded_in(
        measured.reading.recorded_in(measured.details, measured.samples_done)
    )
    if process.threads is not None:
        details = replace(details, threads=process.threads)
    version = process.version() if process.version is not None else None
    if process.recorded is not None:
        details = process.recorded(details)
    usage = measured.reading.usage
    failed = bool(verdict.error)
    ran = base_result(
        case,
        STATUS_FAILED if failed else STATUS_OK,
        error=verdict.error if failed else None,
        device=measured.device,
        batch_size=measured.batch,
        params=job.params,
        scenario=loop_kind(case).recorded_scenario(case, measured.batch),
    )
    result = replace(
        ran,
        latency_ms=measured.latency,
        throughput=measured.samples_per_s(),
        primary_metric=job.workload.primary_metric,
        flops_per_sample=flops,
        bytes_per_sample=moved,
        first_call_ms=measured.first_call_ms,
        warmup_ms=to_ms(measured.warmup_s),
        samples_ms=to_ms(measured.samples_s),
        cpu_percent=usage.cpu_percent,
        peak_rss_mb=usage.peak_rss_mb,
        load_avg_before=usage.load_avg_before,
        load_avg_after=usage.load_avg_after,
        import_s=process.import_s,
        setup_s=setup_s,
        max_abs_diff=verdict.max_abs_diff,
        framework_version=version,
        details=details,
    )
    return with_rates(result)  # GFLOP/s and GB/s from the rate and the work per sample


def to_ms(samples_s: Sequence[float]) -> tuple[float, ...]:
    """Milliseconds rounded to the nanosecond: finer than any clock, and compact in JSON."""
    return tuple(round(s * 1000.0, 6) for s in samples_s)
