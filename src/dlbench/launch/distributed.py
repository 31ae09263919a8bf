"""DistributedDataParallel cases: launched by torchrun, measured on every rank.

`--nproc N` starts `python -m torch.distributed.run` (torchrun) with N
processes per node, standalone by default; multi-node runs pass torchrun's
own rendezvous options through `--torchrun`, since dlbench does not invent a
launcher. Each rank builds the same model, wraps it in DDP (NCCL on GPUs,
gloo on CPUs) and times the same number of steps: the ranks agree on it
before timing (a rank that stopped early would leave the others waiting in
an all-reduce). Rank 0 gathers the per-rank rates and writes the Result;
aggregate throughput is their sum. The parent then divides it by N times
the 1-process run of the same case: the scaling efficiency T_N / (N x T_1).
"""

from __future__ import annotations

import functools
import json
import math
import os
import select
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from dlbench.atomic import write_atomic
from dlbench.config import Case, Settings
from dlbench.launch.worker import die_with_parent
from dlbench.results.records import Result, Run

RANK_MODULE = "dlbench.launch.distributed"


def torchrun_command(case: Case, case_file: Path, settings_file: Path, result: Path) -> list[str]:
    launch = list(case.torchrun_args) or ["--standalone"]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={case.nproc}",
        *launch,
        "-m",
        RANK_MODULE,
        str(case_file),
        str(settings_file),
        str(result),
    ]


