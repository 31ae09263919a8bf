"""A ceiling case: its kernels in windows, a burst figure and a sustained one.

`dlbench roofline`'s GEMM and copy cases carry the torch option
`ceiling=burst` or `ceiling=sustained` (plan/builtin_suites/ceilings.yaml);
its loop kind (spec.loop_kinds) sends such a case here, not to the step loop. The
backend prepares the case as the step loop would (its inputs, placement and
output check) and hands its kernel, unsynchronised, to a WindowQueue; the
phases are measure.power_regime's. `burst` runs the burst and then windows
for --min-time; `sustained` runs on to --sustain seconds of continuous work
(Settings.sustain_s: 10 on a GPU, 0 on a CPU, which has no power regime) and
takes the sustained figure over --min-time of windows after it.

The result's samples are the case's own kernel's windows (seconds per call) of
its last phase; its details.power_regimes holds both figures with the SM clock
and power seen during each, from which results.ceilings reads the ceilings.
"""

from __future__ import annotations

import time
from dataclasses import replace

from dlbench.backends.base import Backend, Job, Prepared
from dlbench.errors import CaseError
from dlbench.measure.gpu_probe import GpuProbe
from dlbench.measure.instruments import Instruments, Reading
from dlbench.measure.power_regime import RegimePlan, RegimeRun, WindowKernel, run_regimes
from dlbench.results.records import Result
from dlbench.spec.case import Settings
from dlbench.spec.loop_kinds import WINDOWED_WORKLOADS
from dlbench.spec.registry import CEILING_OPTION, precision_info
from dlbench.worker.check import check_output, verdict_of
from dlbench.worker.placement import require_placement
from dlbench.worker.result import BARE, Measurement, ProcessSetup, result_from
from dlbench.workloads.copy import MEMORY_KERNELS

SUSTAINED = "sustained"
# The power cap settles an H100's bf16 GEMM within seconds (bench/gpu_memory_kernels.py:
# ~670 TFLOP/s from 2 s on, after ~730 in the first 150 ms); 10 s leaves no doubt
GPU_SUSTAIN_S = 10.0


def run_ceiling(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
    """Prepare, run the phases with the instruments around them, check the output."""
    setup_start = time.perf_counter()
    prepared = backend.prepare(job)
    queue = backend.window_queue(job, prepared)
    setup_s = time.perf_counter() - setup_start
    require_placement(job.device, prepared.details)
    if queue.gpu_uuid:
        probe, no_probe = GpuProbe.open(queue.gpu_uuid)
    else:
        probe, no_probe = None, f"no GPU readings: {job.device} is not an NVIDIA GPU"
    instruments = Instruments(prepared.device)

    def started() -> None:
        if prepared.before_measure is not None:
            prepared.before_measure()
        instruments.start()

    unit = "GB/s" if job.workload.primary_metric == "gbps" else "GFLOP/s"
    try:
        with prepared.context():
            run = run_regimes(
                queue, window_kernels(job), regime_plan(job, settings), unit, probe, no_probe,
                on_start=started,
            )  # fmt: skip
            reading = instruments.stop()
    finally:
        if probe is not None:
            probe.close()
    return _result(job, prepared, run, reading, setup_s, process)


def regime_plan(job: Job, settings: Settings) -> RegimePlan:
    sustain_s = settings.sustain_s
    if sustain_s is None:
        sustain_s = 0.0 if job.device == "cpu" else GPU_SUSTAIN_S
    return RegimePlan(
        sustain_s=sustain_s,
        measure_s=settings.min_time_s,
        min_windows=settings.min_iters,
        warmup_calls=settings.warmup_iters,
        run_sustained=dict(job.case.options)[CEILING_OPTION] == SUSTAINED,
    )


def window_kernels(job: Job) -> list[WindowKernel]:
    """The case's own kernel first, and for copy the memory ceiling's others, each with
    the work of one call (FLOPs, or bytes read and written)."""
    workload = job.workload
    if workload.name not in WINDOWED_WORKLOADS:
        raise CaseError(
            f"option {CEILING_OPTION} is for the {', '.join(WINDOWED_WORKLOADS)} workloads, "
            f"not {workload.name!r}"
        )
    batch, mode = job.batch_size, job.case.mode
    value_bytes = precision_info(job.case.precision).value_bytes
    if workload.name == MEMORY_KERNELS[0].name:
        return [
            WindowKernel(k.name, batch * k.bytes_per_sample(job.params, value_bytes))
            for k in MEMORY_KERNELS
        ]
    if workload.primary_metric == "gbps":
        work = workload.bytes_per_sample(job.params, mode, value_bytes)
    else:
        work = workload.flops_per_sample(job.params, mode)
    return [WindowKernel(workload.name, batch * float(work or 0.0))]


def _result(job: Job, prepared: Prepared, run: RegimeRun, reading: Reading, setup_s: float,
            process: ProcessSetup) -> Result:  # fmt: skip
    """The last phase's windows, the kernel's spot check (a mismatch fails the case, as
    in the step loop) and what the backend adds after measuring, made one Result."""
    with prepared.context():
        verdict = verdict_of(check_output(job, prepared))
    after = prepared.after_measure() if prepared.after_measure else {}
    usage = reading.usage
    details = replace(
        prepared.details,
        power_regimes=run.record,
        loop_wall_s=usage.wall_end_epoch_s - usage.wall_start_epoch_s,
        extra={**after, **prepared.details.extra},
    )
    batch = prepared.batch_size or job.batch_size
    measured = Measurement(
        reading,
        tuple(run.samples_s),
        device=prepared.device,
        batch=batch,
        samples_done=run.calls * batch,
        details=details,
        first_call_ms=run.first_call_s * 1000.0,
        warmup_s=tuple(run.warmup_s),
    )
    return result_from(job, measured, setup_s=setup_s, verdict=verdict, process=process)
