"""A model file's signature as a framework's loader reads it, and the request and the
answer of the loader's process (`dlbench inspect`, and `dlbench run`'s check of a
--model before its run: launch.inspect starts worker.inspect_model).

Records only, without NumPy, so that the parent process reads a loader's answer typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar


@dataclass(frozen=True)
class InputSpec:
    """One model input: dims are ints, or None where the model leaves them dynamic.

    `scalar` marks a plain Python argument (a TorchScript `int sr`), which is
    called with a number, not a tensor, and must be given with --input-data.
    """

    # its JSON (a loader's answer, `dlbench inspect --json`) holds every field
    WRITES_EVERY_FIELD: ClassVar[bool] = True

    name: str
    dims: tuple[int | None, ...] | None  # None: the format records no shape (TorchScript)
    dtype: str
    scalar: bool = False
    optional: bool = False  # the model has a default for it: left out unless given
    # False where the format records no element type (a TorchScript or Python
    # `Tensor` argument): `dtype` is then only the default for generated values,
    # and --input-data may give any numeric type (int64 token ids, say)
    typed: bool = True

    def shape_text(self) -> str:
        if self.scalar:
            return f"python {self.dtype}"
        if self.dims is None:
            return "?"
        return "x".join("?" if d is None else str(d) for d in self.dims) or "scalar"


@dataclass(frozen=True)
class LoaderRequest:
    """What one loader process is asked: read the file at `path`, of format `kind`
    (workloads.model_format), with `framework`; `trust`: it may unpickle it."""

    framework: str
    kind: str
    path: Path
    trust: bool = False


@dataclass(frozen=True)
class LoaderAnswer:
    """What the loader saw: the inputs and outputs, or why it cannot load the file
    (`untrusted`: it loads only unsafely, and the user did not trust it)."""

    ok: bool
    error: str | None = None
    untrusted: bool = False
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[InputSpec, ...] = ()

    def __post_init__(self) -> None:
        if not self.ok and not self.error:
            raise ValueError("an answer that the file does not load says why (error)")
