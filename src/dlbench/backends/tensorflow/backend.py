"""The TensorFlow backend: Keras models, eager, tf.function, or XLA-compiled."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.tensorflow.memory import ALLOW_GROWTH, peak_reading, peak_reset

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep the case log readable
# before TensorFlow starts: grow GPU memory as used instead of mapping it all, so the
# device's used memory is the model's (backends.tensorflow.memory); a user's value holds
os.environ.setdefault(ALLOW_GROWTH, "true")

import tensorflow as tf

from dlbench.backends.base import (
    Backend,
    EpochTrainer,
    Job,
    Prepared,
    input_shapes,
    leading_dim,
    string_inputs,
)
from dlbench.backends.tensorflow.models import BUILDERS, to_framework_layout
from dlbench.backends.tensorflow.placement import by_name, require_outputs_placed, tf_placement
from dlbench.backends.tensorflow.user_model import LoadedModel, load_user_model
from dlbench.errors import CaseError
from dlbench.measure.pipeline import WindowMeanPipeline
from dlbench.results.details import Details, Placement
from dlbench.untyped import JSONObject
from dlbench.workloads.model_format import model_format
from dlbench.workloads.user_model import model_inputs

if TYPE_CHECKING:
    import keras
    import numpy as np

    from dlbench.data.mnist import MnistData


class TensorFlowBackend(Backend):
    name = "tensorflow"

    def version(self) -> str:
        return tf.__version__

    def _user_model(self, job: Job) -> Prepared:
        return _user_prepare(job)

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        # Must run before TensorFlow creates its runtime: the worker is fresh.
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
        tf.config.threading.set_inter_op_parallelism_threads(inter_op)
        # fp32 means fp32: TensorFlow runs float32 matmuls and convolutions in
        # TF32 on Ampere+ GPUs by default (torch's fp32 cases turn TF32 off too)
        tf.config.experimental.enable_tensor_float_32_execution(False)
        return {
            "tf32": tf.config.experimental.tensor_float_32_execution_enabled(),
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        }

    def resolve_device(self, requested: str) -> str:
        gpus = tf.config.list_physical_devices("GPU")
        if requested in ("auto", "cpu"):
            return "cuda:0" if requested == "auto" and gpus else "cpu"
        index = int(requested.partition(":")[2] or 0)
        if index >= len(gpus):
            raise CaseError(
                f"device {requested!r} asked for, but TensorFlow {tf.__version__} sees "
                f"{len(gpus)} GPU(s) (tensorflow-cpu has none); use --device cpu or auto"
            )
        return f"cuda:{index}"

    def prepare_training(self, job: Job, data: MnistData) -> EpochTrainer:
        from dlbench.backends.tensorflow.training import TfMnistTrainer

        return TfMnistTrainer(job, data, _tf_device(job.device))

    def prepare(self, job: Job) -> Prepared:
        if job.case.user_model is not None:
            return self._user_model(job)
        tf_device = _tf_device(job.device)
        inputs = job.inputs()
        with tf.device(tf_device):
            model = BUILDERS[job.workload.name](
                job.workload.reference_weights(job.params, job.seed)
            )
            x = tf.constant(to_framework_layout(job.workload.name, inputs["x"]))
        forward = _compiled(model, job.case.compile)

        def step() -> np.ndarray:
            # .numpy() waits for the result and materialises it (fairness rule 4).
            return forward(x).numpy()

        # every input and variable; the output on the check's call (fetch)
        placed = tf_placement({"input x": x, **by_name(model.variables)})

        def fetch() -> np.ndarray:
            output = forward(x)
            require_outputs_placed(placed, [output])
            return output.numpy()

        # throughput mode on a GPU: ops are queued on the device's stream and return;
        # one host copy a window waits for them all
        pipeline = (
            WindowMeanPipeline(lambda: forward(x), lambda out: out.numpy())
            if tf_device.startswith("/GPU")
            else None
        )
        return Prepared(
            step=step,
            device=job.device,
            context=lambda: tf.device(tf_device),
            pipeline=pipeline,
            details=Details(
                placement=placed,
                extra={"keras": _keras_version(), "dtype": "float32", **_memory_setting()},
            ),
            fetch_output=fetch,
            before_measure=peak_reset(job.device),
            after_measure=peak_reading(job.device),
        )


def _tf_device(device: str) -> str:
    return "/CPU:0" if device == "cpu" else f"/GPU:{device.partition(':')[2] or 0}"


def _user_prepare(job: Job) -> Prepared:
    path = Path(job.case.given_model.model)
    kind = model_format(path)
    tf_device = _tf_device(job.device)
    with tf.device(tf_device):  # the variables a Keras file or SavedModel makes, too
        loaded = load_user_model(str(path), kind, job.case.given_model.trust_model, tf_device)
        arrays = model_inputs(job.case, loaded.inputs, job.seed)
        step, fetch, placed = _user_step(loaded, arrays, job.case.compile, path.name)
    extra: JSONObject = {
        "model_kind": kind,
        "loader": loaded.loader,
        "inputs": input_shapes(arrays),
        **string_inputs(arrays),
        "outputs": [output.name for output in loaded.outputs],
    }
    if loaded.fallback_cause is not None:
        extra["fallback_cause"] = loaded.fallback_cause  # why TF1's loader runs it
    return Prepared(
        step=step,
        device=job.device,
        context=lambda: tf.device(tf_device),
        fetch_output=fetch,
        batch_size=leading_dim(arrays),
        details=Details(placement=placed, extra={**extra, **_memory_setting()}),
        before_measure=peak_reset(job.device),
        after_measure=peak_reading(job.device),
    )


def _memory_setting() -> dict[str, str | None]:
    return {"tf_force_gpu_allow_growth": os.environ.get(ALLOW_GROWTH)}


UserStep = Callable[[], list["np.ndarray"]]


def _user_step(
    loaded: LoadedModel, arrays: dict[str, np.ndarray], mode: str, file_name: str
) -> tuple[UserStep, UserStep, Placement | None]:
    """One call of the model on `arrays`, its outputs as NumPy arrays (fairness rule 4);
    the same call for the output check, which also holds every output to where the
    inputs and variables are; and that placement (None for a TF1 graph, whose session
    places its ops where no tensor of ours can be asked, and for a model of string
    inputs and no variables)."""
    if loaded.graph is not None:
        # a TF1 session runs the graph: tf.function's graph mode, and nothing else
        if mode != "function":
            raise CaseError(
                f"SavedModel {file_name} runs here only as a TF1 graph, in compile mode "
                f"function: tf.saved_model.load cannot restore {loaded.fallback_cause}; "
                f"compile mode {mode} needs that loader"
            )
        run = loaded.graph.runner(arrays)
        return run, run, None
    assert loaded.call is not None
    # before the clock, in the case's device scope (a constant made outside it stays
    # on the host, and every step would copy it over)
    feeds = {name: tf.constant(array) for name, array in arrays.items()}
    forward = (
        loaded.call if mode == "eager" else tf.function(loaded.call, jit_compile=mode == "xla")
    )
    inputs = {f"input {name}": tensor for name, tensor in feeds.items()}
    placed = tf_placement({**inputs, **by_name(loaded.variables)})

    def step() -> list[np.ndarray]:
        return [tensor.numpy() for tensor in forward(feeds)]  # every output, materialised

    def fetch() -> list[np.ndarray]:
        outputs = forward(feeds)
        require_outputs_placed(placed, outputs)
        return [tensor.numpy() for tensor in outputs]

    return step, fetch, placed


def _compiled(model: keras.Model, mode: str) -> Callable[[tf.Tensor], tf.Tensor]:
    def call(x: tf.Tensor) -> tf.Tensor:
        return model(x, training=False)  # inference: dropout off, no tape is recording

    if mode == "eager":
        return call
    if mode == "function":
        return tf.function(call)
    if mode == "xla":
        return tf.function(call, jit_compile=True)
    raise CaseError(f"tensorflow has no compile mode {mode!r}")


def _keras_version() -> str:
    import keras

    return keras.__version__
