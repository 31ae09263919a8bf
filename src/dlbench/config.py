"""What is measured (Case) and how (Settings): frozen, validated records.

Validation happens here, at the edge, and has no side effects: it reads the
registry tables and nothing else. Every error names the field, the bad value
and what is allowed, and is raised as UserError (exit code 2 in the CLI).
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from dlbench.errors import UserError
from dlbench.measure.timer import MAX_ITERS  # also the most --min-iters can ask
from dlbench.registry import FRAMEWORKS, framework_info
from dlbench.workloads import get_workload

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


def validate_settings(settings: Settings) -> Settings:
    """Reject stop rules that could never finish, overflow, or make no sense."""
    _require_number("min-time", settings.min_time_s, 0, MAX_MIN_TIME_S)
    _require_int("min-iters", settings.min_iters, 1, MAX_ITERS)
    _require_int("warmup", settings.warmup_iters, 0, MAX_ITERS)
    _require_number("timeout", settings.timeout_s, 0, MAX_TIMEOUT_S)
    if settings.timeout_s == 0:
        raise UserError("invalid timeout 0; expected a number of seconds > 0")
    _require_int("seed", settings.seed, 0, MAX_SEED)
    return settings


def validate_case(case: Case) -> Case:
    """Check every field against the registry; return the case unchanged."""
    info = framework_info(case.framework)
    workload = get_workload(case.workload)
    if case.compile not in info.compile_modes:
        raise UserError(
            f"framework {case.framework!r} has no compile mode {case.compile!r}; "
            f"allowed: {', '.join(info.compile_modes)}"
        )
    allowed_compiles = workload.compile_modes_on(case.framework, info.compile_modes)
    if case.compile not in allowed_compiles:
        raise UserError(
            f"workload {case.workload!r} on {case.framework!r} runs in compile modes "
            f"{', '.join(allowed_compiles)}, not {case.compile!r}"
        )
    if case.mode not in workload.modes:
        raise UserError(
            f"workload {case.workload!r} does not support mode {case.mode!r}; "
            f"allowed: {', '.join(workload.modes)}"
        )
    if not info.supports(case.workload, case.mode):
        where = [n for n, fw in FRAMEWORKS.items() if fw.supports(case.workload, case.mode)]
        raise UserError(
            f"workload {case.workload!r} in mode {case.mode!r} is not supported on "
            f"{case.framework!r}; supported on: {', '.join(where)} (see dlbench list)"
        )
    _validate_scenario(case)
    if not isinstance(case.device, str) or not DEVICE_PATTERN.fullmatch(case.device):
        raise UserError(f"unknown device {case.device!r}; allowed: {DEVICE_HELP}")
    if case.batch_size is not None:
        _require_int("batch size", case.batch_size, 1, MAX_BATCH)
    if case.precision not in PRECISIONS:
        raise UserError(f"unknown precision {case.precision!r}; allowed: {', '.join(PRECISIONS)}")
    if case.precision not in info.precisions:
        raise UserError(
            f"precision {case.precision!r} is not available on {case.framework!r}; "
            f"allowed there: {', '.join(info.precisions)}"
        )
    _require_int("threads", case.threads, 1, MAX_THREADS)
    if case.interop_threads is not None:
        _require_int("interop threads", case.interop_threads, 1, MAX_THREADS)
    workload.validate_params(dict(case.params))
    _validate_options(case)
    _validate_model(case)
    _validate_training_run(case, workload.epoch_based)
    _validate_distributed(case, workload.epoch_based)
    if case.transfer not in TRANSFERS:
        raise UserError(f"unknown transfer {case.transfer!r}; allowed: {', '.join(TRANSFERS)}")
    if case.transfer == "inside" and (
        case.framework != "torch"
        or workload.epoch_based
        or case.model is not None
        or case.workload == "h2d"  # already nothing but the copy
    ):
        raise UserError(
            "--transfer inside (the input copy in the timed step) is implemented for torch "
            f"step workloads, not {case.workload} on {case.framework}"
        )
    return case


def _validate_distributed(case: Case, epoch_based: bool) -> None:
    """--nproc N: torch training steps under DistributedDataParallel, launched by torchrun."""
    _require_int("nproc", case.nproc, 1, MAX_NPROC)
    if not all(isinstance(arg, str) for arg in case.torchrun_args):
        raise UserError("torchrun arguments must be strings")
    if case.nproc == 1:
        if case.torchrun_args:
            raise UserError("--torchrun options go with --nproc N (N > 1)")
        return
    if any(arg.replace("_", "-").startswith("--nproc-per-node") for arg in case.torchrun_args):
        raise UserError(
            "--torchrun must not set --nproc-per-node: --nproc is the processes per node"
        )
    if case.framework != "torch" or case.mode != "train" or epoch_based:
        raise UserError(
            f"--nproc {case.nproc} runs torch training steps under DistributedDataParallel; "
            f"not {case.workload} {case.mode} on {case.framework}"
        )
    if case.compile == "script":
        raise UserError("--nproc: DistributedDataParallel runs eager or compile, not script")
    if case.device not in ("cpu", "auto", "cuda"):
        raise UserError(
            f"--nproc {case.nproc} places one process per GPU (cuda:LOCAL_RANK) or on the CPU; "
            f"give --device cuda, cpu or auto, not {case.device}"
        )


def _validate_training_run(case: Case, epoch_based: bool) -> None:
    """--target-accuracy and --data-dir belong to time-to-train workloads only."""
    if not epoch_based:
        if case.target_accuracy is not None or case.data_dir is not None:
            raise UserError(
                f"--target-accuracy and --data-dir are for time-to-train workloads "
                f"(mnist-train), not {case.workload!r}"
            )
        return
    if case.target_accuracy is not None:
        _require_number("target accuracy", case.target_accuracy, 0.0, 1.0)
        if case.target_accuracy == 0:
            raise UserError("invalid target accuracy 0; expected a fraction in (0, 1], e.g. 0.98")
    if case.data_dir is not None:
        problem = _mnist_dir_problem(case.data_dir)
        if problem:
            raise UserError(f"--data-dir: {problem}")


@functools.lru_cache(maxsize=8)
def _mnist_dir_problem(data_dir: str) -> str | None:
    """What is wrong with an MNIST folder, read once per folder (every case of a
    suite names the same one, and checking means decompressing all four files)."""
    from pathlib import Path

    from dlbench.data.mnist import check_mnist_dir
    from dlbench.errors import MnistFileError

    try:
        check_mnist_dir(Path(data_dir))
    except MnistFileError as exc:
        return str(exc)
    return None


def _validate_model(case: Case) -> None:
    if (case.workload == "user-model") != (case.model is not None):
        raise UserError("workload user-model goes with --model FILE, and --model only with it")
    if case.model is None:
        return
    from pathlib import Path

    from dlbench.workloads.user_model import frameworks_for

    path = Path(case.model)
    if not path.exists():
        raise UserError(f"--model {case.model}: no such file or directory")
    allowed = frameworks_for(path)
    if case.framework not in allowed:
        raise UserError(f"--model {path.name} runs on {', '.join(allowed)}, not {case.framework!r}")


def _validate_scenario(case: Case) -> None:
    if case.scenario is None:
        return
    if case.scenario not in SCENARIOS:
        raise UserError(f"unknown scenario {case.scenario!r}; allowed: {', '.join(SCENARIOS)}")
    if case.scenario == "single-stream" and case.batch_size not in (None, 1):
        raise UserError(
            f"scenario single-stream sends one sample per request; batch size "
            f"{case.batch_size} belongs to the offline scenario"
        )


def _validate_options(case: Case) -> None:
    if case.options and case.framework != "null":
        raise UserError(
            f"options {dict(case.options)} are only for the null backend (harness tests), "
            f"not {case.framework!r}"
        )
    for key, value in case.options:
        if key not in NULL_OPTIONS:
            raise UserError(
                f"unknown null-backend option {key!r}; allowed: {', '.join(NULL_OPTIONS)}"
            )
        allowed = NULL_OPTIONS[key]
        if allowed is not None and value not in allowed:
            raise UserError(f"null option {key}={value!r}; allowed: {', '.join(allowed)}")
        if allowed is None and not _is_non_negative_number(value):
            raise UserError(f"null option {key}={value!r}; expected a number >= 0")


def _is_non_negative_number(value: str) -> bool:
    try:
        return float(value) >= 0
    except ValueError:
        return False


def _require_int(what: str, value: object, low: int, high: int) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    _require(ok, what, value, f"an integer from {low} to {high}")


def _require_number(what: str, value: object, low: float, high: float) -> None:
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )
    _require(ok, what, value, f"a number from {low:g} to {high:g}")


def _require(ok: bool, what: str, value: object, allowed: str) -> None:
    if not ok:
        raise UserError(f"invalid {what} {value!r}; expected {allowed}")