class TorchrunProcess:
    """torchrun as a subprocess, with the part of multiprocessing.Process the runner uses."""

    def __init__(self, case: Case, settings: Settings, scratch: Path, log: TextIO) -> None:
        case_file, settings_file = scratch / "case.json", scratch / "settings.json"
        case_file.write_text(json.dumps(case.to_dict()), encoding="utf-8")
        settings_file.write_text(json.dumps(settings.to_dict()), encoding="utf-8")
        self.command = torchrun_command(case, case_file, settings_file, scratch / "result.json")
        self._log = log
        self._popen: subprocess.Popen[bytes] | None = None
        self._pidfd: int | None = None

    def start(self) -> None:
        self._popen = subprocess.Popen(
            self.command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group (torchrun's ranks get sessions of their own)
            # in the child before exec: torchrun dies with dlbench
            preexec_fn=functools.partial(die_with_parent, os.getpid()),
        )
        if hasattr(os, "pidfd_open"):
            # a descriptor that becomes readable when torchrun exits: join() can
            # sleep in select() instead of Popen.wait's polling loop
            self._pidfd = os.pidfd_open(self._popen.pid)

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll() if self._popen is not None else None

    def join(self, timeout: float | None = None) -> None:
        if self._popen is None:
            return
        if self._pidfd is not None and self._popen.poll() is None:
            select.select([self._pidfd], [], [], timeout)  # sleeps until exit or timeout
            self._popen.poll()
            return
        try:
            self._popen.wait(timeout)  # no pidfd (not Linux): Popen's own wait
        except subprocess.TimeoutExpired:
            return

    def is_alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def kill(self) -> None:
        """torchrun starts each rank in a session of its own, so killing torchrun's
        group misses them: kill every descendant first, then torchrun."""
        if self._popen is None:
            return
        import psutil

        try:
            ranks = psutil.Process(self._popen.pid).children(recursive=True)
        except psutil.Error:
            ranks = []
        for rank in ranks:
            try:
                rank.kill()
            except psutil.Error:
                continue  # already gone
        if self.is_alive():
            self._popen.kill()
        self._popen.wait()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def attach_scaling(result: Result, run: Run) -> None:
    """Scaling efficiency of an N-process result against the run's 1-process result."""
    ddp = result.details.get("ddp") if isinstance(result.details, dict) else None
    if result.nproc <= 1 or not isinstance(ddp, dict) or not result.throughput:
        return
    key = result.compare_key()[:-1]
    single = next(
        (
            r
            for r in run.results
            if r.nproc == 1 and r.ok and r.throughput and r.compare_key()[:-1] == key
        ),
        None,
    )
    if single is None:
        ddp["scaling_note"] = "no 1-process result of this case in the run"
        return
    world = int(ddp.get("world_size", result.nproc))
    ddp["baseline_throughput"] = single.throughput
    ddp["scaling_efficiency"] = result.throughput / (world * single.throughput)  # type: ignore[operator]


# ---- one rank (runs under torchrun) ---------------------------------------


def _agreed_iterations(settings: Settings, warmup_s: list[float], dist: Any, device: str) -> int:
    """Steps every rank times: enough for --min-time at the slowest rank's pace."""
    import torch

    # on the rank's device: NCCL reduces CUDA tensors only (gloo takes CPU ones)
    pace = torch.tensor([max(warmup_s) if warmup_s else 0.0], dtype=torch.float64, device=device)
    dist.all_reduce(pace, op=dist.ReduceOp.MAX)
    step_s = float(pace.item())
    wanted = math.ceil(settings.min_time_s / step_s) if step_s > 0 else settings.min_iters
    return max(settings.min_iters, min(wanted, 100_000))


def rank_main(argv: list[str]) -> None:
    """Entry point of each rank: measure under DDP; rank 0 writes the Result."""
    case = Case.from_dict(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    settings = Settings.from_dict(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
    result_path = Path(argv[2])
    from dlbench.launch.worker import THREAD_VARS, block_other_frameworks

    for name in THREAD_VARS:  # before torch is imported
        os.environ[name] = str(case.threads)
    block_other_frameworks("torch")
    die_with_parent(os.getppid())  # torchrun killed hard: the ranks go with it
    from dlbench.errors import CaseSkipped
    from dlbench.launch.worker import base_result, failed_from_exception, first_line
    from dlbench.results.records import STATUS_SKIPPED

    failed = False
    try:
        result = _measure_rank(case, settings)
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
    import time

    import torch
    import torch.distributed as dist

    from dlbench.backends.torch.backend import TorchBackend
    from dlbench.launch.worker import frameworks_in_process, make_job, measured_result
    from dlbench.measure.monitor import ProcessMonitor
    from dlbench.measure.timer import StopRule, run_timed

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    backend = TorchBackend()
    threads = backend.configure_threads(case.threads, case.effective_interop_threads)
    on_gpu = case.device != "cpu" and torch.cuda.is_available()
    if case.device == "cuda" and not on_gpu:
        from dlbench.errors import CaseError

        raise CaseError("--device cuda asked for, but torch sees no CUDA device")
    if on_gpu and local_rank >= torch.cuda.device_count():
        from dlbench.errors import CaseError

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
        with prepared.context():
            first = time.perf_counter()
            prepared.step()
            first_s = time.perf_counter() - first
            warmup = []
            for _ in range(max(1, settings.warmup_iters)):
                started = time.perf_counter()
                prepared.step()
                warmup.append(time.perf_counter() - started)
            iterations = _agreed_iterations(settings, warmup, dist, device)
            dist.barrier()
            monitor = ProcessMonitor()
            rule = StopRule(0.0, iterations, 0)  # the agreed count, on every rank
            timing = run_timed(prepared.step, rule, on_loop_start=monitor.start)
            usage = monitor.stop()
        timing.first_call_s, timing.warmup_s = first_s, warmup
        mine = measured_result(job, prepared, timing, usage)
        gathered: list[Any] = [None] * world
        median_ms = mine.latency_ms.median if mine.latency_ms else None
        own = {"throughput": mine.throughput, "median_ms": median_ms, "device": device}
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
    mine.details = {
        "frameworks_in_process": frameworks_in_process(),
        "threads": threads,
        "ddp": {
            "world_size": world,
            "backend": "nccl" if on_gpu else "gloo",
            "iterations_per_rank": iterations,
            "per_rank_throughput": [g["throughput"] for g in gathered],
            "per_rank_median_ms": [g["median_ms"] for g in gathered],
            "per_rank_device": [g["device"] for g in gathered],
        },
        "measured_wall": [usage.wall_start_epoch_s, usage.wall_end_epoch_s],
        **prepared.details,
        **mine.details,
    }
    return mine


if __name__ == "__main__":
    rank_main(sys.argv[1:])
