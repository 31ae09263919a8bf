"""A SavedModel's signatures: which one dlbench serves, and its tensors as InputSpecs.

Shared by both loaders (`tf.saved_model.load`, and TF1's in graph_loader), so a
model reads the same inputs and outputs whichever one runs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from dlbench.errors import CaseError

if TYPE_CHECKING:  # TensorFlow ships no types usable here
    import tensorflow as tf

SERVING_SIGNATURE = "serving_default"


def pick_signature(names: Iterable[str], model_name: str) -> str:
    """`serving_default`, else the only signature; a CaseError where there is no choice."""
    found = sorted(names)
    if SERVING_SIGNATURE in found:
        return SERVING_SIGNATURE
    if len(found) == 1:
        return found[0]
    if not found:
        raise CaseError(f"SavedModel {model_name} has no signatures to serve; dlbench calls one")
    raise CaseError(
        f"SavedModel {model_name} has no {SERVING_SIGNATURE!r} signature and several others "
        f"({', '.join(found)}); dlbench cannot choose"
    )


def dims(shape: tf.TensorShape) -> tuple[int | None, ...] | None:
    """A TensorShape's dimensions (None where dynamic), or None for an unknown rank."""
    return None if shape.rank is None else tuple(shape.as_list())


def dtype_name(dtype: object) -> str:
    """A TensorFlow dtype's name, as InputSpec holds it ("float32"; "string": tf.string)."""
    return str(getattr(dtype, "name", dtype))
