"""The interface every framework backend implements.

A backend turns a Job (a validated case with its defaults resolved) into a
step callable. The contract that keeps numbers honest: the step does one
full iteration and returns only when its results exist (device work
synchronised, outputs materialised); nothing else (conversion, imports,
allocation of inputs) happens inside it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

from dlbench.backends.serving_engine import GeneratorStreams, ServingEngine
from dlbench.errors import CaseError, ReferenceUnavailable, UntrustedModel, cause_summary
from dlbench.measure.pipeline import DevicePipeline
from dlbench.measure.power_regime import WindowQueue
from dlbench.reference.decoder import OwnReference
from dlbench.results.details import Details, Generation, Placement, Quantization
from dlbench.spec.case import Case
from dlbench.spec.case_inputs import CaseInputs
from dlbench.spec.record_dict import from_dict
from dlbench.spec.worker_request import CaseOutputs
from dlbench.untyped import JSONObject, JSONValue
from dlbench.workloads.base import WeightDict, Workload
from dlbench.workloads.inputs import case_arrays

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from dlbench.data.mnist import MnistData


@dataclass(frozen=True)
class Job:
    """A case as the worker will run it: defaults resolved for the actual device."""

    case: Case
    workload: Workload
    device: str
    batch_size: int
    params: dict[str, int]
    seed: int
    # ranks of a DistributedDataParallel case (the model is wrapped in DDP when > 1)
    world_size: int = 1
    # where the case's progress lines and files beside the run go (its request's)
    outputs: CaseOutputs = field(default_factory=CaseOutputs)

    def case_inputs(self, count: int | None = None, mode: str = "infer") -> CaseInputs:
        """What the case's inputs are made from: `count` samples (default: its batch)."""
        samples = self.batch_size if count is None else count
        return CaseInputs.of(self.case, self.params, self.seed, samples, mode)

    def inputs(self, count: int | None = None, mode: str = "infer") -> WeightDict:
        """A built-in workload's inputs as NumPy arrays by name: the one call every
        backend, check and loop makes them with (workloads.inputs.case_arrays)."""
        return case_arrays(self.case_inputs(count, mode))


@dataclass(frozen=True)
class Prepared:
    """What a backend hands back: the step, where it runs, and what it used."""

    step: Callable[[], object]
    device: str
    # Entered around warm-up and measurement (e.g. torch.inference_mode), once,
    # so no per-iteration cost is added by the harness.
    context: Callable[[], AbstractContextManager[object]] = nullcontext
    # The result's details as the backend knows them: where the work landed, an int8
    # model's quantizer, and the framework's own settings (`extra`); the worker adds
    # what it measured.
    details: Details = field(default_factory=Details)
    # Runs one more step, after measurement, and returns its output as a NumPy
    # array (or a model's outputs as a list: arrays, or a runtime's own sequence or
    # map, which the check passes over) for the check against the reference; None
    # where there is nothing to check (training steps, the null backend).
    fetch_output: Callable[[], np.ndarray | list[np.ndarray] | list[object]] | None = None
    # Samples per step when the backend, not the case, decides it (a user
    # model's first input dimension).
    batch_size: int | None = None
    # Training: runs one more step after measurement and returns its loss as a
    # float, so a diverged (NaN) training run fails instead of reporting speed.
    fetch_loss: Callable[[], float] | None = None
    # Run as the measured loop starts, after warm-up (GPU memory peaks reset there, so
    # they are of the measured steps, not of compilation or autotuning).
    before_measure: Callable[[], None] | None = None
    # Read right after measurement (GPU memory peaks); merged into the details' extra.
    after_measure: Callable[[], JSONObject] | None = None
    # The step split for the throughput mode (measure.pipeline) where the device runs
    # it asynchronously (a CUDA stream); None: the synchronised `step` is timed as is.
    pipeline: DevicePipeline | None = None
    # A step over the same model with request state of its own, for each query a
    # server (LoadGen's server scenario) serves at once; None: `step` may run in
    # several threads at once.
    new_stream: Callable[[], Callable[[], object]] | None = None
    # The prepared model on other inputs of the step's shape (a dict of NumPy
    # arrays by input name), returning its output(s) as NumPy: the int8 check
    # runs an evaluation batch through it. None where nothing checks it.
    infer: Callable[[dict[str, np.ndarray]], np.ndarray | list[np.ndarray]] | None = None


class EpochTrainer(ABC):
    """A time-to-train run prepared by a backend: the worker drives the epochs.

    Both methods return only when their work is done and its numbers are on
    the host, so the worker's clock around them measures finished work.
    """

    details: Details

    @abstractmethod
    def train_epoch(self, epoch: int) -> float:
        """One pass over the training set (epoch counts from 1); the mean loss."""

    @abstractmethod
    def evaluate(self) -> tuple[float, float]:
        """(mean test loss, test accuracy) with dropout off and no gradients."""


