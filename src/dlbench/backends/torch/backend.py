"""The PyTorch backend: eager, torch.compile and TorchScript; inference and training."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch

from dlbench.backends.base import (
    Backend,
    EpochTrainer,
    Generator,
    Job,
    Prepared,
    input_shapes,
    kv_cache_record,
    leading_dim,
)
from dlbench.backends.placement import placement_of_each
from dlbench.backends.serving_engine import ServingEngine
from dlbench.backends.torch.export import aoti_runner
from dlbench.backends.torch.models import (
    KERNELS,
    LOSSES,
    OPTIMIZERS,
    reference_module,
    training_module,
)
from dlbench.backends.torch.pipeline import CudaEventPipeline
from dlbench.backends.torch.precision import AUTOCAST_DTYPES, PrecisionPlan, precision_plan
from dlbench.backends.torch.quantized import quantized_model
from dlbench.backends.torch.user_model import call_arguments, load_torch_model
from dlbench.errors import CaseError, CaseSkipped
from dlbench.measure.power_regime import WindowQueue
from dlbench.results.details import Details, Placement, Quantization
from dlbench.spec.registry import QUANTIZED_PRECISIONS, precision_info
from dlbench.untyped import JSONObject
from dlbench.workloads.model_format import model_format
from dlbench.workloads.user_model import model_inputs

if TYPE_CHECKING:
    import numpy as np

    from dlbench.data.mnist import MnistData

T = TypeVar("T")


class TorchBackend(Backend):
    name = "torch"
    # set when an `export` case builds its AOTInductor package (time, cache hit)
    export_details: JSONObject | None = None
    # set when an int8 case loads or makes its quantized model (method, seconds)
    quantization: Quantization | None = None
    # set when a case builds its model: its parameters and buffers are placed too
    module: torch.nn.Module | None = None

    def version(self) -> str:
        return torch.__version__

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        torch.set_num_threads(intra_op)
        # Settable once per process, before any inter-op work: the worker is fresh.
        torch.set_num_interop_threads(inter_op)
        return {
            "intra_op": torch.get_num_threads(),
            "inter_op": torch.get_num_interop_threads(),
        }

    def resolve_device(self, requested: str) -> str:
        mps = getattr(torch.backends, "mps", None)
        has_mps = mps is not None and mps.is_available()
        if requested == "auto":
            return "cuda:0" if torch.cuda.is_available() else ("mps" if has_mps else "cpu")
        if requested == "cpu":
            return "cpu"
        if requested == "mps":
            if not has_mps:
                raise CaseError("device 'mps' asked for, but this torch has no usable MPS device")
            return "mps"
        if not torch.cuda.is_available():
            raise CaseError(
                f"device {requested!r} asked for, but torch {torch.__version__} sees no CUDA "
                "device (CPU-only build or no GPU); use --device cpu or auto"
            )
        index = int(requested.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise CaseError(
                f"device {requested!r} asked for, but only {torch.cuda.device_count()} "
                "CUDA device(s) exist"
            )
        return f"cuda:{index}"

    def prepare(self, job: Job) -> Prepared:
        torch.manual_seed(job.seed)  # dropout masks in training are reproducible too
        if job.case.user_model is not None:
            return self._user_model(job)
        device = torch.device(job.device)
        inference = job.case.mode == "infer"
        precision = precision_plan(job.case.precision, device, training=not inference)
        layout = memory_format(job.workload.name, device)
        tuned = tune_convolutions(job.workload.name, device)
        inputs = {
            name: _laid_out(torch.from_numpy(array).to(device), layout)
            for name, array in job.inputs(mode=job.case.mode).items()
        }
        infer = None
        if job.workload.name in KERNELS:
            step = self._kernel_step(job, inputs, precision)
        elif not inference:
            step = self._train_step(job, inputs, device, precision, layout)
        else:
            call = self._infer_call(job, inputs, device, precision, layout)
            args = _model_args(inputs)
            step = lambda: call(*args)  # noqa: E731  # the model on the case's inputs
            infer = _array_call(call, device, layout)
        placed = tensor_placement(inputs, self.module)
        step, transfer = _with_transfer(step, inputs, job.case.transfer, device)
        transfer_bytes = (
            sum(t.nbytes for t in inputs.values()) if transfer.startswith("inside") else None
        )
        synced = _synchronised(step, device)
        cuda = device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(device)
        return Prepared(
            step=synced,
            device=job.device,
            # the throughput mode's windows: the step unsynchronised, CUDA events between
            pipeline=CudaEventPipeline(step, device) if cuda else None,
            # peaks of the measured steps, not of building, compiling or autotuning
            before_measure=(lambda: torch.cuda.reset_peak_memory_stats(device)) if cuda else None,
            context=torch.inference_mode if inference else torch.enable_grad,
            details=Details(
                # where the data really is, checked against the case's device
                placement=placed,
                transfer=transfer,
                transfer_bytes_per_step=transfer_bytes,
                quantization=self.quantization,
                extra={
                    "dtype": "float32",
                    "memory_format": str(layout).replace("torch.", ""),
                    **tuned,
                    **optimizer_facts(job),
                    **device_facts(device),
                    **precision.details,
                    **({"script": "traced"} if _traced(job) else {}),
                    **({"export": self.export_details} if job.case.compile == "export" else {}),
                },
            ),
            fetch_output=(lambda: synced().detach().float().cpu().numpy()) if inference else None,
            infer=infer,
            fetch_loss=None if inference else lambda: _as_float(synced()),
            after_measure=lambda: _after_measure(device, job.case.compile),
        )

    def window_queue(self, job: Job, prepared: Prepared) -> WindowQueue:
        from dlbench.backends.torch.windows import window_queue

        return window_queue(job, prepared)

    def prepare_training(self, job: Job, data: MnistData) -> EpochTrainer:
        from dlbench.backends.torch.training import TorchMnistTrainer

        device = torch.device(job.device)
        return TorchMnistTrainer(
            job, data, device, precision_plan(job.case.precision, device, True)
        )

    def prepare_serving(self, job: Job, streams: int) -> ServingEngine:
        """As every engine without a scheduler: a generator per stream. The device loop
        queues a whole generation on the GPU's one stream, so there two streams would
        take turns by generation where `generate`'s interleave by token: it serves one."""
        if job.case.compile == "device-loop" and streams > 1 and job.device != "cpu":
            raise CaseError(f"-c device-loop serves one stream on {job.device} (each "
                            f"generation is queued whole on the device), not {streams}; "
                            "use --streams 1, or -c reduce-overhead for several")  # fmt: skip
        return super().prepare_serving(job, streams)

    def prepare_generation(self, job: Job, seeded: bool | None = None) -> Generator:
        """The decoder from the shared checkpoint, or built from the seed on the case's
        device with its reference made there (`seeded`; None: decoder.seeds_on_device
        decides, so a test can run the GPU's way on the CPU)."""
        from dlbench.backends.torch import decoder

        device = torch.device(job.device)
        # its switches (TF32 off unless asked) and its hardware check (CaseSkipped)
        precision = precision_plan(job.case.precision, device, training=False)
        dtype = str(precision_info(job.case.precision).generation_dtype)
        started = time.perf_counter()
        seeded = decoder.seeds_on_device(job) if seeded is None else seeded
        model, weights, reference = decoder.generation_model(job, getattr(torch, dtype), seeded)
        engine = decoder.TorchGenerator
        if job.case.compile == "device-loop":
            from dlbench.backends.torch.device_loop import DeviceLoopGenerator

            engine = DeviceLoopGenerator
        generator = engine(job, model, getattr(torch, dtype), weights, compile_counters)
        generator.own_reference = reference
        extra = {**generator.details.extra, **device_facts(device), **precision.details}
        extra["weights_s"] = time.perf_counter() - started
        if reference is not None:  # its time is inside weights_s where it was made
            extra["reference_made_s"] = reference.made_s
        generator.details = replace(
            generator.details, extra=extra, generation=kv_cache_record(job, dtype)
        )
        return generator

    def _user_model(self, job: Job) -> Prepared:
        path = Path(job.case.given_model.model)
        kind = model_format(path)
        loaded, signature = load_torch_model(str(path), kind, job.case.given_model.trust_model)
        device = torch.device(job.device)
        arrays = model_inputs(job.case, signature, job.seed)
        args = call_arguments(signature, arrays, device)
        extra: JSONObject = {"model_kind": kind, "inputs": input_shapes(arrays)}
        model: Callable[..., object]  # the AOTInductor package, or the module (compiled or not)
        if job.case.compile == "export":
            identity = {"model": job.case.given_model.model_digest, "precision": job.case.precision}
            model, extra["export"] = aoti_runner(loaded, args, identity)
        else:
            module = loaded.module() if kind == "torch-export" else loaded.to(device).eval()
            model = torch.compile(module) if job.case.compile == "compile" else module

        def step() -> object:  # whatever the user's model returns (_tensors reads it)
            return model(*args)

        synced = _synchronised(step, device)
        return Prepared(
            step=synced,
            device=job.device,
            context=torch.inference_mode,
            fetch_output=lambda: [t.detach().cpu().numpy() for t in _tensors(synced())],
            batch_size=leading_dim(arrays),
            details=Details(extra=extra),
        )

    def _kernel_step(
        self, job: Job, inputs: dict[str, torch.Tensor], precision: PrecisionPlan
    ) -> Callable[[], torch.Tensor]:
        kernel = _compiled(KERNELS[job.workload.name], job.case.compile, scriptable=True)
        # A kernel has no autocast region: at an AMP precision its operands are
        # stored in that type, which is what a bf16/fp16 GEMM or add means.
        dtype = AUTOCAST_DTYPES.get(job.case.precision, torch.float32)
        operands = [tensor.to(dtype) for tensor in inputs.values()]
        # the kernel reads these: a timed input copy (--transfer inside) refills them
        inputs.update(zip(list(inputs), operands, strict=True))
        device = operands[0].device
        if job.workload.name == "h2d":
            if device.type == "cpu":
                raise CaseSkipped("h2d measures a host-to-device copy; a CPU device has none")
            # pinned host memory: the fastest a transfer can go (and what DataLoaders use)
            operands = [operand.cpu().pin_memory() for operand in operands]
        shape = torch.broadcast_shapes(*(operand.shape for operand in operands))
        # The output is allocated once here, so the step times the kernel alone.
        out = torch.empty(shape, device=device, dtype=dtype)
        return lambda: kernel(*operands, out)

    def _infer_call(
        self,
        job: Job,
        inputs: dict[str, torch.Tensor],
        device: torch.device,
        precision: PrecisionPlan,
        layout: torch.memory_format,
    ) -> Callable[..., torch.Tensor]:
        """The model to call on the inputs (compiled, exported or quantized as asked)."""
        args = _model_args(inputs)
        if job.case.precision in QUANTIZED_PRECISIONS:
            model, self.quantization = quantized_model(job, device)
            return model
        module = reference_module(job.workload.name, job.params, job.seed)
        # Module.to takes memory_format (torch._C._nn._parse_to reads it), which torch's
        # annotated overloads of it leave out
        module = self.module = module.to(device, memory_format=layout).eval()  # type: ignore[call-overload]
        if job.case.compile == "export":
            identity = {"workload": job.workload.name, "params": job.params, "seed": job.seed,
                        "layout": str(layout)}  # fmt: skip
            runner, self.export_details = aoti_runner(module, args, identity)
            return runner
        with precision.autocast():
            model = _compiled(module, job.case.compile, job.workload.torch_scriptable, args)
        if job.case.precision not in AUTOCAST_DTYPES:
            return model  # no context to enter: nothing added per step
        autocast = precision.autocast

        def call(*tensors: torch.Tensor) -> torch.Tensor:
            with autocast():
                return model(*tensors)

        return call

    def _train_step(
        self,
        job: Job,
        inputs: dict[str, torch.Tensor],
        device: torch.device,
        precision: PrecisionPlan,
        layout: torch.memory_format,
    ) -> Callable[[], torch.Tensor]:
        module = training_module(job.workload.name, job.params, job.seed)
        # Module.to takes memory_format (torch._C._nn._parse_to reads it), which torch's
        # annotated overloads of it leave out
        module = self.module = module.to(device, memory_format=layout).train()  # type: ignore[call-overload]
        args = _model_args(inputs)
        wrapped: torch.nn.Module = module
        if job.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            # gradients are all-reduced across the ranks inside backward()
            ids = [device.index] if device.type == "cuda" else None
            wrapped = DistributedDataParallel(module, device_ids=ids)
        model = _compiled(wrapped, job.case.compile, job.workload.torch_scriptable, args)
        loss_fn = LOSSES[job.workload.loss]
        optimizer = training_optimizer(job, module)
        target = next(inputs[name] for name in TARGET_NAMES if name in inputs)
        autocast, scaler = precision.autocast, precision.scaler
        new_graph_step = _graph_step_marker(job.case.compile)

        def step() -> torch.Tensor:
            new_graph_step()
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                output = model(*args)
            # The loss in fp32 outside the autocast region, as autocast would run
            # it anyway; binary cross-entropy even refuses to run under fp16 autocast.
            loss = loss_fn(output.float(), target)
            if scaler is None:
                loss.backward()
                optimizer.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            return loss

        return step


