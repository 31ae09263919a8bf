"""`user-model`: a model file the user brings (ONNX, TorchScript, Keras/SavedModel).

Its inputs come from the model's own signature: each framework's backend
reads the signature and calls `resolve_inputs`, which fills dynamic
dimensions from --input specs and makes the same seeded arrays for every
framework. Its FLOPs are unknown, so results report no GFLOP/s.
"""

from __future__ import annotations

import math
import re
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np

from dlbench.errors import CaseError, UserError, first_line
from dlbench.spec.case import Case
from dlbench.spec.model_signature import InputSpec
from dlbench.spec.registry import FRAMEWORKS
from dlbench.workloads.base import WeightDict, Workload
from dlbench.workloads.input_data import read_headers
from dlbench.workloads.memory import size_text
from dlbench.workloads.model_format import model_format

DTYPES = ("float32", "float16", "float64", "int64", "int32", "int16", "int8", "uint64", "uint32",
          "uint16", "uint8", "bool")  # fmt: skip
# NAME:SHAPE[:DTYPE], where NAME may itself hold colons (TensorFlow's
# "serving_default_x:0"): the shape is the last field made of digits and x's,
# and a dtype after it is one of DTYPES.
SPEC = re.compile(r"(?P<name>.+):(?P<shape>\d+(?:x\d+)*)(?::(?P<dtype>" + "|".join(DTYPES) + r"))?")
# An input of strings (ONNX's tensor(string), TensorFlow's tf.string, OpenVINO's
# string): its values come from --input-data, as a NumPy str (U) or bytes (S) array.
STRING = "string"


def input_dtype(name: str, dtype: str | None, framework_type: str) -> str:
    """An input's NumPy dtype (or STRING), or a CaseError for one dlbench cannot make
    (bfloat16): feeding float32 in its place would fail, or measure something else."""
    if dtype is None:
        raise CaseError(
            f"input {name!r} is {framework_type}; dlbench feeds {', '.join(DTYPES)} "
            "and string tensors"
        )
    return dtype


def parse_input_option(text: str) -> tuple[str, str]:
    """`name:8x3x32x32[:dtype]` -> (name, "8x3x32x32:dtype"), or a UserError saying the form."""
    match = SPEC.fullmatch(text.strip())
    if match is None:
        tail = text.rpartition(":")[2]
        hint = (
            f"unknown dtype {tail!r}; allowed: {', '.join(DTYPES)}"
            if re.fullmatch(r"[a-z][a-z0-9]*", tail) and ":" in text.rpartition(":")[0]
            else "expected NAME:SHAPE[:DTYPE], e.g. pixels:8x3x32x32:float32 "
            "(a NAME may hold colons: serving_default_x:0:1x224x224x3)"
        )
        raise UserError(f"--input {text!r}: {hint}")
    if any(int(d) <= 0 for d in match["shape"].split("x")):
        raise UserError(f"--input {text!r}: every dimension must be > 0")
    return match["name"], f"{match['shape']}:{match['dtype'] or ''}"


def frameworks_for(path: Path) -> tuple[str, ...]:
    """The frameworks that can run a model file: those that load its format (registry)."""
    kind = model_format(path)
    return tuple(name for name, info in FRAMEWORKS.items() if kind in info.model_formats)


