"""A case in the worker: import the framework, then run the case's loop kind
(spec.loop_kinds); and the step loop itself (prepare, time the steps, check,
summarise).

Runs inside the worker process (worker.process calls `execute`); the DDP
rank (worker.ddp_rank) reuses `make_job`, `step_measurement` and the timer.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import cast

from dlbench.backends import load_backend
from dlbench.backends.base import Backend, Job, Prepared, device_kind
from dlbench.errors import CaseError, CaseSkipped, ReferenceUnavailable, cause_summary, first_line
from dlbench.measure.cpu_features import int8_dot_units
from dlbench.measure.instruments import Instruments, Reading
from dlbench.measure.monitor import peak_rss_mb
from dlbench.measure.timer import StopRule, Timing, run_timed
from dlbench.results.details import Details, OutputCheck, Pipelined
from dlbench.results.records import STATUS_FAILED, Result, base_result
from dlbench.spec.case import Case, Settings
from dlbench.spec.loads import ServedStreams
from dlbench.spec.loop_kinds import load_part, loop_kind
from dlbench.spec.registry import QUANTIZED_PRECISIONS
from dlbench.spec.worker_request import CaseOutputs
from dlbench.worker.check import check_output, verdict_of
from dlbench.worker.pipelined import (
    THROUGHPUT,
    measure_pipelined,
    pipelined_measurement,
    timing_mode,
)
from dlbench.worker.placement import require_device_kind, require_placement
from dlbench.worker.quantized_check import quantized_agreement
from dlbench.worker.result import BARE, Measurement, ProcessSetup, Verdict, result_from
from dlbench.workloads import get_workload

# What every loop kind's runner is (spec.loop_kinds names each by module and
# function): it makes its Result once, with what the worker set up around it
Runner = Callable[[Backend, Job, Settings, ProcessSetup], Result]


def execute(
    case: Case,
    settings: Settings,
    outputs: CaseOutputs | None = None,
    recorded: Callable[[Details], Details] | None = None,
) -> Result:
    """Import, prepare, time and summarise one case (in this process); its progress
    lines and files beside the run go where `outputs` says (nowhere, and a temporary
    folder, without); `recorded`: what the process records of itself into the
    result's details (worker.process.CaseProcess)."""
    started = time.perf_counter()
    backend = load_backend(case.framework)()  # imports the framework
    import_s = time.perf_counter() - started
    intra = case.threads
    served = load_part(case, ServedStreams)
    if served is not None and served.streams and not backend.streams_share_threads:
        intra = max(1, intra // served.streams)  # each server stream runs its own thread team
    threads = backend.configure_threads(intra, case.effective_interop_threads)
    device = backend.resolve_device(case.device)
    require_device_kind(case.framework, case.device, device)
    job = make_job(case, settings, device, outputs or CaseOutputs())
    kind = loop_kind(case)
    process = ProcessSetup(import_s, threads, backend.version, recorded)
    try:
        return cast(Runner, kind.runner_function())(backend, job, settings, process)
    except CaseSkipped as skip:
        skip.device = job.device  # the skip names the device it judged
        raise


def run_steps(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
    """The step loop: first call, warm-up, then timed steps until the stop rule holds,
    each waited for (latency) or pipelined in windows (throughput)."""
    prepared, setup_s = prepare_steps(backend, job)
    mode = timing_mode(job, prepared.batch_size or job.batch_size)
    pipelined = None
    if mode == THROUGHPUT:
        measured = measure_pipelined(prepared, settings, prepared.batch_size or job.batch_size)
        measurement = pipelined_measurement(job, prepared, measured)
        loop_wall_s, pipelined = measured.timing.loop_wall_s, measured.record
    else:
        timing, reading = measure(prepared, settings)
        measurement = step_measurement(job, prepared, timing, reading)
        loop_wall_s = timing.loop_wall_s
    return finish_steps(measurement, job, prepared, setup_s, loop_wall_s, pipelined, process)


def prepare_steps(backend: Backend, job: Job) -> tuple[Prepared, float]:
    """The backend's prepared step, its placement checked, and its set-up time (a
    fresh int8 model's quantizer run is reported apart: details.quantization)."""
    setup_start = time.perf_counter()
    prepared = backend.prepare(job)
    setup_s = time.perf_counter() - setup_start - _quantizer_wall_s(prepared.details)
    require_placement(job.device, prepared.details)
    if job.case.precision in QUANTIZED_PRECISIONS:
        # measured all the same where the CPU has none, and said so (results.flags)
        prepared = replace(
            prepared, details=replace(prepared.details, int8_dot_units=int8_dot_units())
        )
    return prepared, setup_s


def finish_steps(
    measured: Measurement,
    job: Job,
    prepared: Prepared,
    setup_s: float,
    loop_wall_s: float,
    pipelined: Pipelined | None = None,
    process: ProcessSetup = BARE,
) -> Result:
    """A prepared step's Result: its measurement with the output and loss checks'
    verdict, what the backend adds after measuring, the loop's length and its timing
    mode."""
    verdict = _checks(job, prepared)
    after = prepared.after_measure() if prepared.after_measure else {}
    details = replace(
        measured.details,  # the backend's, with what the loop measured
        loop_wall_s=loop_wall_s,
        timing_mode=timing_mode(job, prepared.batch_size or job.batch_size),
        pipelined=pipelined,
        extra={**after, **measured.details.extra},
    )
    measured = replace(measured, details=details)
    return result_from(job, measured, setup_s=setup_s, verdict=verdict, process=process)


def _checks(job: Job, prepared: Prepared) -> Verdict:
    """The output check, then (where it passed) the loss check."""
    verdict = _output_check(job, prepared)
    if verdict.error or prepared.fetch_loss is None:
        return verdict
    loss = _loss_check(prepared)
    return replace(verdict, error=loss.error, final_loss=loss.final_loss)


def _loss_check(prepared: Prepared) -> Verdict:
    """Training must produce a finite loss; NaN weights would make every later loss NaN."""
    assert prepared.fetch_loss is not None  # the callers'
    with prepared.context():
        loss = float(prepared.fetch_loss())
    if math.isfinite(loss):
        return Verdict(final_loss=loss)
    why = f"training loss is not finite ({loss}) after the measured steps"
    return Verdict(error=why, final_loss=loss)


def _output_check(job: Job, prepared: Prepared) -> Verdict:
    """The output check's verdict; a mismatch fails the case.

    int8 is held to fp32 by the SQNR of its outputs (worker.quantized_check), not by
    fp32's tolerance (worker.check).
    """
    quantized = job.case.precision in QUANTIZED_PRECISIONS and job.case.mode == "infer"
    check = quantized_agreement if quantized else check_output
    try:
        with prepared.context():
            outcome = check(job, prepared)
    except ReferenceUnavailable as exc:
        return Verdict(check=OutputCheck(note=f"reference unavailable: {exc}"))
    return verdict_of(outcome)


def make_job(
    case: Case, settings: Settings, device: str, outputs: CaseOutputs | None = None
) -> Job:
    """Resolve the workload's defaults for the device the case actually landed on."""
    workload = get_workload(case.workload)
    kind = device_kind(device)
    params = workload.resolve_params(kind, dict(case.params))
    return Job(
        case=case,
        workload=workload,
        device=device,
        batch_size=case.effective_batch_size(workload.default_batch_size(kind, params)),
        params=params,
        seed=settings.seed,
        outputs=outputs or CaseOutputs(),
    )


def measure(prepared: Prepared, settings: Settings) -> tuple[Timing, Reading]:
    """Run the timer inside the backend's context; the instruments bracket the
    steady state, read outside the timed steps."""
    rule = StopRule(settings.min_time_s, settings.min_iters, settings.warmup_iters)
    instruments = Instruments(prepared.device)

    def loop_start() -> None:
        if prepared.before_measure is not None:
            prepared.before_measure()  # peaks of the measured steps, not of compiling
        instruments.start()

    with prepared.context():
        timing = run_timed(prepared.step, rule, on_loop_start=loop_start)
        reading = instruments.stop()
    return timing, reading


def step_measurement(
    job: Job, prepared: Prepared, timing: Timing, reading: Reading, rate: float | None = None
) -> Measurement:
    """What the step loop measured: its timed steps, frozen for the one result builder."""
    batch = prepared.batch_size or job.batch_size
    return Measurement(
        reading,
        tuple(timing.samples_s),
        device=prepared.device,
        batch=batch,
        samples_done=len(timing.samples_s) * batch,
        details=prepared.details,
        rate=rate,
        first_call_ms=timing.first_call_s * 1000.0,
        warmup_s=tuple(timing.warmup_s),
    )


def _quantizer_wall_s(details: Details) -> float:
    quantization = details.quantization
    return float(quantization.build_wall_s or 0.0) if quantization else 0.0


def failed_from_exception(case: Case, exc: BaseException) -> Result:
    # dlbench's own errors are one crafted line; a framework's names its cause
    # below location lines or inside a traceback it carries (errors.cause_summary)
    if isinstance(exc, CaseError):
        message = first_line(str(exc))
    else:
        message = f"{type(exc).__name__}: {cause_summary(exc)}"
    detail = "".join(traceback.format_exception(exc)[-8:])
    if isinstance(exc, CaseError) and exc.detail:
        detail = f"{exc.detail.rstrip()}\n\n{detail}"  # the framework's whole message first
    failed = base_result(case, STATUS_FAILED, error=message, error_detail=detail)
    return replace(failed, peak_rss_mb=peak_rss_mb())
