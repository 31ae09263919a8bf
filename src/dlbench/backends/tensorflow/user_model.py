"""Loading a user's Keras file or SavedModel: Keras files with safe_mode on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.backends.base import REFUSED, load_error
from dlbench.errors import CaseError
from dlbench.workloads.user_model import InputSpec


def load_keras_or_savedmodel(path: str, trust: bool) -> tuple[Any, list[InputSpec], str]:
    """(callable taking a dict of arrays, signature, kind)."""
    import tensorflow as tf

    name = Path(path).name
    if Path(path).is_dir():
        try:
            function = tf.saved_model.load(path).signatures["serving_default"]
        except Exception as exc:
            raise CaseError(f"cannot load SavedModel {name}: {load_error(exc)}") from None
        specs = function.structured_input_signature[1]
        signature = [InputSpec(key, tuple(spec.shape.as_list()), spec.dtype.name)
                     for key, spec in specs.items()]  # fmt: skip
        return (lambda feeds: next(iter(function(**feeds).values()))), signature, "savedmodel"
    import keras

    try:
        model = keras.saving.load_model(path, safe_mode=not trust, compile=False)
    except Exception as exc:
        if "safe_mode" in str(exc) or "unsafe" in str(exc).lower():
            raise CaseError(REFUSED.format(name=name, why="it needs unsafe deserialisation "
                                           "(e.g. a Lambda layer)")) from None  # fmt: skip
        raise CaseError(f"cannot load Keras file {name}: {load_error(exc)}") from None
    signature = [InputSpec(t.name, tuple(t.shape), str(t.dtype)) for t in model.inputs]
    names = [spec.name for spec in signature]

    def call(feeds: dict[str, Any]) -> Any:
        args = [feeds[n] for n in names]
        return model(args[0] if len(args) == 1 else args, training=False)

    return call, signature, "keras"
