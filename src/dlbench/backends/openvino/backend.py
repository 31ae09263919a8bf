"""The OpenVINO backend (CPU): the exported ONNX model, compiled for a scenario.

single-stream (and multi-stream) uses the LATENCY hint and one synchronous
request; offline uses the THROUGHPUT hint and splits the batch over the
plugin's optimal number of asynchronous infer requests; server compiles one
plugin stream per query served at once, each served by a request of its own.
The precision is pinned: OpenVINO's CPU plugin otherwise runs in bf16 on CPUs
that have it, which is not an fp32 result.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import openvino as ov

from dlbench.backends.base import (
    Backend,
    Job,
    Prepared,
    exported_onnx,
    input_shapes,
    leading_dim,
    load_failure,
    placement,
    quantized,
)
from dlbench.backends.openvino.user_model import ov_signature
from dlbench.errors import CaseError
from dlbench.results.details import Details, Placement
from dlbench.spec.case import Case
from dlbench.spec.loads import ServedStreams
from dlbench.spec.loop_kinds import load_part
from dlbench.spec.registry import QUANTIZED_PRECISIONS
from dlbench.untyped import JSONObject
from dlbench.workloads.user_model import model_inputs

if TYPE_CHECKING:  # OpenVINO ships no types: to the checker these are Any
    from openvino.utils.data_helpers import OVDict  # what a request's infer returns

# A model's inputs by name, and a step's chunk of them
Feeds = dict[str, np.ndarray]

# int8: the IR NNCF quantized; its layers left in float run in f32, not the bf16 default
PRECISION_HINTS = {"fp32": "f32", "int8": "f32", "bf16": "bf16", "fp16": "f16"}


class OpenVinoBackend(Backend):
    name = "openvino"
    # INFERENCE_NUM_THREADS is the plugin's total: it shares it out among its streams
    streams_share_threads = True

    def __init__(self) -> None:
        self._core = ov.Core()
        self._threads = 1

    def version(self) -> str:
        return ov.__version__

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        self._threads = intra_op  # INFERENCE_NUM_THREADS at compile; streams replace inter-op
        return {"intra_op": intra_op, "inter_op": "n/a (streams)"}

    def resolve_device(self, requested: str) -> str:
        if requested in ("auto", "cpu"):
            return "cpu"
        raise CaseError(
            f"device {requested!r} asked for, but dlbench runs OpenVINO on its CPU plugin only; "
            "use --device cpu"
        )

    def prepare(self, job: Job) -> Prepared:
        if job.case.user_model is not None:
            return self._user_model(job)
        path, meta = exported_onnx(job)
        quantization = None
        if job.case.precision in QUANTIZED_PRECISIONS:
            path, quantization = quantized(job)  # NNCF's IR of the same export
        arrays = job.inputs()
        offline = job.case.effective_scenario(job.batch_size) == "offline"
        requests = 1
        if offline:
            # The plugin decides its streams when it compiles: ask a batch-1 compile.
            probe = self._compile(path, arrays, job, offline, chunk=1)
            requests = _divisor_at_most(
                int(probe.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")), job.batch_size
            )
            del probe
        compiled = self._compile(path, arrays, job, offline, job.batch_size // requests)
        chunks = [
            {name: np.ascontiguousarray(part) for name, part in zip(arrays, parts, strict=True)}
            for parts in zip(*(np.split(a, requests) for a in arrays.values()), strict=True)
        ]
        step, fetch = (_async_step if offline else _sync_step)(compiled, chunks)
        new_stream = None if offline else (lambda: _sync_step(compiled, chunks)[0])
        hints = {
            key: str(compiled.get_property(key))
            for key in (
                "PERFORMANCE_HINT",
                "NUM_STREAMS",
                "INFERENCE_PRECISION_HINT",
                "INFERENCE_NUM_THREADS",
                "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
            )
        }
        details = Details(
            placement=executed_on(compiled),
            quantization=quantization,
            extra={"onnx_opset": meta["opset"], "infer_requests": requests, **hints},
        )
        return Prepared(
            step=step,
            device="cpu",
            details=details,
            fetch_output=fetch,
            new_stream=new_stream,
            infer=_chunked_infer(compiled, requests),
        )

    def _user_model(self, job: Job) -> Prepared:
        name = Path(job.case.given_model.model).name
        path, quantization = Path(job.case.given_model.model), None
        if job.case.precision in QUANTIZED_PRECISIONS:
            path, quantization = quantized(job)  # NNCF's IR of the file
        try:
            model = self._core.read_model(str(path))
        except Exception as exc:
            version = ov.__version__.split("-")[0]  # "2026.4.1-22982-e213..." is a build id
            raise load_failure(f"openvino {version} cannot read {name}", exc) from None
        feeds = model_inputs(job.case, ov_signature(model), job.seed)
        # static shapes for the inputs as fed: the plugin plans its kernels for them
        model.reshape({name: list(array.shape) for name, array in feeds.items()})
        config = plugin_config(job.case, self._threads, offline=False)
        try:
            compiled = self._core.compile_model(model, "CPU", config)
        except Exception as exc:
            raise load_failure(f"openvino cannot compile {name}", exc) from None
        count = len(compiled.outputs)
        step, _ = _sync_step(compiled, [feeds])
        return Prepared(
            step=step,
            device="cpu",
            fetch_output=lambda: [array.copy() for array in list(step().values())[:count]],
            batch_size=leading_dim(feeds),
            details=Details(
                placement=executed_on(compiled),
                quantization=quantization,
                extra={
                    "inputs": input_shapes(feeds),
                    "outputs": [port.get_any_name() for port in compiled.outputs],
                    **{key: str(value) for key, value in config.items() if key in HINT_KEYS},
                },
            ),
            new_stream=lambda: _sync_step(compiled, [feeds])[0],
            infer=_outputs_infer(compiled),
        )

    def _compile(
        self, path: Path, arrays: Feeds, job: Job, offline: bool, chunk: int
    ) -> ov.CompiledModel:
        model = self._core.read_model(str(path))
        model.reshape({name: [chunk, *a.shape[1:]] for name, a in arrays.items()})
        return self._core.compile_model(
            model, "CPU", plugin_config(job.case, self._threads, offline)
        )


HINT_KEYS = ("PERFORMANCE_HINT", "NUM_STREAMS")


def executed_on(compiled: ov.CompiledModel) -> Placement:
    """Where the compiled model really runs: OpenVINO's EXECUTION_DEVICES, the devices
    its plugin put the work on (an AUTO or HETERO compile may differ from the one
    asked for). dlbench compiles for the CPU plugin alone, so anything else is mixed."""
    devices = [str(device) for device in compiled.get_property("EXECUTION_DEVICES")]
    kinds = {"cpu" if device.upper().startswith("CPU") else "other" for device in devices}
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    return placement("OpenVINO EXECUTION_DEVICES", ", ".join(devices), kind)


def _precision_hint(precision: str) -> str:
    """The plugin's hint for a precision; one it has no hint for is refused, never f32."""
    if precision not in PRECISION_HINTS:
        raise CaseError(f"openvino: unsupported precision {precision!r}")
    return PRECISION_HINTS[precision]


