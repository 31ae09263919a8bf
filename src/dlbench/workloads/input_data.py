"""What an --input-data file holds, read from its .npy headers alone.

An .npy header is a few hundred bytes that give the array's dtype and shape;
an .npz is a zip of .npy members, each read from its start only. So the
parent can refuse an object array (unpickling it could run code) or an array
larger than the machine's memory before anything is loaded: a 4 MB .npz of
compressed zeros can expand to gigabytes, and its header says so first.
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from dlbench.errors import UserError, first_line

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
# np.save's header versions and their readers (3.0 exists only for structured
# dtypes with non-Latin-1 field names, which are no model's input)
HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
# Element kinds a model input can be fed from: bool, signed, unsigned, float, and
# str or bytes for a string input (workloads.user_model says which frameworks take them)
INPUT_KINDS = "biufUS"


@dataclass(frozen=True)
class ArrayHeader:
    """One array of the file: its name ("" for an .npy file), shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Its size once loaded (exact: a bogus header must not overflow int64)."""
        return math.prod(self.shape) * self.dtype.itemsize

    def text(self) -> str:
        shape = "x".join(map(str, self.shape)) or "scalar"
        return f"{self.name or 'the array'} {shape} {self.dtype}"


def read_headers(path: Path) -> list[ArrayHeader]:
    """Every array's header, or a UserError naming the file and what is wrong with it.

    Refuses anything but numeric and boolean arrays: an object array needs
    pickle to load, and text or records are no model's input.
    """
    try:
        with path.open("rb") as file:
            magic = file.read(len(NPY_MAGIC))
            if magic.startswith(ZIP_MAGIC):
                headers = _zip_headers(path)
            elif magic == NPY_MAGIC:
                file.seek(0)
                headers = [_header("", file)]
            else:
                raise ValueError(f"it starts with {magic!r}")
    except (OSError, ValueError, EOFError, SyntaxError, zipfile.BadZipFile) as exc:
        raise UserError(
            f"--input-data {path}: not a NumPy .npz or .npy file ({first_line(exc)})"
        ) from None
    if not headers:
        raise UserError(f"--input-data {path}: the .npz file holds no arrays")
    for header in headers:
        _require_input_kind(path, header)
    return headers


def _zip_headers(path: Path) -> list[ArrayHeader]:
    headers = []
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            if not member.endswith(".npy"):
                raise ValueError(f"member {member!r} is not an .npy array")
            with archive.open(member) as stream:  # decompresses only what is read
                headers.append(_header(member.removesuffix(".npy"), stream))
    return headers


def _header(name: str, stream: IO[bytes]) -> ArrayHeader:
    version = np.lib.format.read_magic(stream)
    reader = HEADER_READERS.get(version)
    if reader is None:
        raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    shape, _fortran_order, dtype = reader(stream)
    return ArrayHeader(name, tuple(int(n) for n in shape), np.dtype(dtype))


def _require_input_kind(path: Path, header: ArrayHeader) -> None:
    where = f"--input-data {path}: array {header.name!r}" if header.name else (
        f"--input-data {path}")  # fmt: skip
    if header.dtype.hasobject:
        raise UserError(
            f"{where} holds Python objects (dtype object), which only pickle can load and "
            "loading could run code; save numeric arrays (float32, int64, bool, ...)"
        )
    if header.dtype.kind not in INPUT_KINDS or header.dtype.fields is not None:
        raise UserError(
            f"{where} is {header.dtype}; model inputs are numeric, boolean or string arrays "
            "(float32, int64, bool, str, ...)"
        )
