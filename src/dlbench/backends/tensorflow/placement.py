"""Where TensorFlow put a case's tensors and variables, each one of them.

TensorFlow places an op where a kernel for it exists, and (soft placement, on by
default) quietly on the CPU where the asked device has none; a variable made
outside the device scope lands on the host. So every input, every variable and
(on the output check's call, after measurement) every output is asked for its
device, not one tensor for all. Strings live on the host whatever the device,
so only tensors of numbers are asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import tensorflow as tf

from dlbench.backends.placement import placement_of_each, require_outputs_with
from dlbench.results.details import Placement
from dlbench.untyped import FrameworkValue

BY = "TensorFlow"


def tf_kind(device: str) -> str:
    """The device kind of a TensorFlow device string (".../device:GPU:0")."""
    return "cuda" if "GPU" in device.upper() else "cpu"


def tf_placement(pieces: Mapping[str, FrameworkValue]) -> Placement | None:
    """Where TensorFlow put each tensor or variable of `pieces` (by a name of each);
    None where none holds numbers."""
    placed = {name: device_of(p) for name, p in pieces.items() if _numeric(p)}
    return placement_of_each(BY, placed, tf_kind) if placed else None


def by_name(variables: Iterable[FrameworkValue]) -> dict[str, FrameworkValue]:
    """Variables by a name unique in the model: a Keras variable's path
    ("sequential/dense/kernel"), else TensorFlow's own name ("dense/kernel:0")."""
    return {getattr(v, "path", None) or v.name: v for v in variables}


def require_outputs_placed(placement: Placement | None, outputs: Iterable[FrameworkValue]) -> None:
    """A CaseError unless every output tensor is where the inputs and variables were
    (nothing to hold them to where no input or variable held numbers)."""
    if placement is None:
        return
    devices = {f"output {i}": device_of(t) for i, t in enumerate(outputs) if _numeric(t)}
    require_outputs_with(placement, devices, tf_kind)


def device_of(piece: object) -> str:
    """A tensor's or variable's device (a Keras variable holds its TensorFlow one in
    `value`); "unplaced" where TensorFlow names none."""
    device = getattr(piece, "device", None)
    if device is None and hasattr(piece, "value"):
        device = piece.value.device
    return str(device or "unplaced")


def _numeric(piece: object) -> bool:
    return getattr(piece, "dtype", None) not in ("string", tf.string)
