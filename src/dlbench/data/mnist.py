"""MNIST from its IDX files, checked before use, and a learnable synthetic stand-in.

The IDX format (http://yann.lecun.com/exdb/mnist/): two zero bytes, a type
code (0x08 = unsigned byte, the only one MNIST uses), the number of
dimensions, then each dimension as a big-endian uint32, then the values in
C order. Files are usually distributed gzipped. Every way a file can be bad
(missing, truncated, not gzip after all, wrong header, wrong shape) becomes
one `MnistFileError` line naming the file, so the command line can refuse a
bad directory before any work starts instead of failing mid-run.
"""

from __future__ import annotations

import gzip
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlbench.errors import MnistFileError

ROWS = COLS = 28
CLASSES = 10
# The pytorch/examples normalisation (the training set's mean and std of x/255).
MEAN = 0.1307
STD = 0.3081

# Role -> the accepted file names without ".gz": the standard name first, then the
# dotted variant some mirrors (and Kaggle) use.
FILES: dict[str, tuple[str, str]] = {
    "train_images": ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    "train_labels": ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    "test_images": ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    "test_labels": ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}

_GZIP_MAGIC = b"\x1f\x8b"
_UINT8 = 0x08


@dataclass(frozen=True)
class MnistData:
    """Train and test splits with MNIST's shapes and dtypes, and where they came from."""

    train_images: np.ndarray  # uint8 [N, 28, 28]
    train_labels: np.ndarray  # int64 [N], 0..9
    test_images: np.ndarray  # uint8 [M, 28, 28]
    test_labels: np.ndarray  # int64 [M], 0..9
    source: str
    synthetic: bool


