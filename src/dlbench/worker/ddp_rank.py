"""One rank of a DistributedDataParallel case, under torchrun (`python -m` this module).

Each rank builds the same model, wraps it in DDP (NCCL on GPUs, gloo on
CPUs) and times its steps with the worker's own timer loop
(measure.timer.run_timed); after warm-up the ranks agree on one step count
(a rank that stopped early would leave the others waiting in an all-reduce).
Rank 0 gathers the per-rank rates and writes the Result; the launcher's
side is dlbench.launch.torchrun.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from dlbench.atomic import write_atomic
from dlbench.errors import CaseError, CaseSkipped, first_line
from dlbench.lifeline import die_with_parent
from dlbench.measure.energy import EnergyMeter, EnergyReading, EnergyUse
from dlbench.measure.monitor import ProcessMonitor
from dlbench.measure.timer import MAX_ITERS, StopRule, run_timed
from dlbench.results.details import Ddp, NumpyBlas
from dlbench.results.record_dict import from_dict
from dlbench.results.records import STATUS_SKIPPED, Result, base_result
from dlbench.spec.case import Case, Settings
from dlbench.worker.compile_cache import compile_cache_detail, private_compile_caches
from dlbench.worker.process import (
    THREAD_VARS,
    block_other_frameworks,
    frameworks_in_process,
    limit_numpy_blas,
)
from dlbench.worker.steps import failed_from_exception, make_job, measured_result


def _agreed_iterations(settings: Settings, warmup_s: list[float], dist: Any, device: str) -> int:
    """Steps every rank times: enough for --min-time at the slowest rank's pace."""
    import torch

    # on the rank's device: NCCL reduces CUDA tensors only (gloo takes CPU ones)
    pace = torch.tensor([max(warmup_s) if warmup_s else 0.0], dtype=torch.float64, device=device)
    dist.all_reduce(pace, op=dist.ReduceOp.MAX)
    step_s = float(pace.item())
    wanted = math.ceil(settings.min_time_s / step_s) if step_s > 0 else settings.min_iters
    return max(settings.min_iters, min(wanted, MAX_ITERS))


def rank_main(argv: list[str]) -> None:
    """Entry point of each rank: measure under DDP; rank 0 writes the Result."""
    case = Case.from_dict(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    settings = Settings.from_dict(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
    result_path = Path(argv[2])
    for name in THREAD_VARS:  # before torch is imported
        os.environ[name] = str(case.threads)
    block_other_frameworks("torch")
    die_with_parent(os.getppid())  # torchrun killed hard: the ranks go with it
    failed = False
    try:
        numpy_blas = limit_numpy_blas()
        with private_compile_caches():
            result = _measure_rank(case, settings)
        if result is not None:
            result.details.numpy_blas = from_dict(NumpyBlas, numpy_blas)
            result.details.compile_cache = compile_cache_detail(case)
    except CaseSkipped as skip:
        result, failed = base_result(case, STATUS_SKIPPED, error=first_line(skip)), True
    except Exception as exc:
        result, failed = failed_from_exception(case, exc), True
    if int(os.environ.get("RANK", "0")) == 0 and result is not None:
        write_atomic(result_path, json.dumps(result.to_dict()))
    if failed:
        # a non-zero exit makes torchrun stop the other ranks at once, instead of
        # leaving them waiting in a collective for a rank that is gone
        sys.exit(1)


def _measure_rank(case: Case, settings: Settings) -> Result | None:
    import torch
    import torch.distributed as dist

    from dlbench.backends.torch.backend import TorchBackend

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    backend = TorchBackend()
    threads = backend.configure_threads(case.threads, case.effective_interop_threads)
    on_gpu = case.device != "cpu" and torch.cuda.is_available()
    if case.device == "cuda" and not on_gpu:
        raise CaseError("--device cuda asked for, but torch sees no CUDA device")
    if on_gpu and local_rank >= torch.cuda.device_count():
        raise CaseError(
            f"--nproc asks for a process per GPU, but rank {local_rank} has no GPU: "
            f"torch sees {torch.cuda.device_count()} on this node"
        )
    device = f"cuda:{local_rank}" if on_gpu else "cpu"
    if on_gpu:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if on_gpu else "gloo")
    try:
        job = make_job(case, settings, device)
        # each rank its own batch (seed + rank), the same initial weights (DDP broadcasts)
        job = replace(job, seed=job.seed + rank, world_size=world)
        setup_start = time.perf_counter()
        prepared = backend.prepare(job)
        setup_s = time.perf_counter() - setup_start
        monitor = ProcessMonitor()
        # each rank meters its own GPU; on a CPU the ranks share the package, so rank 0 alone
        meter = EnergyMeter.for_device(device) if on_gpu or rank == 0 else None
        agreed: list[int] = []

        def loop_start() -> None:
            monitor.start()
            if meter is not None:
                meter.start()

        def settle(warmup_s: list[float]) -> StopRule:
            """After warm-up, every rank times the same step count, starting together."""
            agreed.append(_agreed_iterations(settings, warmup_s, dist, device))
            dist.barrier()
            prepared.step()  # untimed: absorbs the ranks' skew in leaving the barrier
            return StopRule(0.0, agreed[0], 0)

        # at least one warm-up step: the agreed count is paced by the warm-up steps
        rule = StopRule(settings.min_time_s, settings.min_iters, max(1, settings.warmup_iters))
        with prepared.context():
            timing = run_timed(prepared.step, rule, on_loop_start=loop_start, settle=settle)
            energy = meter.stop() if meter is not None else None
            usage = monitor.stop()
        iterations = agreed[0]
        mine = measured_result(job, prepared, timing, usage)
        gathered: list[Any] = [None] * world
        median_ms = mine.latency_ms.median if mine.latency_ms else None
        own = {
            "throughput": mine.throughput,
            "median_ms": median_ms,
            "device": device,
            "energy": energy,
            "samples": len(timing.samples_s) * job.batch_size,
        }
        dist.all_gather_object(gathered, own)
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    mine.throughput = sum(g["throughput"] for g in gathered)
    if mine.gflops is not None and mine.flops_per_sample:
        mine.gflops = mine.throughput * mine.flops_per_sample / 1e9
    mine.setup_s = setup_s
    mine.framework_version = torch.__version__
    mine.details = replace(
        mine.details,  # the backend's (measured_result)
        frameworks_in_process=frameworks_in_process(),
        threads=threads,
        ddp=Ddp(
            world_size=world,
            backend="nccl" if on_gpu else "gloo",
            iterations_per_rank=iterations,
            per_rank_throughput=[g["throughput"] for g in gathered],
            per_rank_median_ms=[g["median_ms"] for g in gathered],
            per_rank_device=[g["device"] for g in gathered],
        ),
        measured_wall=[usage.wall_start_epoch_s, usage.wall_end_epoch_s],
        energy=_total_energy(gathered),
    )
    return mine


def _total_energy(gathered: list[Any]) -> EnergyUse:
    """Every metered rank's joules over every rank's samples; unmeasurable if any rank was."""
    readings = [g["energy"] for g in gathered if g["energy"] is not None]
    samples = sum(g["samples"] for g in gathered)
    reasons = [r.unmeasurable for r in readings if r.unmeasurable or r.joules is None]
    if reasons or not readings:
        return EnergyUse(unmeasurable=reasons[0] if reasons else "no rank metered its device")
    total = EnergyReading(
        readings[0].source,
        sum(r.joules for r in readings),
        max(r.seconds or 0.0 for r in readings),
    )
    return total.to_details(samples)


if __name__ == "__main__":
    rank_main(sys.argv[1:])
