"""`user-model`: a model file the user brings (ONNX, TorchScript, Keras/SavedModel).

Its inputs come from the model's own signature: each framework's backend
reads the signature and calls `resolve_inputs`, which fills dynamic
dimensions from --input specs and makes the same seeded arrays for every
framework. Its FLOPs are unknown, so results report no GFLOP/s.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlbench.errors import UserError
from dlbench.spec.registry import FRAMEWORKS
from dlbench.workloads.base import WeightDict, Workload

DTYPES = ("float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")
SPEC = re.compile(r"(?P<name>[^:]+):(?P<shape>\d+(x\d+)*)(:(?P<dtype>[a-z0-9]+))?")
# File kinds and the frameworks that run them
ONNX_SUFFIXES = (".onnx",)
TORCH_SUFFIXES = (".pt", ".pth", ".ts", ".torchscript")
KERAS_SUFFIXES = (".keras", ".h5")


@dataclass(frozen=True)
class InputSpec:
    """One model input: dims are ints, or None where the model leaves them dynamic."""

    name: str
    dims: tuple[int | None, ...] | None  # None: the format records no shape (TorchScript)
    dtype: str


def parse_input_option(text: str) -> tuple[str, str]:
    """`name:8x3x32x32[:dtype]` -> (name, "8x3x32x32:dtype"), or a UserError saying the form."""
    match = SPEC.fullmatch(text.strip())
    if match is None:
        raise UserError(
            f"--input {text!r}: expected NAME:SHAPE[:DTYPE], e.g. pixels:8x3x32x32:float32"
        )
    dtype = match["dtype"] or ""
    if dtype and dtype not in DTYPES:
        raise UserError(f"--input {text!r}: unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
    if any(int(d) <= 0 for d in match["shape"].split("x")):
        raise UserError(f"--input {text!r}: every dimension must be > 0")
    return match["name"], f"{match['shape']}:{dtype}"


def frameworks_for(path: Path) -> tuple[str, ...]:
    """The frameworks that can run a model file: those that load its format (registry)."""
    kind = model_format(path)
    return tuple(name for name, info in FRAMEWORKS.items() if kind in info.model_formats)


def model_format(path: Path) -> str:
    """onnx, torchscript, keras or savedmodel, or a UserError saying what is accepted."""
    if path.is_dir():
        return "savedmodel"
    suffix = path.suffix.lower()
    if suffix in ONNX_SUFFIXES:
        return "onnx"
    if suffix in TORCH_SUFFIXES:
        return "torchscript"
    if suffix in KERAS_SUFFIXES:
        return "keras"
    allowed = ", ".join(ONNX_SUFFIXES + TORCH_SUFFIXES + KERAS_SUFFIXES)
    raise UserError(
        f"--model {path}: unknown kind of model file; expected {allowed} or a SavedModel directory"
    )


def resolve_inputs(
    signature: Sequence[InputSpec], given: Mapping[str, str], seed: int
) -> dict[str, np.ndarray]:
    """Seeded arrays for every input, shapes completed from --input; clear errors otherwise."""
    from dlbench.errors import CaseError

    names = [spec.name for spec in signature]
    unknown = [name for name in given if name not in names]
    if unknown:
        raise CaseError(f"the model has no input {unknown[0]!r}; its inputs: {', '.join(names)}")
    arrays = {}
    for spec in signature:
        shape, dtype = _shape_and_dtype(spec, given.get(spec.name))
        rng = np.random.default_rng(seed + zlib.crc32(spec.name.encode()))
        arrays[spec.name] = _random_array(rng, shape, dtype)
    return arrays


def _shape_and_dtype(spec: InputSpec, option: str | None) -> tuple[tuple[int, ...], str]:
    from dlbench.errors import CaseError

    if option is not None:
        dims_text, _, dtype = option.partition(":")
        shape = tuple(int(d) for d in dims_text.split("x"))
        if spec.dims is not None and len(spec.dims) != len(shape):
            raise CaseError(
                f"--input {spec.name}: the model's input has rank {len(spec.dims)}, "
                f"not {len(shape)}"
            )
        return shape, dtype or spec.dtype
    if spec.dims is None or any(d is None for d in spec.dims):
        known = (
            "?" if spec.dims is None else "x".join("?" if d is None else str(d) for d in spec.dims)
        )
        raise CaseError(
            f"input {spec.name!r} has dynamic or unknown dimensions ({known}); "
            f"give them with --input {spec.name}:SHAPE, e.g. "
            f"--input {spec.name}:{known.replace('?', '1')}"
        )
    return tuple(d for d in spec.dims if d is not None), spec.dtype


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(0, 100, size=shape).astype(dtype)  # valid ids for most vocabularies


class UserModelWorkload(Workload):
    name = "user-model"
    description = (
        "a model file you bring: --model FILE (.onnx, TorchScript .pt, .keras, SavedModel)"
    )
    modes = ("infer",)

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 0.0  # unknown: no GFLOP/s is claimed

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        raise NotImplementedError("user models take their inputs from the model's signature")


USER_MODEL = UserModelWorkload()
