"""What kind of model a user's file is, read from its content, not its name.

Exported models in the wild carry any extension (TorchScript as `.jit`,
Keras 2 HDF5 as `.hdf5` or `.model`, ONNX as `.bin`), so the file's own
bytes decide: a zip archive's layout, the HDF5 signature, a SavedModel's
`saved_model.pb`, an OpenVINO IR's XML root, a TFLite flatbuffer's
identifier, or an ONNX ModelProto's protobuf fields. Only the first bytes
(and a zip's directory) are read; a multi-GB file costs a few seeks.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from dlbench.errors import UserError

# Format names (the registry's `model_formats` use them) and what a user reads.
FORMATS = {
    "onnx": "ONNX model",
    "torchscript": "TorchScript archive",
    "torch-export": "torch.export program (.pt2)",
    "aoti-package": "AOTInductor package (.pt2)",
    "torch-pickle": "torch.save pickle",
    "keras": "Keras 3 archive (.keras)",
    "keras-h5": "Keras HDF5 file (.h5/.hdf5)",
    "savedmodel": "TensorFlow SavedModel directory",
    "openvino-ir": "OpenVINO IR (.xml + .bin)",
    "tflite": "TensorFlow Lite flatbuffer",
}
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZIP_SIGNATURE = b"PK\x03\x04"
# ModelProto's fields (onnx.proto): number -> protobuf wire type
ONNX_MODEL_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}
ONNX_GRAPH_FIELD = 7
# Formats that load by unpickling Python objects, which can run code from the file:
# a torch.save'd module needs torch.load(weights_only=False), and a state dict alone
# is no model. The parent refuses them, without loading anything, unless trusted.
PICKLED_FORMATS = ("torch-pickle",)


def model_format(path: Path) -> str:
    """One of FORMATS, or a UserError saying what the file looked like."""
    if path.is_dir():
        if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            return "savedmodel"
        raise UserError(
            f"--model {path}: a directory without saved_model.pb; only a TensorFlow "
            "SavedModel may be given as a directory"
        )
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        raise UserError(f"--model {path}: give the SavedModel's directory ({path.parent})")
    with path.open("rb") as file:
        head = file.read(4096)
    if head.startswith(HDF5_SIGNATURE):
        _check_hdf5_length(path, head)
        return "keras-h5"
    if head.startswith(ZIP_SIGNATURE):
        return _zip_format(path)
    if head[4:8] == b"TFL3":
        return "tflite"
    if head.lstrip().startswith(b"<?xml") and b"<net" in head:
        return "openvino-ir"
    if _is_onnx(path):
        return "onnx"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "torch-pickle"  # torch.save's legacy (non-zip) format
    raise UserError(
        f"--model {path}: not a model format dlbench reads (the file starts with "
        f"{_describe(head)}); it reads {', '.join(FORMATS.values())}"
    )


def require_trusted(path: Path, kind: str, trusted: bool, where: str = "--model") -> None:
    """UserError for a pickled model file the user has not vouched for (--trust-model)."""
    if kind in PICKLED_FORMATS and not trusted:
        raise UserError(
            f"{where} {path.name} is a {FORMATS[kind]}: loading it unpickles Python objects, "
            "which can run code from the file; pass --trust-model if you trust the file "
            "(TorchScript and torch.export .pt2 files load without it)"
        )


def _zip_format(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"--model {path}: a damaged zip archive ({exc})") from None
    # torch archives put everything under one top folder: "<name>/code/..."
    inner = {name.partition("/")[2] for name in names}
    if "config.json" in names and "model.weights.h5" in names:
        return "keras"
    if any(name.startswith("data/aotinductor/") for name in inner):
        return "aoti-package"
    if "archive_format" in inner and any(name.startswith("models/") for name in inner):
        return "torch-export"
    if "constants.pkl" in inner and any(name.startswith("code/") for name in inner):
        return "torchscript"
    if "data.pkl" in inner:
        return "torch-pickle"
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    raise UserError(
        f"--model {path}: a zip archive that is not TorchScript, torch.export, torch.save "
        f"or Keras (it holds {shown})"
    )


def _is_onnx(path: Path) -> bool:
    """Whether the file parses as a ModelProto's top-level fields, with a graph.

    A walk over field tags and lengths, seeking past values: cheap on large
    files, and strict enough that text, pickles or other protobufs fail it. A
    file that starts as a ModelProto (ir_version first, as every exporter
    writes it) but whose field runs past its end was cut short: UserError.
    """
    size = path.stat().st_size
    seen_graph = False
    with path.open("rb") as file:
        for index in range(64):
            if file.tell() >= size:
                return seen_graph
            tag = read_varint(file)
            if tag is None:
                return False
            number, wire = tag >> 3, tag & 7
            if ONNX_MODEL_FIELDS.get(number) != wire or (index == 0 and number != 1):
                return False
            value = read_varint(file)
            if value is None:
                return False
            if wire == 2:
                if file.tell() + value > size:
                    raise UserError(
                        f"--model {path}: an ONNX model cut short: a field needs "
                        f"{file.tell() + value - size} more bytes than the file has "
                        f"({size} bytes); a truncated download or copy?"
                    )
                file.seek(value, 1)
            seen_graph = seen_graph or number == ONNX_GRAPH_FIELD
    return seen_graph


def _check_hdf5_length(path: Path, head: bytes) -> None:
    """UserError where an HDF5 file is shorter than its superblock's end-of-file
    address says (the check HDF5 itself makes on open, as "truncated file")."""
    version = head[8] if len(head) > 8 else None
    if version in (0, 1):
        offsets = head[13]
        # v0: 24 bytes of fixed fields; v1 adds the indexed-storage K and 2 reserved
        start = (24 if version == 0 else 28) + 2 * offsets
    elif version in (2, 3):
        offsets = head[9]
        start = 12 + 2 * offsets
    else:
        return  # a layout this check does not know: leave it to the loader
    if offsets not in (2, 4, 8) or len(head) < start + offsets:
        return
    end = int.from_bytes(head[start : start + offsets], "little")
    size = path.stat().st_size
    if end > size:
        raise UserError(
            f"--model {path}: an HDF5 file cut short: its header says {end} bytes, the "
            f"file has {size}; a truncated download or copy?"
        )


def read_varint(file: object) -> int | None:
    """A protobuf varint at the file's position; None at its end or past 10 bytes."""
    result = shift = 0
    for _ in range(10):
        byte = file.read(1)  # type: ignore[attr-defined]
        if not byte:
            return None
        result |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return result
        shift += 7
    return None


def _describe(head: bytes) -> str:
    if not head:
        return "nothing: it is empty"
    sample = head[:16]
    if all(32 <= b < 127 or b in (9, 10, 13) for b in sample):
        return f"text {sample.decode('ascii')!r}"
    return f"bytes {sample.hex(' ')}"
