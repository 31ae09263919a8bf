"""The generation loop: whole greedy generations timed token by token, tokens checked.

A sample is one generation of `osl` tokens for each of the batch's prompts.
The first generation (compilation, lazy allocation) and the warm-up ones are
apart, as in the step loop; the timed ones run until the stop rule holds. The
engine stamps the clock as each step's tokens reach the host, or where it keeps them
on the device as each step ends there (backends.base.Generator); TTFT, TPOT,
inter-token latency and the token rates come from those stamps
(measure.token_latency). The harness's own clock around each generation
gives the samples, so a result's latency is the end-to-end latency.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from dlbench.backends.base import Backend, GenerationTrace, Generator, Job
from dlbench.errors import ReferenceUnavailable
from dlbench.measure.instruments import Instruments
from dlbench.measure.timer import StopRule, run_timed
from dlbench.measure.token_latency import (
    TokenLatencies,
    TokenTimes,
    median_rate,
    percentiles_ms,
    token_latencies,
)
from dlbench.reference.decoder import SHARED_REFERENCE, OwnReference, reference_tokens
from dlbench.results.details import Generation, TokenCheck
from dlbench.results.records import Result
from dlbench.spec.case import Settings
from dlbench.spec.registry import precision_info
from dlbench.worker.model_work import decoder_work
from dlbench.worker.placement import require_placement
from dlbench.worker.result import BARE, Measurement, ProcessSetup, Verdict, result_from
from dlbench.worker.token_check import DIVERGED, check_generations, failure

if TYPE_CHECKING:
    import numpy as np


def run_generation(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
    """Prepare the engine, time its generations, check its tokens; one Result."""
    setup_start = time.perf_counter()
    generator = backend.prepare_generation(job)
    record = generator.details.generation or Generation()
    converting_s = (record.convert_s or 0.0) if record.converted_now else 0.0
    setup_s = time.perf_counter() - setup_start - converting_s  # conversion reported apart
    return measure_generation(generator, job, settings, setup_s, process)


def measure_generation(
    generator: Generator,
    job: Job,
    settings: Settings,
    setup_s: float,
    process: ProcessSetup = BARE,
) -> Result:
    """Time a prepared engine's generations and check its tokens; one Result."""
    record = generator.details.generation or Generation()
    require_placement(job.device, generator.details)
    isl, osl = job.params["isl"], job.params["osl"]
    prompts = job.inputs()["input_ids"]
    traces: list[GenerationTrace] = []
    rule = StopRule(settings.min_time_s, settings.min_iters, settings.warmup_iters)
    instruments = Instruments(generator.device)
    timing = run_timed(
        lambda: traces.append(generator.generate(prompts, osl)),
        rule,
        on_loop_start=instruments.start,
    )
    reading = instruments.stop()
    timed = traces[1 + len(timing.warmup_s) :]
    samples_done = len(timing.samples_s) * job.batch_size
    times = [TokenTimes(trace.started_s, trace.token_times_s) for trace in timed]
    generation = generation_record(record, token_latencies(times), job.batch_size, isl, osl)
    energy = reading.recorded_in(generator.details, samples_done).energy
    joules = energy.joules_per_sample if energy else None
    generation = replace(
        generation,
        energy_per_output_token_j=joules / osl if joules is not None else None,
        device_peak_mb=generator.peak_device_memory_mb(),
        tokens=_token_check(job, traces, generator.own_reference),
    )
    generation = decoder_work(generation, job, record.kv_cache_dtype)
    extra = {**generator.details.extra, **generator.after_generations()}
    busy, unprofiled = _decode_busy(generator, prompts, osl, times)
    generation = replace(generation, decode_device_busy=busy)
    if unprofiled:
        extra["decode_kernel_time"] = unprofiled
    details = replace(
        generator.details, generation=generation, extra=extra, loop_wall_s=timing.loop_wall_s
    )
    measured = Measurement(
        reading,
        tuple(timing.samples_s),
        device=generator.device,
        batch=job.batch_size,
        samples_done=samples_done,
        details=details,
        first_call_ms=timing.first_call_s * 1000.0,
        warmup_s=tuple(timing.warmup_s),
        weights_shared=True,  # each step reads the weights once for the batch
    )
    error = failure(generation.tokens) if generation.tokens is not None else None
    return result_from(
        job, measured, setup_s=setup_s, verdict=Verdict(error=error), process=process
    )


