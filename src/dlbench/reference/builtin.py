"""The reference every framework is checked against, and the ONNX exports.

The reference implementation of a model workload is PyTorch eager, fp32, on
the CPU, with the workload's seeded weights. Its outputs for a case's exact
input, and the ONNX file exported from it, are made in a separate process
(`python -m dlbench.backends.torch.reference_builder`) and cached on disk: torch is never imported
into another framework's worker, so that worker's memory stays its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench import __version__
from dlbench.atomic import build_once
from dlbench.errors import ReferenceUnavailable
from dlbench.spec.case_inputs import CaseInputs
from dlbench.spec.record_dict import to_dict
from dlbench.untyped import JSONObject

if TYPE_CHECKING:
    import numpy as np

CACHE_ENV_VAR = "DLBENCH_CACHE"
OPSET = 17
# Bump whenever a reference model's definition or initialisation changes: it
# is part of the cache key, so stale exports and outputs are never reused
# (the output check caught exactly that once, after BatchNorm calibration).
REFERENCE_REVISION = 2
BUILD_TIMEOUT_S = 1800
# The batch of the ONNX export's example inputs (its batch axis is dynamic); its builder
# writes the reference's output at this batch too
EXPORT_BATCH = 2
# Runs in its own process: it imports torch and the torch model builders.
BUILDER_MODULE = "dlbench.backends.torch.reference_builder"
# In an artifact's folder: held while one process builds something there (atomic.build_once)
BUILD_LOCK = ".build.lock"


def lock_beside(folder: Path) -> Path:
    """The build lock of an artifact that is a whole folder, whose existence says it is
    built: beside it, so that taking the lock does not make the folder."""
    return folder.with_name(folder.name + BUILD_LOCK)


def cache_dir() -> Path:
    """$DLBENCH_CACHE, else dlbench/artifacts in the user's cache directory."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("dlbench", appauthor=False)) / "artifacts"


def artifact_folder(workload: str, params: Mapping[str, int], seed: int) -> Path:
    """One folder per reference model: workload, params, seed, and the code that built it."""
    key = json.dumps(
        {
            "workload": workload,
            "params": dict(sorted(params.items())),
            "seed": seed,
            "revision": REFERENCE_REVISION,
            "dlbench": __version__,
            "torch": package_version("torch"),
        }
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_dir() / f"{workload}-seed{seed}-{digest}"


def package_version(package: str) -> str | None:
    """Read from package metadata: this runs in workers that must not import the
    package (torch, a quantizer) to learn which version made a cached artifact."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def onnx_model(workload: str, params: Mapping[str, int], seed: int) -> tuple[Path, JSONObject]:
    """The exported ONNX file and its metadata (opset, exporter, torch version)."""
    folder = artifact_folder(workload, params, seed)
    path, meta = folder / "model.onnx", folder / "model.json"
    build_once(
        folder / BUILD_LOCK,
        lambda: path.exists() and meta.exists(),
        lambda: _build("onnx", _export_inputs(workload, params, seed)),
    )
    return path, json.loads(meta.read_text(encoding="utf-8"))


def _export_inputs(workload: str, params: Mapping[str, int], seed: int) -> CaseInputs:
    """The ONNX export's example inputs: the model's own, at no input axis (the model
    does not depend on them), whose output its builder caches too."""
    return CaseInputs(
        workload=workload, params=tuple(params.items()), seed=seed, batch_size=EXPORT_BATCH
    )


def reference_output(inputs: CaseInputs) -> np.ndarray:
    """The reference's output (a NumPy array) for exactly these inputs."""
    import numpy as np

    path = reference_output_path(inputs)
    build_once(path.parent / BUILD_LOCK, path.exists, lambda: _build("output", inputs))
    return np.load(path)


def reference_output_path(inputs: CaseInputs) -> Path:
    """Where the reference's output for these inputs is cached: the model's folder, and
    a file named by the inputs' digest (their batch, and any axis that changes them)."""
    folder = artifact_folder(inputs.workload, dict(inputs.params), inputs.seed)
    return folder / f"output-b{inputs.batch_size}-{inputs.digest()}.npy"


@dataclass(frozen=True)
class ReferenceRequest:
    """What the reference's builder process is asked, as its one argument: the output
    for `inputs` ("output"), or the model's ONNX export and that output ("onnx")."""

    kind: str
    inputs: CaseInputs


def _build(kind: str, inputs: CaseInputs) -> None:
    request = json.dumps(to_dict(ReferenceRequest(kind, inputs)))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", BUILDER_MODULE, request],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ReferenceUnavailable(f"building the {kind} reference timed out") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        reason = lines[-1] if lines else f"exit status {proc.returncode}"
        raise ReferenceUnavailable(
            f"could not build the {kind} reference for {inputs.workload}: {reason}"
        )
