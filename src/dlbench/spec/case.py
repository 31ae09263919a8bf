"""What is measured (Case) and how (Settings): frozen records.

Validation (plan.validate) happens at the edge, against the registry and the
workloads; these records import nothing above them.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

MODES = ("infer", "train")
# Named after MLPerf's: one request at a time (latency) vs large batches (throughput).
SCENARIOS = ("single-stream", "offline")
# fp32 is strict IEEE fp32 (TF32 tensor cores off); tf32 lets CUDA matmuls and
# convolutions use TF32; amp-* is torch.autocast to that type (with a gradient
# scaler for fp16 training), the "automatic mixed precision" of the articles.
PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16")
DEVICE_PATTERN = re.compile(r"cpu|auto|mps|cuda(:\d+)?")
DEVICE_HELP = "cpu, cuda, cuda:N, mps (Apple, torch) or auto"
# Host-to-device copy of the inputs: before the clock (default) or in every step.
TRANSFERS = ("outside", "inside")
# Bounds that keep values sane and below what the OS and frameworks accept.
MAX_MIN_TIME_S = 86_400.0
MAX_TIMEOUT_S = 7 * 86_400.0
MAX_SEED = 2**32 - 1
MAX_THREADS = 1024
MAX_BATCH = 2**31 - 1
MAX_NPROC = 1024
# Options only the null backend understands: fault injection and a fixed
# per-step sleep, so the runner's failure handling is tested for real.
NULL_OPTIONS = {
    "fault": ("raise", "abort", "segfault", "kill", "hang", "exit"),
    "sleep_ms": None,
}


def available_cpus() -> int:
    """CPUs this process may run on (affinity-aware, unlike os.cpu_count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Case:
    """The identity of one measurement; equal cases measure the same thing.

    `batch_size` None means "the workload's default for the device the case
    lands on", which only the worker knows (for `auto`); the Result records
    the value actually used.
    """

    workload: str
    framework: str
    compile: str
    mode: str = "infer"
    device: str = "auto"
    batch_size: int | None = None
    precision: str = "fp32"
    threads: int = field(default_factory=available_cpus)
    interop_threads: int | None = None
    params: tuple[tuple[str, int], ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    scenario: str | None = None
    # user-model cases: the file, --input specs (name -> "8x3x32x32:dtype"), trust
    model: str | None = None
    inputs: tuple[tuple[str, str], ...] = ()
    trust_model: bool = False
    # time-to-train cases (epoch workloads): stop early at this test accuracy,
    # and read MNIST's IDX files from this folder instead of the synthetic set
    target_accuracy: float | None = None
    data_dir: str | None = None
    # DistributedDataParallel training: processes launched by torchrun (one per
    # GPU; gloo processes on a CPU), and torchrun options for multi-node runs
    nproc: int = 1
    torchrun_args: tuple[str, ...] = ()
    transfer: str = "outside"

    def effective_batch_size(self, default: int) -> int:
        """The batch the worker uses: single-stream means one sample per request."""
        if self.batch_size is not None:
            return self.batch_size
        return 1 if self.scenario == "single-stream" else default

    def effective_scenario(self, batch_size: int) -> str:
        """Given, or derived from the batch: 1 is single-stream, more is offline."""
        if self.scenario is not None:
            return self.scenario
        return "single-stream" if batch_size == 1 else "offline"

    @property
    def effective_interop_threads(self) -> int:
        """Inter-op threads default to the intra-op count, as the frameworks' own defaults do."""
        return self.interop_threads if self.interop_threads is not None else self.threads

    def label(self) -> str:
        """Short human-readable name used in progress output and errors."""
        batch = "default" if self.batch_size is None else str(self.batch_size)
        extra = "".join(f" {k}={v}" for k, v in self.params)
        extra += f" {self.scenario}" if self.scenario else ""
        extra += f" {self.precision}" if self.precision != "fp32" else ""
        extra += f" target={self.target_accuracy:g}" if self.target_accuracy else ""
        extra += f" x{self.nproc} procs" if self.nproc > 1 else ""
        return (
            f"{self.workload}/{self.framework}[{self.compile}] {self.mode} "
            f"bs={batch} {self.device}{extra}"
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["params"] = dict(self.params)
        data["options"] = dict(self.options)
        data["inputs"] = dict(self.inputs)
        data["torchrun_args"] = list(self.torchrun_args)  # as JSON gives it back
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Case:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["params"] = tuple(sorted(dict(values.get("params") or {}).items()))
        values["options"] = tuple(sorted(dict(values.get("options") or {}).items()))
        values["inputs"] = tuple(sorted(dict(values.get("inputs") or {}).items()))
        values["torchrun_args"] = tuple(values.get("torchrun_args") or ())
        return cls(**values)


@dataclass(frozen=True)
class Settings:
    """How every case of a run is measured (the stop rule and the guards)."""

    min_time_s: float = 1.0
    min_iters: int = 10
    warmup_iters: int = 3
    timeout_s: float = 600.0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
