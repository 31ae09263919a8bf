"""The JAX backend: jit-compiled pure functions, synchronised with block_until_ready."""

from __future__ import annotations

import os

from dlbench.backends.jax.memory import PREALLOCATE, allocator_peak, step_memory

# Before JAX starts its client (at first use): XLA would take 75% of a GPU's memory
# at once, and the device's used memory would say nothing of the model's (see
# backends.jax.memory). A value the user set is kept, and recorded either way.
os.environ.setdefault(PREALLOCATE, "false")

import jax  # after the allocator setting above
import numpy as np

from dlbench.backends.base import Backend, Job, Prepared
from dlbench.backends.jax.models import FORWARDS
from dlbench.backends.placement import placement_of_each
from dlbench.errors import CaseError
from dlbench.measure.pipeline import WindowMeanPipeline
from dlbench.results.details import Details
from dlbench.untyped import JSONObject


class JaxBackend(Backend):
    name = "jax"
    streams_share_threads = True  # one XLA CPU pool per process, sized by affinity

    def version(self) -> str:
        return jax.__version__

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        """XLA's CPU client has no thread-count option; it sizes its pool by the CPUs
        this process may use. So fewer threads are asked for by CPU affinity, set
        before the client starts (at first use, after this call)."""
        available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        mechanism = "default (all available CPUs)"
        if available and intra_op < len(available):
            os.sched_setaffinity(0, available[:intra_op])
            mechanism = f"cpu affinity {available[:intra_op]}"
        if intra_op == 1:
            flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()
        # fp32 means fp32: on GPUs JAX's default matmul precision may use TF32/bf16
        jax.config.update("jax_default_matmul_precision", "highest")
        return {
            "intra_op": intra_op,
            "inter_op": "n/a",
            "mechanism": mechanism,
            "matmul_precision": "highest",
        }

    def resolve_device(self, requested: str) -> str:
        if requested == "cpu":
            return "cpu"
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        if requested == "auto":
            return "cuda:0" if gpus else "cpu"
        index = int(requested.partition(":")[2] or 0)
        if index >= len(gpus):
            raise CaseError(
                f"device {requested!r} asked for, but JAX {jax.__version__} sees {len(gpus)} "
                "GPU(s) (CPU-only jaxlib?); use --device cpu or auto"
            )
        return f"cuda:{index}"

    def prepare(self, job: Job) -> Prepared:
        device = _jax_device(job.device)
        weights = job.workload.reference_weights(job.params, job.seed)
        params = {name: jax.device_put(value, device) for name, value in weights.items()}
        x = jax.device_put(job.inputs()["x"], device)
        forward = jax.jit(FORWARDS[job.workload.name])

        def step() -> jax.Array:
            return forward(params, x).block_until_ready()

        # throughput mode on a GPU: jit calls dispatch asynchronously; one block a window
        # waits for them all (XLA runs them in order on the device's stream)
        on_gpu = _device_kind(str(device)) == "cuda"
        pipeline = (
            WindowMeanPipeline(lambda: forward(params, x), lambda out: out.block_until_ready())
            if on_gpu
            else None
        )

        # every weight and the input, where JAX really holds each
        placed = {f"param {name}": _devices(value) for name, value in params.items()}
        placed["input x"] = _devices(x)
        return Prepared(
            step=step,
            device=job.device,
            pipeline=pipeline,
            details=Details(
                placement=placement_of_each("JAX arrays", placed, _device_kind),
                extra={
                    "backend": jax.default_backend(),
                    "dtype": "float32",
                    "xla_python_client_preallocate": os.environ.get(PREALLOCATE),
                },
            ),
            fetch_output=lambda: np.asarray(step()),
            after_measure=lambda: {**step_memory(forward, params, x), **allocator_peak(device)},
        )


def _devices(array: jax.Array) -> str:
    """The device(s) a JAX array is on ("cuda:0")."""
    return ", ".join(sorted(str(d) for d in array.devices()))


def _device_kind(placed: str) -> str:
    return "cuda" if ("cuda" in placed.lower() or "gpu" in placed.lower()) else "cpu"


def _jax_device(device: str) -> jax.Device:
    if device == "cpu":
        return jax.devices("cpu")[0]
    return jax.devices("gpu")[int(device.partition(":")[2] or 0)]
