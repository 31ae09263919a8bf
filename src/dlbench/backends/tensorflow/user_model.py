"""Loading a user's Keras file or SavedModel: Keras files with safe_mode on.

SavedModels load through `tf.saved_model.load` and a serving signature, not
through Keras: that reads SavedModels written by older TensorFlow and Keras 2,
whose Keras objects the installed Keras cannot rebuild. Keras 2 HDF5 files
(`.h5`, `.hdf5`, or any name) go through Keras' legacy HDF5 loader with
compile=False: the training config of an old file is not needed to infer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlbench.backends.base import load_failure, refused
from dlbench.errors import CaseError
from dlbench.workloads.user_model import InputSpec

SERVING_SIGNATURE = "serving_default"
# Callable on a dict of tensors by input name; returns every output, in order.
ModelCall = Callable[[dict[str, Any]], list[Any]]


def load_keras_or_savedmodel(
    path: str, kind: str, trust: bool
) -> tuple[ModelCall, list[InputSpec], list[InputSpec]]:
    """(call, inputs, outputs) for a savedmodel, keras or keras-h5 file."""
    if kind == "savedmodel":
        return _savedmodel(path)
    model = _keras_model(path, kind, trust)
    signature = [
        InputSpec(_input_name(t), tuple(t.shape), _dtype_name(t.dtype)) for t in model.inputs
    ]
    names = [spec.name for spec in signature]

    def call(feeds: dict[str, Any]) -> list[Any]:
        args = [feeds[n] for n in names]
        out = model(args[0] if len(args) == 1 else args, training=False)
        return _flatten(out)

    outputs = [
        InputSpec(getattr(t, "name", f"output_{i}"), tuple(t.shape), _dtype_name(t.dtype))
        for i, t in enumerate(model.outputs)
    ]
    return call, signature, outputs


def _savedmodel(path: str) -> tuple[ModelCall, list[InputSpec], list[InputSpec]]:
    import tensorflow as tf

    name = Path(path).name
    try:
        loaded = tf.saved_model.load(path)
    except Exception as exc:
        raise load_failure(
            f"TensorFlow {tf.__version__} cannot load SavedModel {name}", exc
        ) from None
    signatures = dict(loaded.signatures)
    if not signatures:
        raise CaseError(f"SavedModel {name} has no signatures to serve; dlbench calls one")
    if SERVING_SIGNATURE in signatures:
        function = signatures[SERVING_SIGNATURE]
    elif len(signatures) == 1:
        function = next(iter(signatures.values()))
    else:
        raise CaseError(
            f"SavedModel {name} has no {SERVING_SIGNATURE!r} signature and several others "
            f"({', '.join(sorted(signatures))}); dlbench cannot choose"
        )
    specs = function.structured_input_signature[1]
    signature = [InputSpec(key, _dims(spec.shape), _dtype_name(spec.dtype))
                 for key, spec in specs.items()]  # fmt: skip
    structured = function.structured_outputs
    keys = sorted(structured)
    outputs = [InputSpec(key, _dims(structured[key].shape), _dtype_name(structured[key].dtype))
               for key in keys]  # fmt: skip

    def call(feeds: dict[str, Any]) -> list[Any]:
        result = function(**feeds)
        return [result[key] for key in keys]

    # keep the loaded object alive: the signature's variables belong to it
    call.loaded = loaded  # type: ignore[attr-defined]
    return call, signature, outputs


def _keras_model(path: str, kind: str, trust: bool) -> Any:
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


def _dims(shape: Any) -> tuple[int | None, ...] | None:
    return None if shape.rank is None else tuple(shape.as_list())


def _input_name(tensor: Any) -> str:
    # Keras 2 files name input tensors "input_1:0" in places; the feed key is the layer's
    return str(getattr(tensor, "name", "input")).split(":")[0]


def _dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def _flatten(out: Any) -> list[Any]:
    import tensorflow as tf

    if isinstance(out, dict):
        return [out[key] for key in sorted(out)]
    return list(tf.nest.flatten(out))


def describe(path: str, kind: str, trust: bool) -> tuple[list[InputSpec], list[InputSpec]]:
    """(inputs, outputs) as TensorFlow loads the file (for `dlbench inspect`)."""
    _, inputs, outputs = load_keras_or_savedmodel(path, kind, trust)
    return inputs, outputs