TARGET_NAMES = ("target", "labels")


def tensor_placement(inputs: dict[str, torch.Tensor], module: torch.nn.Module | None) -> Placement:
    """Where every input and, where a model was built, every parameter and buffer is:
    a weight left on the host would run the model there, or fail, whatever one
    input's device says."""
    pieces = {f"input {name}": str(tensor.device) for name, tensor in inputs.items()}
    if module is not None:
        pieces |= {f"param {n}": str(t.device) for n, t in module.named_parameters()}
        pieces |= {f"buffer {n}": str(t.device) for n, t in module.named_buffers()}
    return placement_of_each("torch tensors", pieces, lambda device: device.split(":")[0])


def training_optimizer(job: Job, module: torch.nn.Module) -> torch.optim.Optimizer:
    """The workload's optimizer; with the option optimizer=fused, its fused kernel (one
    launch for every parameter's update) where torch's default on a GPU is the
    multi-tensor (foreach) one."""
    kind = OPTIMIZERS[job.workload.optimizer]
    if dict(job.case.options).get("optimizer") != "fused":
        return kind(module.parameters(), lr=job.workload.learning_rate)
    if "fused" not in inspect.signature(kind).parameters:
        raise CaseError(
            f"optimizer=fused: {kind.__name__} ({job.workload.name}'s optimizer) has no "
            "fused kernel in torch; it runs without the option"
        )
    return kind(module.parameters(), lr=job.workload.learning_rate, fused=True)


