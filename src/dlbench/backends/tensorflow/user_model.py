"""Loading a user's Keras file or SavedModel: Keras files with safe_mode on.

SavedModels load through `tf.saved_model.load` and a serving signature, not
through Keras: that reads SavedModels written by older TensorFlow and Keras 2,
whose Keras objects the installed Keras cannot rebuild. One that
`tf.saved_model.load` cannot restore either (a Keras 2 optimizer's state) is
served through TF1's loader (graph_loader). Keras 2 HDF5 files (`.h5`, `.hdf5`,
or any name) go through Keras' legacy HDF5 loader with compile=False: the
training config of an old file is not needed to infer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.base import load_failure, refused
from dlbench.backends.tensorflow.signatures import dims, dtype_name, pick_signature
from dlbench.errors import cause_summary
from dlbench.spec.model_signature import InputSpec
from dlbench.untyped import FrameworkValue

if TYPE_CHECKING:  # TensorFlow and Keras ship no types usable here: to the checker, Any
    import keras
    import tensorflow as tf

    from dlbench.backends.tensorflow.graph_loader import GraphSignature

# Callable on a dict of tensors by input name; returns every output, in order.
ModelCall = Callable[[dict[str, "tf.Tensor"]], list["tf.Tensor"]]
SAVED_MODEL_LOADER = "tf.saved_model.load"


@dataclass(frozen=True)
class LoadedModel:
    """A user's model as TensorFlow loaded it, and which loader did (`loader`)."""

    inputs: list[InputSpec]
    outputs: list[InputSpec]
    loader: str
    call: ModelCall | None = None  # Keras, tf.saved_model.load: run eagerly or in tf.function
    graph: GraphSignature | None = None  # TF1's loader: a session runs the signature
    fallback_cause: str | None = None  # why tf.saved_model.load could not restore it
    # the weights `call` reads (Keras's, or those the signature captures): where
    # they are is part of the case's placement
    variables: tuple[FrameworkValue, ...] = ()


def load_user_model(path: str, kind: str, trust: bool, device: str | None = None) -> LoadedModel:
    """A savedmodel, keras or keras-h5 file, loaded (a SavedModel served through TF1's
    loader pinned to `device`, a TensorFlow device name, where given)."""
    if kind == "savedmodel":
        return _savedmodel(path, device)
    model = _keras_model(path, kind, trust)
    signature = [
        InputSpec(_input_name(t), tuple(t.shape), dtype_name(t.dtype)) for t in model.inputs
    ]
    names = [spec.name for spec in signature]

    def call(feeds: dict[str, tf.Tensor]) -> list[tf.Tensor]:
        args = [feeds[n] for n in names]
        out = model(args[0] if len(args) == 1 else args, training=False)
        return _flatten(out)

    outputs = [
        InputSpec(getattr(t, "name", f"output_{i}"), tuple(t.shape), dtype_name(t.dtype))
        for i, t in enumerate(model.outputs)
    ]
    loader = "keras legacy HDF5" if kind == "keras-h5" else "keras"
    return LoadedModel(signature, outputs, loader, call=call, variables=tuple(model.variables))


def _savedmodel(path: str, device: str | None) -> LoadedModel:
    import tensorflow as tf

    name = Path(path).name
    try:
        loaded = tf.saved_model.load(path)
    except Exception as exc:
        # it rebuilds every saved object; TF1's loader needs only the graph and variables
        from dlbench.backends.tensorflow.graph_loader import V1_LOADER, load_graph_signature

        cause = restore_failure(exc)
        graph = load_graph_signature(path, name, cause, device)
        return LoadedModel(graph.inputs, graph.outputs, V1_LOADER, graph=graph,
                           fallback_cause=cause)  # fmt: skip
    signatures = dict(loaded.signatures)
    function = signatures[pick_signature(signatures, name)]
    specs = function.structured_input_signature[1]
    signature = [InputSpec(key, dims(spec.shape), dtype_name(spec.dtype))
                 for key, spec in specs.items()]  # fmt: skip
    structured = function.structured_outputs
    keys = sorted(structured)
    outputs = [InputSpec(key, dims(structured[key].shape), dtype_name(structured[key].dtype))
               for key in keys]  # fmt: skip

    def call(feeds: dict[str, tf.Tensor]) -> list[tf.Tensor]:
        result = function(**feeds)
        return [result[key] for key in keys]

    # keep the loaded object alive: the signature's variables belong to it
    call.loaded = loaded  # type: ignore[attr-defined]
    variables = tuple(function.variables)
    return LoadedModel(signature, outputs, SAVED_MODEL_LOADER, call=call, variables=variables)


def restore_failure(exc: BaseException) -> str:
    """What tf.saved_model.load could not restore, in words where TensorFlow's are internal:
    "its saved Keras 2 optimizer state, which only tf_keras restores (AttributeError: ...)"."""
    said = f"{type(exc).__name__}: {cause_summary(exc)}"
    if "add_slot" in str(exc):
        # TensorFlow rebuilds a Keras 2 optimizer, to add its slot variables, only through
        # tf_keras; without it the optimizer is a bare object with no add_slot
        return f"its saved Keras 2 optimizer state, which only tf_keras restores ({said})"
    return f"it ({said})"


def _keras_model(path: str, kind: str, trust: bool) -> keras.Model:
    import keras

    name = Path(path).name
    try:
        # keras.saving.load_model picks its loader by the file's name; the
        # content decided the kind here, so its loader is called directly.
        if kind == "keras-h5":
            from keras.src.legacy.saving import legacy_h5_format

            return legacy_h5_format.load_model_from_hdf5(path, compile=False, safe_mode=not trust)
        from keras.src.saving import saving_lib

        return saving_lib.load_model(path, compile=False, safe_mode=not trust)
    except Exception as exc:
        if "safe_mode" in str(exc) or "unsafe" in str(exc).lower():
            why = "it needs unsafe deserialisation (e.g. a Lambda layer)"
            raise refused(name, why) from None
        raise load_failure(f"Keras {keras.__version__} cannot load {name}", exc) from None


def _input_name(tensor: object) -> str:
    # Keras 2 files name input tensors "input_1:0" in places; the feed key is the layer's
    return str(getattr(tensor, "name", "input")).split(":")[0]


def _flatten(out: object) -> list[tf.Tensor]:
    import tensorflow as tf

    if isinstance(out, dict):
        return [out[key] for key in sorted(out)]
    return list(tf.nest.flatten(out))


def describe(path: str, kind: str, trust: bool) -> tuple[list[InputSpec], list[InputSpec]]:
    """(inputs, outputs) as TensorFlow loads the file (for `dlbench inspect`)."""
    loaded = load_user_model(path, kind, trust)
    return loaded.inputs, loaded.outputs
