"""Quantized (int8) models: built once, in a process of their own, and cached.

Quantizing loads the fp32 model, runs calibration data through it and writes
a new model: memory and seconds that belong to the quantizer, not to the
quantized model. So, like the reference outputs and the ONNX exports
(reference.builtin), each framework's quantizer runs in a builder process
(`python -m dlbench.backends.<framework>.quantize REQUEST`) that writes the
quantized model and what it did (quantization.json) into the cache; the
worker loads the quantized model alone. The first case that needs a model
pays for the quantization, reported in details.quantization with its
seconds; later cases find it cached (`cached: true`, with the seconds it
took then). The calibration data is backends/calibration.py's.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench import __version__
from dlbench.atomic import build_once, write_atomic
from dlbench.errors import CaseError
from dlbench.reference.builtin import cache_dir, lock_beside, package_version
from dlbench.spec.case import Case
from dlbench.spec.case_inputs import input_axes
from dlbench.spec.record_dict import from_dict, to_dict
from dlbench.spec.registry import framework_info
from dlbench.untyped import JSONObject

if TYPE_CHECKING:
    import numpy as np

# bump when a quantizer's method or settings change: old models are not reused
QUANTIZE_REVISION = 1
META_FILE = "quantization.json"
BUILD_TIMEOUT_S = 3600
# each framework with an int8 path (the registry's `quantized`) has this builder module
QUANTIZER_MODULE = "dlbench.backends.{framework}.quantize"


def quantized_model(case: Case, seed: int) -> tuple[Path, JSONObject]:
    """The case's quantized model file and what its quantizer did (built if not cached)."""
    folder = quantized_folder(case, seed)
    meta_path = folder / META_FILE
    started = time.perf_counter()
    missing = not meta_path.exists()
    # one quantizer at a time per model: a second would rewrite the files the first's
    # readers are loading; one that waited finds them built
    fresh = missing and build_once(
        lock_beside(folder),
        meta_path.exists,
        lambda: _build(case, seed, folder),
    )
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["cached"] = not fresh
    # the quantizer's whole wall time (this case's builder, or another's it waited
    # for), which the worker keeps out of its setup
    meta["build_wall_s"] = round(time.perf_counter() - started, 3) if missing else 0.0
    meta["folder"] = str(folder)
    return folder / meta["model_file"], meta


def quantized_folder(case: Case, seed: int) -> Path:
    """One folder per quantized model: what it quantizes, how, and by which versions."""
    info = framework_info(case.framework)
    user = case.user_model
    identity = {
        "framework": case.framework,
        "precision": case.precision,
        "workload": case.workload,
        "params": dict(case.params),
        "seed": seed,
        "model": user.model_digest if user is not None else None,
        "input_data": user.input_data_digest if user is not None else None,
        "inputs": dict(user.inputs) if user is not None else {},
        # calibrated on the case's inputs: an axis that changes them changes the model
        "input_axes": dict(input_axes(case)),
        # torch's PT2E program is exported with the case's static shapes
        "batch": case.batch_size if case.framework == "torch" else None,
        "revision": QUANTIZE_REVISION,
        "dlbench": __version__,
        "framework_version": info.installed_version(),
        # the quantizer, and what made a built-in workload's fp32 source (torch, and
        # the ONNX export): an upgrade of any of them must not reuse an old model
        "tool_versions": {
            package: package_version(package)
            for package in (info.quantizer_package, "torch", "onnx")
            if package is not None
        },
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
    name = case.workload if user is None else f"model-{(user.model_digest or '')[:12]}"
    return cache_dir() / "quantized" / f"{name}-{case.framework}-{case.precision}-{digest}"


@dataclass(frozen=True)
class QuantizeRequest:
    """What a quantizer process is asked: the case, its seed, and the folder to build in."""

    case: Case
    seed: int
    folder: Path


def _build(case: Case, seed: int, folder: Path) -> None:
    request = json.dumps(to_dict(QuantizeRequest(case, seed, folder)))
    command = [sys.executable, "-m", QUANTIZER_MODULE.format(framework=case.framework), request]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CaseError(f"quantizing for {case.framework} timed out") from None
    if done.returncode != 0 or not (folder / META_FILE).exists():
        lines = (done.stderr or done.stdout).strip().splitlines()
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        raise CaseError(
            f"{case.framework} could not quantize {case.workload} to {case.precision}: {reason}",
            detail=done.stderr,
        )


REFERENCE_OUTPUTS = "fp32-outputs.npz"


def save_reference_outputs(folder: Path, outputs: Sequence[np.ndarray]) -> None:
    """The fp32 model's outputs on the case's inputs: what the int8 model is held to.

    `outputs` are the NumPy arrays ONNX Runtime's or OpenVINO's run gave."""
    import numpy as np

    write_atomic(folder / REFERENCE_OUTPUTS, lambda path: np.savez(path, *outputs))


def reference_outputs(folder: Path) -> list[np.ndarray]:
    """The fp32 outputs a user model's quantizer kept, in output order."""
    import numpy as np

    with np.load(folder / REFERENCE_OUTPUTS) as saved:
        return [saved[f"arr_{index}"] for index in range(len(saved.files))]


def builder_main(build: Callable[[Case, int, Path], JSONObject]) -> int:
    """A quantizer process: build the model into the request's folder, then its metadata.

    `build` writes the model file(s) and returns what it did (method,
    model_file, calibration); the metadata is written last, so its presence
    means the model is complete.
    """
    request = from_dict(QuantizeRequest, json.loads(sys.argv[1]), "a quantize request")
    case, folder = request.case, request.folder
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    meta = build(case, request.seed, folder)
    meta["seconds"] = round(time.perf_counter() - started, 3)
    write_atomic(folder / META_FILE, json.dumps(meta, indent=2))
    return 0