def optimizer_facts(job: Job) -> dict[str, str]:
    """Which optimizer the training step runs, and which of torch's implementations."""
    if job.case.mode != "train" or job.workload.name in KERNELS:
        return {}
    fused = dict(job.case.options).get("optimizer") == "fused"
    name = OPTIMIZERS[job.workload.optimizer].__name__
    return {"optimizer": f"{name} ({'fused' if fused else 'torch default: foreach on a GPU'})"}


def _graph_step_marker(compile_mode: str) -> Callable[[], None]:
    """reduce-overhead replays CUDA graphs whose outputs the next replay overwrites:
    each step tells torch a new iteration begins, as its documentation asks of a loop."""
    if compile_mode != "reduce-overhead":
        return lambda: None
    return torch.compiler.cudagraph_mark_step_begin


def tune_convolutions(workload: str, device: torch.device) -> dict[str, bool]:
    """cuDNN's autotuner for a convolutional net on a GPU: it times each convolution's
    algorithms at its first call (outside the measured steps) and keeps the fastest,
    as NVIDIA's training recipes set it; recorded, since it changes the kernels run."""
    from dlbench.backends.torch.vision import VISION_MODELS

    if device.type != "cuda" or workload not in {*VISION_MODELS, "mnist-cnn"}:
        return {}
    torch.backends.cudnn.benchmark = True
    return {"cudnn_benchmark": True}