def generation_record(
    record: Generation, latencies: TokenLatencies, batch: int, isl: int, osl: int
) -> Generation:
    """The backend's record (converter, KV cache) with the timed generations' numbers."""
    ttft, tpot = percentiles_ms(latencies.ttft_s), percentiles_ms(latencies.tpot_s)
    itl, e2e = percentiles_ms(latencies.itl_s), percentiles_ms(latencies.e2e_s)
    return replace(
        record,
        isl=isl,
        osl=osl,
        generations=len(latencies.e2e_s),
        ttft_p50_ms=ttft[0], ttft_p90_ms=ttft[1], ttft_p99_ms=ttft[2],
        tpot_p50_ms=tpot[0], tpot_p90_ms=tpot[1], tpot_p99_ms=tpot[2],
        itl_p50_ms=itl[0], itl_p90_ms=itl[1], itl_p99_ms=itl[2],
        e2e_p50_ms=e2e[0], e2e_p90_ms=e2e[1], e2e_p99_ms=e2e[2],
        prefill_tokens_per_s=median_rate(batch * isl, latencies.ttft_s),
        decode_tokens_per_s=median_rate(batch * (osl - 1), latencies.decode_s),
        output_tokens_per_s=median_rate(batch * osl, latencies.e2e_s),
    )  # fmt: skip


def _decode_busy(generator: Generator, prompts: np.ndarray, osl: int,
                 times: list[TokenTimes]) -> tuple[float | None, str | None]:  # fmt: skip
    """An asynchronous device's kernel time over a decode (profiled after the timed
    generations) against the timed generations' median decode: under the GPU verdict's
    floor (results.flags.DEVICE_BUSY_FLOOR) the device waited for the host between
    steps (results.limits: host-bound). With it, why there is none, where it failed."""
    kernel_s, why = generator.decode_kernel_s(prompts, osl)
    decode_s = sorted(t.decode_s for t in times)
    middle = decode_s[len(decode_s) // 2] if decode_s else 0.0
    if kernel_s is not None and middle > 0:
        return kernel_s / middle, why
    return None, why


# the case that makes the shared reference: torch eager fp32 on the CPU
REFERENCE_CASE = ("torch", "eager", "cpu", "fp32")


def _token_check(job: Job, traces: list[GenerationTrace], own: OwnReference | None) -> TokenCheck:
    """Every generation (the first call's and the warm-up's too) held to torch eager
    fp32's tokens: the engine's own reference (made from its weights on its device)
    where it has one, else the shared checkpoint's.

    A CPU computes the same bits every time, so there the generations must also agree
    with one another (a cache not reset between calls shows so, even at a near tie);
    an accelerator's bf16 kernels need not, so there each is held to the reference
    alone. Where there is none to hold them to, or the case is that reference itself,
    they must agree too."""
    runs = [trace.tokens for trace in traces]
    agree = all(tokens == runs[0] for tokens in runs[1:])
    case = job.case
    reference_itself = own is None and (
        (case.framework, case.compile, job.device, case.precision) == REFERENCE_CASE
    )
    if not agree and (reference_itself or job.device == "cpu"):
        return TokenCheck(verdict=f"{DIVERGED}: the engine's own generations disagree",
                          generations_agree=False)  # fmt: skip
    if reference_itself:
        return TokenCheck(verdict="the reference itself (torch eager fp32 on the CPU)",
                          reference=SHARED_REFERENCE, generations_agree=True)  # fmt: skip
    if own is not None:
        reference, origin = own.arrays, own.origin
    else:
        origin = SHARED_REFERENCE
        try:
            reference = reference_tokens(job.case_inputs())
        except ReferenceUnavailable as exc:
            if not agree:
                return TokenCheck(verdict=f"{DIVERGED}: the engine's own generations disagree, "
                                  f"and none can be held to a reference ({exc})",
                                  reference=origin, generations_agree=False)  # fmt: skip
            return TokenCheck(verdict=f"not checked: {exc}", reference=origin,
                              generations_agree=True)  # fmt: skip
    tolerance = precision_info(job.case.precision).tolerance or 0.0
    return replace(check_generations(runs, reference, tolerance), reference=origin)