def _expected_names() -> str:
    return ", ".join(f"{names[0]}[.gz]" for names in FILES.values())


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file of unsigned bytes, gzipped or raw, with the header's shape."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise MnistFileError(f"{path}: cannot read: {e.strerror or e}") from None
    # Decide by content, not suffix: mirrors serve gzipped files without ".gz"
    # and some tools unpack while keeping the suffix.
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise MnistFileError(
                f"{path}: corrupt or truncated gzip data ({e}); re-download the file"
            ) from None
    if len(raw) < 4:
        raise MnistFileError(
            f"{path}: truncated IDX file: {len(raw)} bytes, expected at least a 4-byte header"
        )
    if raw[0] != 0 or raw[1] != 0:
        raise MnistFileError(
            f"{path}: not an IDX file: header {raw[:4].hex()}, expected 0000 then type and dims"
        )
    if raw[2] != _UINT8:
        raise MnistFileError(
            f"{path}: unsupported IDX type code 0x{raw[2]:02x}, expected 0x08 (unsigned byte)"
        )
    ndim = raw[3]
    if ndim == 0:
        raise MnistFileError(f"{path}: IDX header has 0 dimensions, expected at least 1")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise MnistFileError(
            f"{path}: truncated IDX header: {len(raw)} bytes, expected {header} for {ndim} dims"
        )
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = math.prod(shape)  # exact: a bogus header must not overflow int64
    got = len(raw) - header
    if got != expected:
        problem = "truncated" if got < expected else "too long"
        raise MnistFileError(
            f"{path}: {problem} IDX file: shape {list(shape)} needs {expected} data bytes, "
            f"got {got}"
        )
    # Copy out of the bytes object so the array is writable and owns its memory.
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape).copy()


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as an IDX file, gzip-compressed when the name ends in .gz."""
    if array.dtype != np.uint8:
        raise ValueError(f"write_idx writes uint8 arrays only, got {array.dtype}")
    if not 1 <= array.ndim <= 255:
        raise ValueError(f"write_idx needs 1 to 255 dimensions, got {array.ndim}")
    header = bytes([0, 0, _UINT8, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    payload = header + np.ascontiguousarray(array).tobytes()
    if path.name.endswith(".gz"):
        # mtime=0 so the same array always gives the same bytes.
        payload = gzip.compress(payload, mtime=0)
    path.write_bytes(payload)


def find_mnist_files(data_dir: Path) -> dict[str, Path]:
    """The file for each role in `data_dir`, by its standard name, raw or gzipped."""
    if not data_dir.is_dir():
        problem = "is not a directory" if data_dir.exists() else "does not exist"
        raise MnistFileError(
            f"MNIST directory {data_dir} {problem}; expected it to hold {_expected_names()}"
        )
    found: dict[str, Path] = {}
    for role, stems in FILES.items():
        candidates = [data_dir / (stem + suffix) for stem in stems for suffix in ("", ".gz")]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise MnistFileError(
                f"{data_dir / stems[0]}[.gz] not found; an MNIST directory holds "
                f"{_expected_names()}"
            )
        found[role] = path
    return found


def _limited(array: np.ndarray, limit: int | None) -> np.ndarray:
    # A copy, so a 10-sample subset does not keep the whole 47 MB file alive.
    return array if limit is None else array[:limit].copy()


def _split(files: dict[str, Path], prefix: str, limit: int | None) -> tuple[np.ndarray, np.ndarray]:
    images_path, labels_path = files[f"{prefix}_images"], files[f"{prefix}_labels"]
    images = read_idx(images_path)
    if images.ndim != 3 or images.shape[1:] != (ROWS, COLS):
        raise MnistFileError(
            f"{images_path}: images of shape {list(images.shape)}, expected [N, 28, 28]"
        )
    labels = read_idx(labels_path)
    if labels.ndim != 1:
        raise MnistFileError(f"{labels_path}: labels of shape {list(labels.shape)}, expected [N]")
    if len(labels) != len(images):
        raise MnistFileError(
            f"{labels_path}: {len(labels)} labels for {len(images)} images in "
            f"{images_path.name}, expected one label per image"
        )
    if len(labels) and int(labels.max()) >= CLASSES:
        raise MnistFileError(
            f"{labels_path}: label {int(labels.max())} out of range, expected 0..{CLASSES - 1}"
        )
    return _limited(images, limit), _limited(labels, limit).astype(np.int64)


def load_mnist_dir(
    data_dir: Path, train_limit: int | None = None, test_limit: int | None = None
) -> MnistData:
    """Read and cross-check the four files; a limit keeps the first N samples of a split.

    A limit above a split's size keeps the whole split.
    """
    for name, limit in (("train_limit", train_limit), ("test_limit", test_limit)):
        if limit is not None and limit < 0:
            raise ValueError(f"{name} must be >= 0, got {limit}")
    files = find_mnist_files(data_dir)
    train_images, train_labels = _split(files, "train", train_limit)
    test_images, test_labels = _split(files, "test", test_limit)
    return MnistData(
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        source=f"MNIST IDX files in {data_dir}",
        synthetic=False,
    )


def check_mnist_dir(data_dir: Path) -> None:
    """Raise MnistFileError unless `data_dir` holds four valid, consistent MNIST files.

    Reads everything (about 55 MB, well under a second): a header-only check
    would miss the truncated and corrupt downloads this exists to catch.
    """
    load_mnist_dir(data_dir)


# Synthetic set. Each class is a template of a few thick soft strokes; a sample is
# its class template shifted by up to _SHIFT pixels, scaled in intensity, often
# overlaid with a stroke of no class, plus pixel noise. Tuned to be roughly as hard
# as MNIST: least squares on raw pixels, fit on 5000 samples, scores 0.84-0.92 over
# seeds 0-7 (MNIST: roughly 0.85); the pytorch/examples CNN reaches 0.92-0.97 after
# one epoch of 3000-5000 samples. Shifts and distractors keep the linear model from
# being perfect; a CNN's translation invariance is what lets it do better.
_SHIFT = 2
_STROKES_PER_CLASS = 3
_DISTRACTORS = 256
_DISTRACTOR_P = 0.7
_NOISE_STD = 0.2
_CHUNK = 1000


def _strokes(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` soft line segments, float32 [count, 28, 28] in 0..1, inside the centre."""
    ends = rng.uniform(6.0, 21.0, size=(count, 2, 2)).astype(np.float32)
    width = rng.uniform(1.0, 2.0, size=(count, 1, 1)).astype(np.float32)
    ys, xs = np.mgrid[0:ROWS, 0:COLS].astype(np.float32)
    p = np.stack([ys, xs], axis=-1)[None]  # [1, 28, 28, 2]
    a = ends[:, 0][:, None, None, :]  # [count, 1, 1, 2]
    ab = (ends[:, 1] - ends[:, 0])[:, None, None, :]
    t = np.clip(((p - a) * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-6), 0.0, 1.0)
    dist = np.linalg.norm(p - (a + t[..., None] * ab), axis=-1)
    # Solid core of half-width `width`, one-pixel soft edge: anti-aliased pen strokes.
    return np.clip(width + 0.5 - dist, 0.0, 1.0).astype(np.float32)