def memory_format(workload: str, device: torch.device) -> torch.memory_format:
    """channels_last for convolutional nets on a GPU: what NVIDIA's recipes use, and
    what lets cuDNN run tensor-core convolutions without transposing every layer.
    The CPU keeps the default layout (the CPU studies compare it across frameworks)."""
    from dlbench.backends.torch.vision import VISION_MODELS

    if device.type == "cuda" and workload in VISION_MODELS:
        return torch.channels_last
    return torch.contiguous_format


def _laid_out(tensor: torch.Tensor, layout: torch.memory_format) -> torch.Tensor:
    return tensor.contiguous(memory_format=layout) if tensor.dim() == 4 else tensor


def _array_call(
    call: Callable[..., torch.Tensor], device: torch.device, layout: torch.memory_format
) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """The model on NumPy inputs of the step's shape (the int8 check's evaluation batch)."""

    def infer(arrays: dict[str, np.ndarray]) -> np.ndarray:
        tensors = {
            name: _laid_out(torch.from_numpy(a).to(device), layout) for name, a in arrays.items()
        }
        output = call(*_model_args(tensors))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return output.detach().float().cpu().numpy()

    return infer


def _model_args(inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The model's positional inputs, in the workload's order (targets left out)."""
    return [tensor for name, tensor in inputs.items() if name not in TARGET_NAMES]


def _tensors(output: object) -> list[torch.Tensor]:
    """Every tensor a model returned (a tensor, or nested tuples, lists and dicts)."""
    from torch.utils._pytree import tree_leaves

    return [leaf for leaf in tree_leaves(output) if isinstance(leaf, torch.Tensor)]


def _compiled(
    fn: Callable[..., torch.Tensor],
    mode: str,
    scriptable: bool,
    example: list[torch.Tensor] | None = None,
) -> Callable[..., torch.Tensor]:
    """Wrap a module or function for the compile mode; torch.compile itself is lazy.

    "script" scripts what TorchScript can compile and traces the rest
    (transformers models), with the case's own inputs as the example.
    """
    if mode == "eager":
        return fn
    if mode == "compile":
        return torch.compile(fn)
    if mode == "reduce-overhead":
        return torch.compile(fn, mode="reduce-overhead")
    if mode == "script":
        if scriptable:
            return torch.jit.script(fn)
        with torch.no_grad():
            return torch.jit.trace(fn, tuple(example or ()), check_trace=False)
    raise CaseError(f"torch has no compile mode {mode!r}")


def _with_transfer(
    step: Callable[[], T], inputs: dict[str, torch.Tensor], transfer: str, device: torch.device
) -> tuple[Callable[[], T], str]:
    """With transfer "inside", each step first copies its inputs from pinned host memory.

    The step keeps reading the same device tensors; they are refilled from the
    host copy in the timed region, which is what a model fed from the CPU pays.
    """
    if device.type == "cpu":
        return step, "none (the device is the host)"
    if transfer != "inside":
        return step, "outside (inputs on the device before timing)"
    pairs = [(tensor, tensor.cpu().pin_memory()) for tensor in inputs.values()]

    def step_with_copy() -> T:
        for on_device, on_host in pairs:
            on_device.copy_(on_host, non_blocking=True)
        return step()

    return step_with_copy, "inside (host-to-device copy of the inputs timed)"


def device_facts(device: torch.device) -> dict[str, str]:
    """Which GPU and runtime (CUDA or ROCm: ROCm builds of torch appear as cuda)."""
    if device.type == "cuda":
        hip = getattr(torch.version, "hip", None)
        return {
            "device_name": torch.cuda.get_device_name(device),
            "gpu_runtime": f"ROCm {hip}" if hip else f"CUDA {torch.version.cuda}",
            "compute_capability": ".".join(map(str, torch.cuda.get_device_capability(device))),
        }
    if device.type == "mps":
        return {"device_name": "Apple GPU (MPS)", "gpu_runtime": "Metal"}
    return {}


def gpu_memory(device: torch.device) -> dict[str, float]:
    """Peak memory torch's allocator handed out and reserved during the measurement."""
    mib = 1024 * 1024
    return {
        "cuda_max_memory_allocated_mb": torch.cuda.max_memory_allocated(device) / mib,
        "cuda_max_memory_reserved_mb": torch.cuda.max_memory_reserved(device) / mib,
    }


def compile_counters() -> dict[str, int]:
    """What torch.compile did in this process: graphs built, graph breaks, whether
    Inductor's FX graph cache missed (cold) or hit (a warm cache would make the first
    call a fraction of a real compile), and the graphs for which it skipped CUDA graphs
    (reduce-overhead and device-loop ask for them; Inductor only logs a skip)."""
    from torch._dynamo.utils import counters

    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "fxgraph_cache_miss": int(counters["inductor"]["fxgraph_cache_miss"]),
        "fxgraph_cache_hit": int(counters["inductor"]["fxgraph_cache_hit"]),
        "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"]),
    }


# the compile modes that run torch.compile
COMPILES = ("compile", "reduce-overhead")


def _after_measure(device: torch.device, compile_mode: str) -> JSONObject:
    facts: JSONObject = gpu_memory(device) if device.type == "cuda" else {}
    if compile_mode in COMPILES:
        facts["compile_counters"] = compile_counters()
    return facts


def _as_float(loss: object) -> float:
    assert isinstance(loss, torch.Tensor)
    return float(loss.detach().float())


def _traced(job: Job) -> bool:
    return job.case.compile == "script" and not job.workload.torch_scriptable


def _synchronised(step: Callable[[], T], device: torch.device) -> Callable[[], T]:
    """On a GPU, wait for the kernels the step queued; on CPU, torch is synchronous."""
    if device.type == "cuda":

        def synced() -> T:
            out = step()
            torch.cuda.synchronize(device)
            return out

        return synced
    if device.type == "mps":

        def synced_mps() -> T:
            out = step()
            torch.mps.synchronize()
            return out

        return synced_mps
    return step