def load_input_data(path: Path) -> dict[str, np.ndarray]:
    """--input-data: arrays by input name (.npz), or one array ("" key) for a .npy file.

    The headers are read first (object arrays and non-numeric ones are refused
    there); the arrays load without pickle, so a data file cannot run code.
    """
    read_headers(path)
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return {"": loaded}
        with loaded:  # an .npz member is read, and can fail, only here
            return {name: loaded[name] for name in loaded.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise UserError(
            f"--input-data {path}: not a NumPy .npz or .npy file ({first_line(exc)})"
        ) from None


def resolve_inputs(
    signature: Sequence[InputSpec],
    given: Mapping[str, str],
    seed: int,
    batch_size: int | None = None,
    data: Mapping[str, np.ndarray] | None = None,
    max_bytes: int | None = None,
) -> dict[str, np.ndarray]:
    """The arrays every framework feeds this model, checked against its signature.

    Values come from --input-data where given; otherwise seeded random values
    of the shape from --input, or from the model with a dynamic leading
    (batch) dimension set to `batch_size` (default 1). With --input-data, an
    input the model needs must be in the file or in --input. Inputs with a
    default in the model are left out unless given. The values made must fit
    in `max_bytes` where it is given (the memory left for them).
    """
    data = _keyed_data(signature, given, data or {})
    arrays: dict[str, np.ndarray] = {}
    made: dict[str, tuple[tuple[int, ...], str]] = {}  # shape and dtype, made once all fit
    for spec in signature:
        if spec.name in data:
            arrays[spec.name] = _checked_data(spec, data[spec.name])
            shape = arrays[spec.name].shape
        elif spec.optional and spec.name not in given:
            continue
        elif data and spec.name not in given:
            # real data for some inputs and noise for others would measure neither
            raise CaseError(
                f"--input-data has no array {spec.name!r}, an input the model needs; the "
                f"file holds {', '.join(sorted(data))} (give it there, or with --input)"
            )
        else:
            made[spec.name] = _shape_and_dtype(spec, given.get(spec.name), batch_size)
            shape = made[spec.name][0]
        _check_batch_agrees(spec, shape, batch_size)
    _require_room(made, max_bytes)
    for name, (shape, dtype) in made.items():
        rng = np.random.default_rng(seed + zlib.crc32(name.encode()))
        arrays[name] = _random_array(rng, shape, dtype)
    return {spec.name: arrays[spec.name] for spec in signature if spec.name in arrays}


def _keyed_data(
    signature: Sequence[InputSpec], given: Mapping[str, str], data: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """--input-data's arrays by input name (a .npy's one array: the model's one input),
    and a CaseError for a name in it or in --input that the model does not have."""
    names = [spec.name for spec in signature]
    data = dict(data)
    if "" in data:
        required = [spec.name for spec in signature if not spec.optional]
        if len(required) != 1:
            raise CaseError(
                f"--input-data: a .npy file feeds a single-input model; this one has "
                f"{len(required)} inputs ({', '.join(names)}): use an .npz keyed by name"
            )
        data[required[0]] = data.pop("")
    for source, keys in (("--input", given), ("--input-data", data)):
        unknown = [name for name in keys if name not in names]
        if unknown:
            raise CaseError(
                f"{source}: the model has no input {unknown[0]!r}; its inputs: {', '.join(names)}"
            )
    return data


def _require_room(made: Mapping[str, tuple[tuple[int, ...], str]], max_bytes: int | None) -> None:
    """A CaseError where the values to make would not fit: -b on a dynamic batch
    dimension is bounded only by the model's other dimensions."""
    nbytes = sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in made.values())
    if max_bytes is not None and nbytes > max_bytes:
        shapes = ", ".join(
            f"{name} {'x'.join(map(str, shape))} {dtype}" for name, (shape, dtype) in made.items()
        )
        raise CaseError(
            f"the inputs made for it ({shapes}) need {size_text(nbytes)}; this machine has "
            f"{size_text(max(max_bytes, 0))} of memory left for them: lower --batch-size or "
            "the --input shapes"
        )


def _check_batch_agrees(spec: InputSpec, shape: tuple[int, ...], batch_size: int | None) -> None:
    """-b and a given shape or array must not disagree on a dynamic batch dimension:
    the result would be labelled with one batch and measured with the other."""
    dynamic_batch = spec.dims is not None and len(spec.dims) > 0 and spec.dims[0] is None
    if batch_size is not None and dynamic_batch and shape[0] != batch_size:
        raise CaseError(
            f"--batch-size {batch_size}, but input {spec.name!r} is given with a first "
            f"dimension of {shape[0]}; leave -b out or make them agree"
        )


def model_inputs(case: Case, signature: Sequence[InputSpec], seed: int) -> dict[str, np.ndarray]:
    """A user-model case's inputs: its --input shapes, --input-data values and batch size."""
    input_data = case.given_model.input_data
    data = load_input_data(Path(input_data)) if input_data else None
    return case_inputs(case, signature, seed, data)


def case_inputs(
    case: Case,
    signature: Sequence[InputSpec],
    seed: int,
    data: Mapping[str, np.ndarray] | None,
    max_bytes: int | None = None,
) -> dict[str, np.ndarray]:
    """`resolve_inputs` for the case's framework, with string inputs as it takes them
    (spec.registry's `string_inputs`), or a CaseError where it takes none; `max_bytes`
    bounds what the made inputs may take (the memory left)."""
    takes = FRAMEWORKS[case.framework].string_inputs
    strings = [spec.name for spec in signature if spec.dtype == STRING]
    if strings and takes is None:
        kind = model_format(Path(case.given_model.model))
        takers = [name for name, info in FRAMEWORKS.items()
                  if kind in info.model_formats and info.string_inputs]  # fmt: skip
        run_on = f"run it with -f {takers[0]}" if takers else f"no framework reading {kind} does"
        raise CaseError(
            f"input {strings[0]!r} is a string tensor, and dlbench feeds {case.framework} "
            f"no strings; {run_on}"
        )
    inputs = dict(case.given_model.inputs)
    arrays = resolve_inputs(signature, inputs, seed, case.batch_size, data, max_bytes)
    if takes == "text":
        for name in strings:
            arrays[name] = _utf8_text(name, arrays[name], case.framework)
    return arrays


def _utf8_text(name: str, array: np.ndarray, framework: str) -> np.ndarray:
    """A str array for a runtime that takes strings as text: a bytes array decoded."""
    if array.dtype.kind == "U":
        return array
    try:
        return np.char.decode(array, "utf-8")
    except UnicodeDecodeError as exc:
        raise CaseError(
            f"--input-data: input {name!r} holds bytes that are not UTF-8 text ({exc.reason}); "
            f"{framework} takes strings as text: give a str array"
        ) from None


def _checked_data(spec: InputSpec, array: np.ndarray) -> np.ndarray:
    where = f"--input-data: input {spec.name!r}"
    loose = spec.scalar or not spec.typed
    if spec.dtype == STRING:
        if array.dtype.kind not in "US":
            raise CaseError(
                f"{where} is {array.dtype} in the file; the model takes strings "
                "(a NumPy str or bytes array)"
            )
    elif array.dtype.kind in "US":  # said plainly, not as "is <U3"
        raise CaseError(f"{where} holds strings in the file; the model takes {spec.dtype}")
    elif array.dtype != np.dtype(spec.dtype) and not (loose and array.dtype.kind in "iufb"):
        raise CaseError(f"{where} is {array.dtype} in the file; the model takes {spec.dtype}")
    if spec.scalar:
        if array.ndim != 0:
            raise CaseError(f"{where} is a plain {spec.dtype} argument: give a 0-d array")
        return array.astype(spec.dtype)
    if spec.dims is not None and (
        len(spec.dims) != array.ndim
        or any(d is not None and d != n for d, n in zip(spec.dims, array.shape, strict=True))
    ):
        raise CaseError(
            f"{where} has shape {'x'.join(map(str, array.shape)) or 'scalar'} in the file; "
            f"the model takes {spec.shape_text()}"
        )
    return np.require(array, requirements="C")  # ascontiguousarray would make a 0-d 1-d


def _shape_and_dtype(
    spec: InputSpec, option: str | None, batch_size: int | None
) -> tuple[tuple[int, ...], str]:
    if spec.scalar:
        raise CaseError(
            f"input {spec.name!r} is a plain {spec.dtype} argument, not a tensor: give its "
            f"value with --input-data FILE.npz (a 0-d array named {spec.name})"
        )
    if spec.dtype == STRING:
        raise CaseError(
            f"input {spec.name!r} takes strings, and dlbench makes up no text: give its "
            f"values with --input-data FILE.npz (a NumPy str or bytes array named {spec.name})"
        )
    if option is not None:
        dims_text, _, dtype = option.partition(":")
        shape = tuple(int(d) for d in dims_text.split("x"))
        if spec.dims is not None and (
            len(spec.dims) != len(shape)
            or any(d is not None and d != n for d, n in zip(spec.dims, shape, strict=True))
        ):
            raise CaseError(
                f"--input {spec.name}:{dims_text}: the model's input is {spec.shape_text()}"
            )
        return shape, dtype or spec.dtype
    if spec.dims is None:
        raise CaseError(
            f"input {spec.name!r}: the model file records no shape for it; give one with "
            f"--input {spec.name}:SHAPE (e.g. --input {spec.name}:1x3x224x224) or --input-data"
        )
    dims = list(spec.dims)
    if dims and dims[0] is None:
        dims[0] = batch_size or 1
    elif dims and batch_size is not None and dims[0] != batch_size:
        raise CaseError(
            f"input {spec.name!r} has a fixed first dimension of {dims[0]}, so --batch-size "
            f"{batch_size} cannot apply; leave -b out"
        )
    if any(d is None for d in dims):
        filled = "x".join("?" if d is None else str(d) for d in dims)
        raise CaseError(
            f"input {spec.name!r} has dynamic dimensions beyond the batch ({filled}); give "
            f"them with --input {spec.name}:{filled.replace('?', 'N')} or --input-data"
        )
    return tuple(int(d) for d in dims if d is not None), spec.dtype


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(0, 100, size=shape).astype(dtype)  # valid ids for most vocabularies


class UserModelWorkload(Workload):
    name = "user-model"
    description = (
        "a model file you bring: --model FILE (ONNX, TorchScript, torch.export .pt2, Keras "
        ".keras/.h5, SavedModel, OpenVINO IR, TFLite), with --input and --input-data"
    )
    modes = ("infer",)
    compile_modes = MappingProxyType({"torch": ("eager", "compile", "export")})

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 0.0  # unknown: no GFLOP/s is claimed

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 0.0  # from the case's --input and --input-data instead (plan.memory)

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        raise NotImplementedError("user models take their inputs from the model's signature")


USER_MODEL = UserModelWorkload()