def _shifted(templates: np.ndarray) -> np.ndarray:
    """Every template at every offset: [classes, 2S+1, 2S+1, 28, 28], zero-filled edges."""
    span = 2 * _SHIFT + 1
    padded = np.pad(templates, ((0, 0), (_SHIFT, _SHIFT), (_SHIFT, _SHIFT)))
    out = np.empty((len(templates), span, span, ROWS, COLS), dtype=np.float32)
    for dy in range(span):
        for dx in range(span):
            out[:, dy, dx] = padded[:, dy : dy + ROWS, dx : dx + COLS]
    return out


def _samples(
    seed: int, split: int, count: int, shifted: np.ndarray, distractors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    images = np.empty((count, ROWS, COLS), dtype=np.uint8)
    labels = np.empty(count, dtype=np.int64)
    span = shifted.shape[1]
    # One independent stream per fixed-size chunk, always drawn in full (the last
    # chunk's surplus is dropped): a smaller set is then exactly a prefix of a
    # larger one with the same seed, and train and test never share samples.
    for chunk, start in enumerate(range(0, count, _CHUNK)):
        n = min(_CHUNK, count - start)
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(split, chunk)))
        y = rng.integers(0, CLASSES, size=_CHUNK)
        dy, dx = rng.integers(0, span, size=(2, _CHUNK))
        scale = rng.uniform(0.6, 1.0, size=(_CHUNK, 1, 1)).astype(np.float32)
        which = rng.integers(0, len(distractors), size=_CHUNK)
        strength = rng.uniform(0.5, 1.0, size=(_CHUNK, 1, 1)).astype(np.float32)
        strength *= (rng.random((_CHUNK, 1, 1)) < _DISTRACTOR_P).astype(np.float32)
        noise = rng.standard_normal((_CHUNK, ROWS, COLS), dtype=np.float32)
        x = shifted[y[:n], dy[:n], dx[:n]] * scale[:n]
        np.maximum(x, distractors[which[:n]] * strength[:n], out=x)
        x += noise[:n] * np.float32(_NOISE_STD)
        # +0.5 so the cast to uint8, which truncates, rounds.
        np.clip(x * 255.0 + 0.5, 0.0, 255.0, out=x)
        images[start : start + n] = x
        labels[start : start + n] = y[:n]
    return images, labels


def synthetic_mnist(train: int, test: int, seed: int) -> MnistData:
    """A deterministic, learnable MNIST-shaped set, for machines without the real files.

    Not a substitute for MNIST's accuracy numbers; it exists so accuracy
    workloads have data a model can learn (unlike uniform noise) anywhere.
    """
    if train < 0 or test < 0:
        raise ValueError(f"sample counts must be >= 0, got train={train}, test={test}")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,)))
    templates = _strokes(rng, CLASSES * _STROKES_PER_CLASS)
    templates = templates.reshape(CLASSES, _STROKES_PER_CLASS, ROWS, COLS).max(axis=1)
    shifted = _shifted(templates)
    distractors = _strokes(rng, _DISTRACTORS)
    train_images, train_labels = _samples(seed, 1, train, shifted, distractors)
    test_images, test_labels = _samples(seed, 2, test, shifted, distractors)
    return MnistData(
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        source=f"synthetic learnable MNIST-like set (seed {seed})",
        synthetic=True,
    )


def normalised(images: np.ndarray) -> np.ndarray:
    """uint8 [N, 28, 28] -> float32 [N, 1, 28, 28], normalised as pytorch/examples does."""
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (ROWS, COLS):
        raise ValueError(f"expected uint8 [N, 28, 28] images, got {images.dtype} {images.shape}")
    # One table lookup per pixel; the table is computed in float32 exactly as
    # ToTensor() then Normalize() compute it, so the values match torchvision's.
    pixels = np.arange(256, dtype=np.float32) / np.float32(255.0)
    table = (pixels - np.float32(MEAN)) / np.float32(STD)
    return table[images.reshape(len(images), 1, ROWS, COLS)]
