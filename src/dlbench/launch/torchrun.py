"""DistributedDataParallel cases: the parent's side (launch torchrun, score the scaling).

`--nproc N` starts `python -m torch.distributed.run` (torchrun) with N
processes per node, standalone by default; multi-node runs pass torchrun's
own rendezvous options through `--torchrun`, since dlbench does not invent a
launcher. Each rank builds the same model, wraps it in DDP (NCCL on GPUs,
gloo on CPUs) and times the same number of steps: the ranks agree on it
before timing (a rank that stopped early would leave the others waiting in
an all-reduce); that side is dlbench.worker.ddp_rank. Rank 0 gathers the
ranks' samples and wall times and writes the Result: the group's throughput is
every rank's samples over the slowest rank's measured wall time.
Its scaling efficiency, T_N / (N x T_1) against the 1-process run of the same
case, is computed when the run is read (results.scaling).
"""

from __future__ import annotations

import functools
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

from dlbench.launch.worker_entry import NUMPY_AT_ONE_THREAD
from dlbench.lifeline import die_with_parent
from dlbench.spec.case import Case
from dlbench.spec.case_parts import DdpLaunch
from dlbench.spec.loop_kinds import case_load
from dlbench.spec.worker_request import WorkerRequest

# Each rank runs this module (worker side), under torchrun.
RANK_MODULE = "dlbench.worker.ddp_rank"


# Beside the rank's result: the case's request, which every rank reads (one document).
REQUEST_FILE = "request.json"


def torchrun_command(case: Case, request_file: Path) -> list[str]:
    ddp = case_load(case, DdpLaunch)
    launch = list(ddp.torchrun_args) or ["--standalone"]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={ddp.nproc}",
        *launch,
        "-m",
        RANK_MODULE,
        str(request_file),
    ]


class TorchrunProcess:
    """torchrun as a subprocess, with the part of multiprocessing.Process the runner uses."""

    def __init__(self, request: WorkerRequest, log: BinaryIO) -> None:
        request_file = request.result_path.with_name(REQUEST_FILE)
        request_file.write_text(request.to_json(), encoding="utf-8")
        self.command = torchrun_command(request.case, request_file)
        self._log = log
        self._popen: subprocess.Popen[bytes] | None = None
        self._pidfd: int | None = None

    def start(self) -> None:
        self._popen = subprocess.Popen(
            self.command,
            env={**os.environ, **NUMPY_AT_ONE_THREAD},  # each rank sets its case's threads
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
    def sentinel(self) -> int | None:
        """A descriptor that becomes readable when torchrun exits (None without pidfd)."""
        return self._pidfd

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
