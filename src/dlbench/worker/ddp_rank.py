"""One rank of a DistributedDataParallel case, under torchrun (`python -m` this module).

Each rank builds the same model, wraps it in DDP (NCCL on GPUs, gloo on
CPUs) and times its steps with the worker's own timer loop
(measure.timer.run_timed); after warm-up the ranks agree on one step count
(a rank that stopped early would leave the others waiting in an all-reduce).
Rank 0 gathers every rank's samples and measured wall time and writes the
Result: the group's rate is every rank's samples over the slowest rank's wall
time (`group_throughput`), the time the group took to do that work. The
launcher's side is dlbench.launch.torchrun.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TypedDict, cast

from dlbench.atomic import write_atomic
from dlbench.backends import load_backend
from dlbench.backends.base import Backend, Job, Prepared
from dlbench.errors import CaseError, CaseSkipped, first_line
from dlbench.lifeline import die_with_parent
from dlbench.measure.energy import EnergyReading, EnergyUse
from dlbench.measure.instruments import Instruments
from dlbench.measure.timer import MAX_ITERS, StopRule, run_timed
from dlbench.results.details import Ddp, Details
from dlbench.results.records import STATUS_SKIPPED, Result, base_result
from dlbench.spec.case import Case, Settings
from dlbench.spec.loop_kinds import loop_kind
from dlbench.spec.worker_request import WorkerRequest
from dlbench.worker.process import CaseProcess
from dlbench.worker.result import BARE, Measurement, ProcessSetup, result_from
from dlbench.worker.steps import Runner, failed_from_exception, make_job, step_measurement


def _agreed_iterations(
    settings: Settings, warmup_s: list[float], dist: ModuleType, device: str
) -> int:
    """Steps every rank times: enough for --min-time at the slowest rank's pace.

    A rank's pace is its fastest warm-up step, the nearest to its steady state: the
    first warm-up steps run slower, and pacing by them timed a third of --min-time
    (and left too short a region for a GPU's energy counter).
    """
    import torch

    # on the rank's device: NCCL reduces CUDA tensors only (gloo takes CPU ones)
    pace = torch.tensor([min(warmup_s) if warmup_s else 0.0], dtype=torch.float64, device=device)
    dist.all_reduce(pace, op=dist.ReduceOp.MAX)
    step_s = float(pace.item())
    wanted = math.ceil(settings.min_time_s / step_s) if step_s > 0 else settings.min_iters
    return max(settings.min_iters, min(wanted, MAX_ITERS))


def rank_main(argv: list[str]) -> None:
    """Entry point of each rank: measure under DDP; rank 0 writes the Result."""
    request = WorkerRequest.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    case, result_path = request.case, request.result_path
    process = CaseProcess(case, request.shared_compile_cache)  # before torch is imported
    die_with_parent(os.getppid())  # torchrun killed hard: the ranks go with it
    failed = False
    try:
        with process.measuring():
            result = _run_rank(request, process.recorded_in)
    except CaseSkipped as skip:
        result, failed = base_result(case, STATUS_SKIPPED, error=first_line(skip)), True
    except Exception as exc:
        result, failed = failed_from_exception(case, exc), True
    if int(os.environ.get("RANK", "0")) == 0:
        write_atomic(result_path, json.dumps(result.to_dict()))
    if failed:
        # a non-zero exit makes torchrun stop the other ranks at once, instead of
        # leaving them waiting in a collective for a rank that is gone
        sys.exit(1)


class RankReport(TypedDict):
    """What each rank sends every other (dist.all_gather_object): rank 0 records them."""

    throughput: float | None
    median_ms: float | None
    device: str
    energy: EnergyReading | None
    steps: int
    samples: int
    wall_s: float


@dataclass
class _Rank:
    """Where this rank runs, from torchrun's variables and the GPUs torch sees."""

    rank: int
    local_rank: int
    world: int
    device: str

    @property
    def on_gpu(self) -> bool:
        return self.device != "cpu"

    @classmethod
    def from_environment(cls, case: Case) -> _Rank:
        import torch

        rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
        on_gpu = case.device != "cpu" and torch.cuda.is_available()
        if case.device == "cuda" and not on_gpu:
            raise CaseError("--device cuda asked for, but torch sees no CUDA device")
        if on_gpu and local_rank >= torch.cuda.device_count():
            raise CaseError(
                f"--nproc asks for a process per GPU, but rank {local_rank} has no GPU: "
                f"torch sees {torch.cuda.device_count()} on this node"
            )
        device = f"cuda:{local_rank}" if on_gpu else "cpu"
        return cls(rank, local_rank, int(os.environ["WORLD_SIZE"]), device)


def _run_rank(request: WorkerRequest, recorded: Callable[[Details], Details]) -> Result:
    """This rank's set-up (its framework, threads and device), then its loop kind's
    runner (spec.loop_kinds: the ddp kind's, run_ddp_steps)."""
    import torch

    case, settings = request.case, request.settings
    backend = load_backend(case.framework)()
    threads = backend.configure_threads(case.threads, case.effective_interop_threads)
    where = _Rank.from_environment(case)
    if where.on_gpu:
        torch.cuda.set_device(where.local_rank)
    job = make_job(case, settings, where.device, request.outputs)
    process = ProcessSetup(threads=threads, version=backend.version, recorded=recorded)
    return cast(Runner, loop_kind(case).runner_function())(backend, job, settings, process)


def run_ddp_steps(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
    """The ddp kind's runner, in each rank: the step loop under DDP, the ranks agreeing
    on one step count; rank 0's Result holds the group's rate and every rank's figures
    (the other ranks' own Results are not written)."""
    import torch.distributed as dist

    where = _Rank.from_environment(job.case)
    dist.init_process_group("nccl" if where.on_gpu else "gloo")
    try:
        # each rank its own batch (seed + rank), the same initial weights (DDP broadcasts)
        job = replace(job, seed=job.seed + where.rank, world_size=where.world)
        setup_start = time.perf_counter()
        prepared = backend.prepare(job)
        setup_s = time.perf_counter() - setup_start
        mine, iterations, wall_s = _timed_together(job, prepared, settings, where, dist)
        # placeholders, each replaced by that rank's `own` (dist.all_gather_object)
        gathered = cast("list[RankReport]", [None] * where.world)
        stats = mine.latency
        own: RankReport = {
            "throughput": mine.samples_per_s(),
            "median_ms": stats.median if stats else None,
            "device": where.device,
            "energy": mine.reading.energy,
            "steps": len(mine.samples_s),
            "samples": len(mine.samples_s) * job.batch_size,
            "wall_s": wall_s,
        }
        dist.all_gather_object(gathered, own)
    finally:
        dist.destroy_process_group()
    if where.rank != 0:
        return result_from(job, mine, setup_s=setup_s, process=process)
    ddp = Ddp(
        world_size=where.world,
        backend="nccl" if where.on_gpu else "gloo",
        iterations_per_rank=iterations,
        per_rank_throughput=tuple(g["throughput"] for g in gathered),
        per_rank_median_ms=tuple(g["median_ms"] for g in gathered),
        per_rank_device=tuple(g["device"] for g in gathered),
        per_rank_wall_s=tuple(g["wall_s"] for g in gathered),
    )
    group = replace(
        mine,
        # this rank's usage and measured window; every rank's energy, in the details
        reading=replace(mine.reading, energy=None),
        details=replace(mine.details, ddp=ddp, energy=_total_energy(gathered)),
        # the group's rate; its compute and memory rates follow it
        rate=group_throughput(gathered, iterations),
    )
    return result_from(job, group, setup_s=setup_s, process=process)


def group_throughput(gathered: list[RankReport], agreed: int) -> float:
    """Samples per second of the whole group: every rank's samples over the slowest
    rank's measured wall time.

    Summing the ranks' own rates would credit each rank with its own time, so a
    rank that finished early would add samples the group had not finished yet.
    Every rank must have timed the agreed step count; one that did not means the
    ranks measured different work, and no group rate is honest.
    """
    steps = [g["steps"] for g in gathered]
    if any(count != agreed for count in steps):
        raise CaseError(f"the DDP ranks timed {steps} steps, not the {agreed} they agreed on")
    slowest_s = max(g["wall_s"] for g in gathered)
    if slowest_s <= 0:
        raise CaseError(f"a DDP rank measured no time ({slowest_s} s) for {agreed} steps")
    return sum(g["samples"] for g in gathered) / slowest_s


def _timed_together(
    job: Job, prepared: Prepared, settings: Settings, where: _Rank, dist: ModuleType
) -> tuple[Measurement, int, float]:
    """The rank's timed steps, after warm-up every rank the same step count: its
    measurement, the agreed count and the loop's wall time."""
    # each rank meters its own GPU; on a CPU the ranks share the package, so rank 0 alone
    instruments = Instruments(where.device, meter_energy=where.on_gpu or where.rank == 0)
    agreed: list[int] = []

    def settle(warmup_s: list[float]) -> StopRule:
        """After warm-up, every rank times the same step count, starting together."""
        agreed.append(_agreed_iterations(settings, warmup_s, dist, where.device))
        dist.barrier()
        prepared.step()  # untimed: absorbs the ranks' skew in leaving the barrier
        return StopRule(0.0, agreed[0], 0)

    def loop_start() -> None:
        if prepared.before_measure is not None:
            prepared.before_measure()  # peaks of the measured steps, not of compiling
        instruments.start()

    # at least one warm-up step: the agreed count is paced by the warm-up steps
    rule = StopRule(settings.min_time_s, settings.min_iters, max(1, settings.warmup_iters))
    with prepared.context():
        timing = run_timed(prepared.step, rule, on_loop_start=loop_start, settle=settle)
        reading = instruments.stop()
    measured = step_measurement(job, prepared, timing, reading)
    return measured, agreed[0], timing.loop_wall_s


def _total_energy(gathered: list[RankReport]) -> EnergyUse:
    """Every metered rank's joules over every rank's samples; unmeasurable if any rank was."""
    readings = [g["energy"] for g in gathered if g["energy"] is not None]
    samples = sum(g["samples"] for g in gathered)
    # a reading with neither joules nor a reason says "no reading", as to_details does
    reasons = [
        r.unmeasurable or "no reading" for r in readings if r.unmeasurable or r.joules is None
    ]
    if reasons or not readings:
        return EnergyUse(unmeasurable=reasons[0] if reasons else "no rank metered its device")
    total = EnergyReading(
        readings[0].source,
        sum(r.joules or 0.0 for r in readings),  # each a number here: a None is in `reasons`
        max(r.seconds or 0.0 for r in readings),
    )
    return total.to_details(samples)


if __name__ == "__main__":
    rank_main(sys.argv[1:])