@dataclass(frozen=True)
class GenerationTrace:
    """One generation as the engine produced it: the tokens of every sequence, and the
    clock (time.perf_counter) at its start and as each output step's tokens existed."""

    tokens: list[list[int]]  # [batch][osl]
    started_s: float
    token_times_s: list[float]  # one per output step: every sequence's token of that step


class Generator(ABC):
    """Text generation prepared by a backend: the worker times whole generations.

    `generate` returns only when every token exists on the host; its clock readings
    are taken as each step's tokens become available to the caller, the moment a
    streaming client would see them. An engine that keeps the tokens on the device
    until the generation ends (torch's device loop) reads, instead, when each step
    ended there, and says so in its details' `token_clock`. A server
    (worker.token_serving) passes `on_first_token`, called as the first step's tokens
    exist, so that its client hears of them then, not when the generation ends.
    """

    details: Details
    device: str
    # The reference its tokens are held to where its weights are not the shared
    # checkpoint's (torch building its model from the seed on a GPU makes it there,
    # from the same weights); None: the shared reference (reference.decoder).
    own_reference: OwnReference | None = None

    @abstractmethod
    def generate(
        self, prompt_ids: np.ndarray, osl: int, on_first_token: Callable[[], None] | None = None
    ) -> GenerationTrace:
        """Greedy decoding of exactly `osl` tokens after each prompt ([batch, isl] ids)."""

    def after_generations(self) -> JSONObject:
        """Facts read once the timed generations are done (what torch.compile built),
        merged into the details' `extra`."""
        return {}

    def peak_device_memory_mb(self) -> float | None:
        """The most the device's own allocator held since the engine was prepared
        (weights, KV cache, activations): a GPU's. None where the memory is the host's,
        which the worker reads as the process's peak RSS."""
        return None

    def decode_kernel_s(self, prompt_ids: np.ndarray, osl: int) -> tuple[float | None, str | None]:
        """The device's kernel time over one generation's decode (its tokens after the
        first), where the engine profiles an asynchronous device (torch on a GPU), run
        after the timed generations; and why none where it could not. (None, None): the
        device is the host, whose steps have no gaps to judge."""
        return None, None


class Backend(ABC):
    name: ClassVar[str]
    # The server scenario serves `streams` queries at once. Where each call runs
    # its own thread team (torch's OpenMP, ONNX Runtime's callers), each stream
    # gets threads/streams threads; where the framework keeps one pool for all
    # concurrent calls (XLA's CPU client, OpenVINO's streams), it keeps them all.
    streams_share_threads: ClassVar[bool] = False

    @abstractmethod
    def version(self) -> str:
        """The framework's version string."""

    @abstractmethod
    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        """Set thread pools explicitly; return what the framework reports it uses."""

    @abstractmethod
    def resolve_device(self, requested: str) -> str:
        """The concrete device for `requested` ("auto" included), or CaseError."""

    @abstractmethod
    def prepare(self, job: Job) -> Prepared:
        """Build the model, load the reference weights, compile; return the step."""

    def prepare_training(self, job: Job, data: MnistData) -> EpochTrainer:
        """A time-to-train run over `data` (dlbench.data.mnist.MnistData)."""
        raise CaseError(f"{self.name} has no epoch training loop for {job.workload.name!r}")

    def prepare_generation(self, job: Job) -> Generator:
        """Load (converting once, cached) the workload's decoder for generation."""
        raise CaseError(f"{self.name} has no generation loop for {job.workload.name!r}")

    def window_queue(self, job: Job, prepared: Prepared) -> WindowQueue:
        """A ceiling case's kernels (`prepared`'s step, and for copy the memory
        ceiling's others) queued window by window and timed on the device."""
        raise CaseError(f"{self.name} has no ceiling windows (option ceiling) to run")

    def prepare_serving(self, job: Job, streams: int) -> ServingEngine:
        """The decoder serving `streams` requests at once. Without a scheduler of the
        engine's own, `streams` generators (each loaded apart) serve one request at a
        time each; an engine that batches continuously overrides this."""
        generators = [self.prepare_generation(job) for _ in range(streams)]
        first = generators[0]
        return GeneratorStreams(generators, first.device, first.details)


def exported_onnx(job: Job) -> tuple[Path, JSONObject]:
    """The workload's ONNX export (path, metadata); failing to make it fails the case."""
    from dlbench.reference.builtin import onnx_model

    try:
        return onnx_model(job.workload.name, job.params, job.seed)
    except ReferenceUnavailable as exc:
        raise CaseError(str(exc)) from None