def plugin_config(case: Case, threads: int, offline: bool) -> dict[str, str | int]:
    """The CPU plugin's settings for the case's scenario.

    The server scenario gets one plugin stream per query it serves at once
    (the THROUGHPUT hint's machinery, with the count pinned), so concurrent
    requests run side by side instead of queueing for one stream.
    """
    server = case.scenario == "server"
    config: dict[str, str | int] = {
        "PERFORMANCE_HINT": "THROUGHPUT" if offline or server else "LATENCY",
        "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": _precision_hint(case.precision),
    }
    if server:
        served = load_part(case, ServedStreams)
        config["NUM_STREAMS"] = (served.streams if served is not None else None) or 1
    return config


def _divisor_at_most(wanted: int, batch: int) -> int:
    """Requests in flight: the plugin's optimum, reduced to a divisor of the batch."""
    return next(n for n in range(max(1, min(wanted, batch)), 0, -1) if batch % n == 0)


def _sync_step(
    compiled: ov.CompiledModel, chunks: list[Feeds]
) -> tuple[Callable[[], OVDict], Callable[[], np.ndarray]]:
    """A synchronous step on a request of its own (a server stream makes one each)."""
    request = compiled.create_infer_request()
    feeds = chunks[0]

    def step() -> OVDict:
        return request.infer(feeds, share_inputs=True)  # synchronous

    return step, lambda: step()[0].copy()


def _chunked_infer(compiled: ov.CompiledModel, requests: int) -> Callable[[Feeds], np.ndarray]:
    """The first output for a batch of the step's size, on a request of its own
    (an offline model is compiled for the batch split over its requests)."""
    request = compiled.create_infer_request()

    def infer(inputs: Feeds) -> np.ndarray:
        parts = zip(*(np.split(a, requests) for a in inputs.values()), strict=True)
        chunks = [dict(zip(inputs, part, strict=True)) for part in parts]
        return np.concatenate([request.infer(chunk)[0].copy() for chunk in chunks])

    return infer


def _outputs_infer(compiled: ov.CompiledModel) -> Callable[[Feeds], list[np.ndarray]]:
    """Every output of a user's model for inputs of the step's shapes."""
    request = compiled.create_infer_request()
    count = len(compiled.outputs)
    return lambda inputs: [a.copy() for a in list(request.infer(inputs).values())[:count]]


def _async_step(
    compiled: ov.CompiledModel, chunks: list[Feeds]
) -> tuple[Callable[[], None], Callable[[], np.ndarray]]:
    queue = ov.AsyncInferQueue(compiled, len(chunks))

    def step() -> None:
        for index, feeds in enumerate(chunks):
            queue.start_async(feeds, userdata=index, share_inputs=True)
        queue.wait_all()  # every request done before the clock stops

    def fetch() -> np.ndarray:
        outputs: dict[int, np.ndarray] = {}
        queue.set_callback(
            lambda request, index: outputs.__setitem__(
                index, request.get_output_tensor(0).data.copy()
            )
        )
        step()
        return np.concatenate([outputs[i] for i in range(len(chunks))])

    return step, fetch
