"""What a case holds in memory, against what this machine has: checked before a run.

A --param or --batch-size that no machine holds, or an --input-data file
whose compressed zeros expand to gigabytes, would start a worker that swaps
the machine to a halt or dies mid-allocation, after the run is stored. So
the parent compares each case's need with the memory available first
(plan.validate, and launch.preflight for a user model's batch), and refuses
with one line naming the size, the memory, and what to lower.

A need is a lower bound: a workload's weights and one batch of inputs
(workloads.base.Workload.memory_bytes), times a generation server's streams
where each holds its own, an --input-data file's arrays from their headers,
the elements of --input shapes. A case refused here cannot
run; one that passes may still run out of memory, and then fails as a case.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from dlbench.errors import UserError
from dlbench.spec.case import Case
from dlbench.spec.case_parts import TimeToTrain, UserModel
from dlbench.spec.registry import precision_info, seeded_on_device
from dlbench.workloads import get_workload

# What a worker holds besides the case's arrays, at the least: the interpreter,
# NumPy and the lightest framework (ONNX Runtime or OpenVINO: ~50 MB resident
# after import; torch ~220 MB, TensorFlow ~740 MB). The lightest, so that no
# case that fits is refused.
WORKER_BYTES = 128 * 2**20
UNITS = (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


@dataclass(frozen=True)
class Need:
    """The least memory a case needs, what asks for it, and the options that lower it."""

    nbytes: float
    what: str
    lower: str


def available_bytes() -> int:
    """Memory usable without swapping: free plus what the kernel can reclaim (psutil)."""
    return int(psutil.virtual_memory().available)


def size_text(nbytes: float) -> str:
    return next(
        (f"{nbytes / scale:.1f} {unit}" for unit, scale in UNITS if nbytes >= scale),
        f"{int(nbytes)} bytes",
    )


# False while planning cases that run on other machines (a fleet's nodes): this
# machine's memory says nothing of theirs, and each node's own run checks it.
_CHECK_HERE: ContextVar[bool] = ContextVar("check_memory_here", default=True)


@contextlib.contextmanager
def memory_checked_elsewhere() -> Iterator[None]:
    """Plan cases without holding them to this machine's memory."""
    token = _CHECK_HERE.set(False)
    try:
        yield
    finally:
        _CHECK_HERE.reset(token)


def require_room(need: Need) -> None:
    """UserError where the need and a worker do not fit in the memory available."""
    if not _CHECK_HERE.get():
        return
    available = available_bytes()
    if need.nbytes + WORKER_BYTES > available:
        raise UserError(
            f"{need.what} needs at least {size_text(need.nbytes)} of memory (and its worker "
            f"{size_text(WORKER_BYTES)}); this machine has {size_text(available)} available: "
            f"lower {need.lower}"
        )


def _reads_data_files(case: Case) -> bool:
    """A time-to-train case reading MNIST's files (--data-dir), not the synthetic set."""
    return isinstance(case.load, TimeToTrain) and case.load.data_dir is not None


def check_case_memory(case: Case) -> None:
    """Refuse (UserError) a validated case whose sizes cannot fit in this machine's memory."""
    user = case.user_model
    require_room(user_model_need(user) if user is not None else workload_need(case))


def workload_need(case: Case, served: bool = False) -> Need:
    """A built-in workload's weights and batch at the case's parameters. Where the
    device is `auto` either default applies, so the smaller need is the certain one.
    `served`: a generation server's (it runs on the shared checkpoint)."""
    workload = get_workload(case.workload)
    devices = {"cpu": ("cpu",), "auto": ("cpu", "cuda")}.get(case.device, ("cuda",))
    given = dict(case.params)
    value_bytes = precision_info(case.precision).value_bytes
    options = []
    for device in devices:
        params = workload.resolve_params(device, given)
        batch = case.batch_size or workload.default_batch_size(device, params)
        served_here = served or case.driven_by_loadgen
        if workload.generative and seeded_on_device(case.framework, device, served_here):
            # its weights, cache and reference live on the GPU: the host holds prompts
            nbytes = batch * workload.input_bytes_per_sample(params, case.mode)
        else:
            nbytes = workload.memory_bytes(
                batch, params, case.mode, value_bytes, data_files=_reads_data_files(case)
            )
        options.append((nbytes, batch, params))
    nbytes, batch, params = min(options, key=lambda option: option[0])
    shown = ", ".join(f"{key}={value}" for key, value in params.items())
    knobs = [f"--param {key}" for key in sorted(given or params)] + ["--batch-size"]
    return Need(
        nbytes,
        f"{case.workload} {case.mode} at batch {batch}" + (f" with {shown}" if shown else ""),
        " or ".join(knobs),
    )


def generation_server_need(case: Case, streams: int, one_pipeline: bool) -> Need:
    """A generation server's `streams`: one model holding a KV cache per sequence where
    the engine batches them (continuous batching), else a model and its cache per
    stream (a generator each, serving one request at a time)."""
    if one_pipeline:
        batched = workload_need(replace(case, batch_size=streams), served=True)
        return Need(
            batched.nbytes,
            f"{case.workload} served by one pipeline of {streams} sequences",
            "--streams or --param isl/osl",
        )
    one = workload_need(replace(case, batch_size=1), served=True)
    return Need(
        streams * one.nbytes,
        f"{case.workload} served by {streams} streams (a model and its cache each, "
        f"{size_text(one.nbytes)})",
        "--streams or --param isl/osl",
    )


def input_data_need(path: Path) -> Need:
    """An --input-data file's arrays once loaded, read from their headers alone."""
    from dlbench.workloads.input_data import read_headers

    headers = read_headers(path)
    largest = max(headers, key=lambda header: header.nbytes)
    return Need(
        sum(header.nbytes for header in headers),
        f"--input-data {path.name} (largest array: {largest.text()})",
        "the --input-data file's arrays",
    )


def user_model_need(user: UserModel) -> Need:
    """A user model's --input-data arrays and the --input shapes the file does not give.

    An --input without a dtype is counted at one byte per element (the model's
    own dtype is not known before it loads): the least it can be.
    """
    import numpy as np

    from dlbench.workloads.input_data import read_headers

    needs, fed = [], set()
    if user.input_data is not None:
        needs.append(input_data_need(Path(user.input_data)))
        fed = {header.name for header in read_headers(Path(user.input_data))}
    for name, spec in user.inputs:
        if name in fed or "" in fed:  # the file's array is fed (an .npy: the one input)
            continue
        dims, _, dtype = spec.partition(":")
        itemsize = np.dtype(dtype).itemsize if dtype else 1
        count = math.prod(int(dim) for dim in dims.split("x"))
        needs.append(Need(count * itemsize, f"--input {name}:{dims}", "the --input shapes"))
    return Need(
        sum(need.nbytes for need in needs),
        " and ".join(need.what for need in needs) or "the model's inputs",
        " or ".join(dict.fromkeys(need.lower for need in needs)) or "--batch-size",
    )
