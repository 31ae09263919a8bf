"""Cross-checking a user's model between frameworks.

A user model has no torch reference, so the first framework to run it (for a
given file, input shapes and seed) records its output, and every later
framework's output is checked against that one, with the same tolerance as
built-in workloads. The record lives in the artifact cache.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlbench.atomic import write_atomic
from dlbench.reference.builtin import cache_dir


def reference_folder(model_digest: str, shapes: Mapping[str, Any], seed: int) -> Path:
    key = json.dumps({"file": model_digest, "shapes": dict(sorted(shapes.items())),
                      "seed": seed})  # fmt: skip
    return cache_dir() / "user-models" / hashlib.sha256(key.encode()).hexdigest()[:16]


def expected_output(model_digest: str, shapes: Mapping[str, Any], seed: int, framework: str,
                    output: Any) -> tuple[Any, str]:  # fmt: skip
    """The recorded output to check against, recording `output` if it is the first.

    `model_digest` is the case's (plan.validate computed it): the file is not
    read again here.
    """
    import numpy as np

    folder = reference_folder(model_digest, shapes, seed)
    path, meta = folder / "output.npy", folder / "meta.json"
    if path.exists() and meta.exists():
        first = json.loads(meta.read_text())["framework"]
        return np.load(path), f"output of the first framework that ran this model ({first})"
    write_atomic(path, lambda p: np.save(p, output))
    write_atomic(meta, lambda p: p.write_text(json.dumps({"framework": framework})))
    return output, "first framework to run this model: recorded as the reference for the others"