def quantized(job: Job) -> tuple[Path, Quantization]:
    """The case's int8 model file and what its quantizer did (reference.quantized
    builds it in a process of its own, once, and caches it)."""
    from dataclasses import replace

    from dlbench.reference.quantized import quantized_model

    if job.case.user_model is not None:  # a user's model: its inputs decide their own batch
        path, meta = quantized_model(job.case, job.seed)
    else:
        resolved = replace(
            job.case, batch_size=job.batch_size, params=tuple(sorted(job.params.items()))
        )
        path, meta = quantized_model(resolved, job.seed)
    return path, from_dict(Quantization, meta)


def refused(name: str, why: str) -> UntrustedModel:
    """The error for a file that only unsafe loading reads, without --trust-model."""
    return UntrustedModel(
        f"refused to load {name}: {why}, which can run code from the file; "
        "pass --trust-model if you trust it"
    )


def load_failure(what: str, exc: BaseException) -> CaseError:
    """A CaseError for a framework that could not load or convert a model.

    The message is `what` and the line naming the framework's cause; the
    whole error goes to the result's error_detail.
    """
    return CaseError(f"{what}: {cause_summary(exc, limit=400)}", detail=str(exc))


def placement(reported_by: str, reported: str, kind: str) -> Placement:
    """Where the framework really put the work (the details' `placement`).

    Each backend reads its own framework's answer (a tensor's device, a
    placement string, the session's providers) and says whether that is a
    device kind ("cpu", "cuda", "mps"); the worker's placement check reads
    this record and nothing else.
    """
    return Placement(by=reported_by, reported=reported, kind=kind)


def input_shapes(arrays: Mapping[str, np.ndarray]) -> dict[str, list[int]]:
    """A user model's resolved input shapes, as recorded in result details."""
    return {name: list(array.shape) for name, array in arrays.items()}


def string_inputs(arrays: Mapping[str, np.ndarray]) -> dict[str, list[str]]:
    """`{"string_inputs": names}` for a user model's details where it is fed strings (the
    output check then says why no framework could check it), else nothing."""
    names = [name for name, array in arrays.items() if getattr(array, "dtype", None) is not None
             and array.dtype.kind in "US"]  # fmt: skip
    return {"string_inputs": names} if names else {}


def leading_dim(arrays: Mapping[str, np.ndarray]) -> int:
    """Samples per step of a user model: the first input's first dimension."""
    first = next(iter(arrays.values()), None)
    shape: tuple[int, ...] = getattr(first, "shape", ())
    return int(shape[0]) if len(shape) else 1


class CpuEngineBackend(Backend):
    """An LLM engine dlbench runs on its CPU only, for text generation only: its thread
    count is kept here and set when the engine loads the model."""

    cpu_part: ClassVar[str] = "CPU"  # how the error names what it runs on
    inter_op: ClassVar[int | str] = 1  # what it reports of inter-op threads

    def __init__(self) -> None:
        self.threads = 1

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        self.threads = intra_op
        return {"intra_op": intra_op, "inter_op": self.inter_op}

    def resolve_device(self, requested: str) -> str:
        if requested in ("auto", "cpu"):
            return "cpu"
        raise CaseError(
            f"device {requested!r} asked for, but dlbench runs {self.name} on its "
            f"{self.cpu_part} only; use --device cpu"
        )

    def prepare(self, job: Job) -> Prepared:
        raise CaseError(f"{self.name} runs the text-generation workloads only")


# Bytes per value of the KV cache precisions engines report
KV_CACHE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "u8": 1}


def kv_cache_record(
    job: Job, dtype: str, conversion: Mapping[str, JSONValue] | None = None
) -> Generation:
    """A generation case's record as its backend knows it before any generation: the
    KV cache of every position at the engine's cache precision, and the conversion
    (reference.decoder.converted's record)."""
    from dlbench.workloads.decoder import DecoderWorkload, kv_cache_bytes

    assert isinstance(job.workload, DecoderWorkload), "a generation case's workload"
    tokens = job.params["isl"] + job.params["osl"]
    size = kv_cache_bytes(job.workload.shape, job.batch_size, tokens, KV_CACHE_BYTES[dtype])
    record = Generation(kv_cache_mb=size / 2**20, kv_cache_dtype=dtype)
    if conversion is None:
        return record
    return replace(record, converter=conversion["converter"], convert_s=conversion["convert_s"],
                   converted_now=conversion["made_now"])  # fmt: skip


def device_kind(device: str) -> str:
    """ "cpu" or "gpu", for choosing workload defaults."""
    return "cpu" if device == "cpu" else "gpu"
