"""Loading a user's model file safely, per framework, and reading its inputs.

Nothing here unpickles an untrusted file: torch files load as TorchScript
(whose archive loader rebuilds tensors only) or with weights_only=True, and
Keras files with safe_mode on. What would need full unpickling is refused
with a message naming --trust-model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.backends.base import first_line
from dlbench.errors import CaseError
from dlbench.workloads.user_model import InputSpec

REFUSED = ("refused to load {name}: {why}, which can run code from the file; "
           "pass --trust-model if you trust it")  # fmt: skip


def load_error(exc: BaseException) -> str:
    """A framework's load error, short enough to quote inside dlbench's own message."""
    return first_line(exc, limit=200)


ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
             "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8",
             "tensor(uint8)": "uint8", "tensor(bool)": "bool"}  # fmt: skip
OV_TYPES = {"f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64", "i32": "int32",
            "i8": "int8", "u8": "uint8", "boolean": "bool"}  # fmt: skip


def ort_signature(session: Any) -> list[InputSpec]:
    return [
        InputSpec(i.name, tuple(d if isinstance(d, int) and d > 0 else None for d in i.shape),
                  ORT_TYPES.get(i.type, "float32"))
        for i in session.get_inputs()
    ]  # fmt: skip


def ov_signature(model: Any) -> list[InputSpec]:
    specs = []
    for port in model.inputs:
        shape = port.get_partial_shape()
        dims = None if shape.rank.is_dynamic else tuple(
            d.get_length() if d.is_static else None for d in shape)  # fmt: skip
        dtype = OV_TYPES.get(port.get_element_type().get_type_name(), "float32")
        specs.append(InputSpec(port.get_any_name(), dims, dtype))
    return specs


def load_torch_model(path: str, trust: bool) -> tuple[Any, str]:
    """A runnable module: TorchScript, or (only with trust) a pickled nn.Module."""
    import torch

    name = Path(path).name
    try:
        return torch.jit.load(path, map_location="cpu"), "torchscript"
    except Exception as jit_error:  # not TorchScript: find out what it is, safely
        reason = load_error(jit_error)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        if "Weights only load failed" not in str(exc):
            raise CaseError(
                f"cannot read {name}: not a TorchScript or torch file ({reason})"
            ) from None
        if not trust:
            raise CaseError(REFUSED.format(name=name, why="it is not TorchScript and needs full "
                                           "unpickling")) from None  # fmt: skip
        loaded = torch.load(path, map_location="cpu", weights_only=False)  # the user vouched
    if isinstance(loaded, torch.nn.Module):
        return loaded, "pickled nn.Module (--trust-model)"
    raise CaseError(
        f"{name} holds {type(loaded).__name__}, not a model (weights only?); "
        "save a module with torch.jit.save(torch.jit.script(model), ...)"
    )


def torch_signature(module: Any) -> list[InputSpec]:
    """TorchScript records argument names but no shapes: --input must give them."""
    import inspect

    if hasattr(module, "forward") and hasattr(module.forward, "schema"):
        names = [a.name for a in module.forward.schema.arguments[1:]]
    else:
        names = list(inspect.signature(module.forward).parameters)
    return [InputSpec(name, None, "float32") for name in names]


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
