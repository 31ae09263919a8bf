"""MNIST IDX reading, directory checks, the synthetic set and normalisation."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import numpy as np
import pytest

from dlbench.data.mnist import (
    FILES,
    MnistData,
    check_mnist_dir,
    find_mnist_files,
    load_mnist_dir,
    normalised,
    read_idx,
    synthetic_mnist,
    write_idx,
)
from dlbench.errors import MnistFileError, UserError

TRAIN, TEST = 50, 20


def random_split(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    return images, labels


def write_mnist_dir(directory: Path, suffix: str = "", seed: int = 0) -> dict[str, np.ndarray]:
    """Write four tiny MNIST files under their standard names; return what was written."""
    rng = np.random.default_rng(seed)
    train_images, train_labels = random_split(rng, TRAIN)
    test_images, test_labels = random_split(rng, TEST)
    arrays = {
        "train_images": train_images,
        "train_labels": train_labels,
        "test_images": test_images,
        "test_labels": test_labels,
    }
    directory.mkdir(parents=True, exist_ok=True)
    for role, array in arrays.items():
        write_idx(directory / (FILES[role][0] + suffix), array)
    return arrays


def path_of(directory: Path, role: str, suffix: str = "") -> Path:
    return directory / (FILES[role][0] + suffix)


# read_idx / write_idx


@pytest.mark.parametrize("name", ["a-idx3-ubyte", "a-idx3-ubyte.gz"])
def test_idx_round_trip(tmp_path: Path, name: str) -> None:
    array = np.random.default_rng(1).integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    path = tmp_path / name
    write_idx(path, array)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    back = read_idx(path)
    assert back.dtype == np.uint8
    assert back.shape == (7, 28, 28)
    np.testing.assert_array_equal(back, array)


def test_idx_header_is_the_standard_one(tmp_path: Path) -> None:
    path = tmp_path / "labels"
    write_idx(path, np.arange(5, dtype=np.uint8))
    assert path.read_bytes() == bytes([0, 0, 8, 1, 0, 0, 0, 5, 0, 1, 2, 3, 4])


def test_gzip_is_detected_by_content_not_suffix(tmp_path: Path) -> None:
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    gz, raw = tmp_path / "x.gz", tmp_path / "x"
    write_idx(gz, array)
    raw.write_bytes(gz.read_bytes())  # gzipped bytes under a name without .gz
    np.testing.assert_array_equal(read_idx(raw), array)
    gz.write_bytes(gzip.decompress(raw.read_bytes()))  # raw bytes under a .gz name
    np.testing.assert_array_equal(read_idx(gz), array)


def test_write_idx_refuses_other_dtypes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="uint8"):
        write_idx(tmp_path / "x", np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_truncated_file_says_expected_and_got(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / ("images" + suffix)
    write_idx(tmp_path / "full", np.zeros((4, 28, 28), dtype=np.uint8))
    data = (tmp_path / "full").read_bytes()[:-10]
    path.write_bytes(gzip.compress(data) if suffix else data)
    with pytest.raises(MnistFileError) as info:
        read_idx(path)
    message = str(info.value)
    assert path.name in message
    assert "truncated" in message
    assert f"{4 * 28 * 28} data bytes, got {4 * 28 * 28 - 10}" in message
    assert "\n" not in message


def test_too_long_file(tmp_path: Path) -> None:
    path = tmp_path / "labels"
    write_idx(path, np.arange(5, dtype=np.uint8))
    path.write_bytes(path.read_bytes() + b"\x00")
    with pytest.raises(MnistFileError, match=r"too long.*5 data bytes, got 6"):
        read_idx(path)


def test_truncated_header(tmp_path: Path) -> None:
    path = tmp_path / "images"
    path.write_bytes(bytes([0, 0, 8, 3, 0, 0]))
    with pytest.raises(MnistFileError, match="truncated IDX header"):
        read_idx(path)


@pytest.mark.parametrize("cut", [0.5, 0.95])
def test_corrupt_gzip(tmp_path: Path, cut: float) -> None:
    path = tmp_path / "images.gz"
    write_idx(path, np.random.default_rng(0).integers(0, 256, (20, 28, 28), dtype=np.uint8))
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * cut)])  # a download cut short
    with pytest.raises(MnistFileError, match=r"images\.gz: corrupt or truncated gzip"):
        read_idx(path)


def test_garbled_gzip_payload(tmp_path: Path) -> None:
    path = tmp_path / "images.gz"
    write_idx(path, np.random.default_rng(0).integers(0, 256, (20, 28, 28), dtype=np.uint8))
    data = bytearray(path.read_bytes())
    data[20:60] = bytes(40)  # inside the deflate stream
    path.write_bytes(bytes(data))
    with pytest.raises(MnistFileError, match="corrupt or truncated gzip"):
        read_idx(path)


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (bytes([1, 0, 8, 1]), "not an IDX file"),
        (b"<htm", "not an IDX file"),
        (bytes([0, 0, 0x0D, 1]), "type code 0x0d"),
        (bytes([0, 0, 8, 0]), "0 dimensions"),
    ],
)
def test_wrong_magic(tmp_path: Path, header: bytes, match: str) -> None:
    path = tmp_path / "labels"
    path.write_bytes(header + bytes([0, 0, 0, 2, 1, 2]))
    with pytest.raises(MnistFileError, match=match):
        read_idx(path)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(MnistFileError, match="nothing: cannot read"):
        read_idx(tmp_path / "nothing")


def test_error_is_a_value_error_and_a_user_error() -> None:
    # ValueError for library callers; UserError so the CLI prints one line, no traceback.
    assert issubclass(MnistFileError, ValueError)
    assert issubclass(MnistFileError, UserError)


# Directories


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_load_mnist_dir(tmp_path: Path, suffix: str) -> None:
    arrays = write_mnist_dir(tmp_path, suffix)
    data = load_mnist_dir(tmp_path)
    assert isinstance(data, MnistData)
    assert not data.synthetic
    assert str(tmp_path) in data.source
    assert data.train_images.shape == (TRAIN, 28, 28)
    assert data.test_images.shape == (TEST, 28, 28)
    assert data.train_images.dtype == data.test_images.dtype == np.uint8
    assert data.train_labels.dtype == data.test_labels.dtype == np.int64
    for role, array in arrays.items():
        np.testing.assert_array_equal(getattr(data, role), array)
    check_mnist_dir(tmp_path)  # valid: no error


def test_dotted_names_and_mixed_compression(tmp_path: Path) -> None:
    arrays = write_mnist_dir(tmp_path)
    raw = path_of(tmp_path, "train_images")
    raw.rename(tmp_path / "train-images.idx3-ubyte")
    path_of(tmp_path, "test_labels").unlink()
    write_idx(path_of(tmp_path, "test_labels", ".gz"), arrays["test_labels"])
    files = find_mnist_files(tmp_path)
    assert files["train_images"].name == "train-images.idx3-ubyte"
    assert files["test_labels"].name == "t10k-labels-idx1-ubyte.gz"
    data = load_mnist_dir(tmp_path)
    np.testing.assert_array_equal(data.train_images, arrays["train_images"])
    np.testing.assert_array_equal(data.test_labels, arrays["test_labels"])


def test_limits_take_the_first_samples(tmp_path: Path) -> None:
    arrays = write_mnist_dir(tmp_path, ".gz")
    data = load_mnist_dir(tmp_path, train_limit=10, test_limit=3)
    assert data.train_images.shape == (10, 28, 28)
    assert data.test_labels.shape == (3,)
    np.testing.assert_array_equal(data.train_images, arrays["train_images"][:10])
    np.testing.assert_array_equal(data.train_labels, arrays["train_labels"][:10])
    np.testing.assert_array_equal(data.test_images, arrays["test_images"][:3])
    # A limit above the split's size keeps all of it.
    assert len(load_mnist_dir(tmp_path, train_limit=10_000).train_images) == TRAIN
    with pytest.raises(ValueError, match="train_limit"):
        load_mnist_dir(tmp_path, train_limit=-1)


def test_missing_file_is_named(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path)
    path_of(tmp_path, "test_labels").unlink()
    with pytest.raises(MnistFileError) as info:
        check_mnist_dir(tmp_path)
    message = str(info.value)
    assert "t10k-labels-idx1-ubyte[.gz] not found" in message
    for stems in FILES.values():
        assert stems[0] in message


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(MnistFileError, match=r"does not exist.*train-images-idx3-ubyte"):
        load_mnist_dir(tmp_path / "nowhere")
    (tmp_path / "file").write_text("")
    with pytest.raises(MnistFileError, match="is not a directory"):
        find_mnist_files(tmp_path / "file")


def test_truncated_file_in_directory(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path)
    path = path_of(tmp_path, "train_images")
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(MnistFileError, match="train-images-idx3-ubyte: truncated"):
        check_mnist_dir(tmp_path)


def test_label_count_mismatch(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path)
    write_idx(path_of(tmp_path, "test_labels"), np.zeros(TEST - 1, dtype=np.uint8))
    with pytest.raises(MnistFileError, match=f"{TEST - 1} labels for {TEST} images"):
        check_mnist_dir(tmp_path)


def test_label_out_of_range(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path)
    labels = np.zeros(TRAIN, dtype=np.uint8)
    labels[7] = 10
    write_idx(path_of(tmp_path, "train_labels"), labels)
    with pytest.raises(MnistFileError, match=r"label 10 out of range, expected 0\.\.9"):
        load_mnist_dir(tmp_path)


def test_files_swapped(tmp_path: Path) -> None:
    arrays = write_mnist_dir(tmp_path)
    write_idx(path_of(tmp_path, "train_images"), arrays["train_labels"])
    with pytest.raises(MnistFileError, match=r"shape \[50\], expected \[N, 28, 28\]"):
        load_mnist_dir(tmp_path)
    write_mnist_dir(tmp_path)
    write_idx(path_of(tmp_path, "test_labels"), arrays["test_images"])
    with pytest.raises(MnistFileError, match="labels of shape"):
        load_mnist_dir(tmp_path)


def test_images_of_the_wrong_size(tmp_path: Path) -> None:
    write_mnist_dir(tmp_path)
    write_idx(path_of(tmp_path, "test_images"), np.zeros((TEST, 32, 32), dtype=np.uint8))
    with pytest.raises(MnistFileError, match=r"\[20, 32, 32\], expected \[N, 28, 28\]"):
        load_mnist_dir(tmp_path)


# The synthetic set


def linear_accuracy(data: MnistData) -> float:
    """Least squares on one-hot targets, pixels/255 plus a bias: the weakest fair model."""

    def features(images: np.ndarray) -> np.ndarray:
        flat = images.reshape(len(images), -1) / 255.0
        return np.hstack([flat, np.ones((len(images), 1))])

    targets = np.eye(10)[data.train_labels]
    weights = np.linalg.lstsq(features(data.train_images), targets, rcond=None)[0]
    predicted = (features(data.test_images) @ weights).argmax(axis=1)
    return float((predicted == data.test_labels).mean())


def test_synthetic_shapes_and_labels() -> None:
    data = synthetic_mnist(3000, 500, seed=0)
    assert data.synthetic
    assert "seed 0" in data.source
    assert data.train_images.shape == (3000, 28, 28)
    assert data.test_images.shape == (500, 28, 28)
    assert data.train_images.dtype == data.test_images.dtype == np.uint8
    assert data.train_labels.dtype == data.test_labels.dtype == np.int64
    assert data.train_labels.shape == (3000,)
    assert data.test_labels.shape == (500,)
    counts = np.bincount(data.train_labels, minlength=10)
    assert len(counts) == 10
    assert counts.min() > 200  # every class present, roughly balanced
    assert set(data.test_labels.tolist()) == set(range(10))
    # Like MNIST: mostly dark background, strokes reaching full intensity.
    assert 0.05 < data.train_images.mean() / 255 < 0.3
    assert data.train_images.max() == 255


def test_synthetic_is_deterministic() -> None:
    a, b = synthetic_mnist(1500, 300, seed=3), synthetic_mnist(1500, 300, seed=3)
    for field in ("train_images", "train_labels", "test_images", "test_labels"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    c = synthetic_mnist(1500, 300, seed=4)
    assert not np.array_equal(a.train_images, c.train_images)
    assert not np.array_equal(a.test_images, c.test_images)


def test_synthetic_splits_differ_and_sizes_are_prefixes() -> None:
    small, large = synthetic_mnist(1200, 300, seed=0), synthetic_mnist(2500, 300, seed=0)
    np.testing.assert_array_equal(small.train_images, large.train_images[:1200])
    np.testing.assert_array_equal(small.test_images, large.test_images)
    assert not np.array_equal(small.train_images[:300], small.test_images)
    assert synthetic_mnist(0, 0, seed=0).train_images.shape == (0, 28, 28)


@pytest.mark.integration
def test_synthetic_is_learnable_but_not_trivial() -> None:
    accuracy = linear_accuracy(synthetic_mnist(5000, 2000, seed=0))
    assert 0.6 < accuracy < 1.0
    assert accuracy < 0.97  # leaves a CNN something to win


@pytest.mark.integration
def test_synthetic_is_fast() -> None:
    start = time.perf_counter()
    synthetic_mnist(60_000, 10_000, seed=0)
    assert time.perf_counter() - start < 3.0


# Normalisation


def test_normalised() -> None:
    images = np.array([[[0] * 28] * 28, [[255] * 28] * 28], dtype=np.uint8)
    images[0, 3, 4] = 128
    x = normalised(images)
    assert x.dtype == np.float32
    assert x.shape == (2, 1, 28, 28)
    assert x.flags.c_contiguous
    assert x[0, 0, 0, 0] == pytest.approx(-0.1307 / 0.3081, rel=1e-6)
    assert x[1, 0, 5, 5] == pytest.approx((1 - 0.1307) / 0.3081, rel=1e-6)
    assert x[0, 0, 3, 4] == pytest.approx((128 / 255 - 0.1307) / 0.3081, rel=1e-6)
    with pytest.raises(ValueError, match="uint8"):
        normalised(images.astype(np.float32))
    with pytest.raises(ValueError, match=r"\[N, 28, 28\]"):
        normalised(images[:, None])


@pytest.mark.integration  # imports torch, for torchvision's arithmetic
def test_normalised_matches_torchvision_arithmetic() -> None:
    torch = pytest.importorskip("torch")
    images = np.resize(np.arange(256, dtype=np.uint8), (1, 28, 28))  # every value
    # ToTensor() then Normalize((0.1307,), (0.3081,)), as the pytorch/examples script does.
    expected = torch.from_numpy(images).float().div(255).sub(0.1307).div(0.3081)
    np.testing.assert_array_equal(normalised(images)[:, 0], expected.numpy())
