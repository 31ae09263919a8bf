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


def reference_folder(
    model_digest: str, shapes: Mapping[str, Any], seed: int, data_digest: str | None
) -> Path:
    key = json.dumps({"file": model_digest, "shapes": dict(sorted(shapes.items())),
                      "seed": seed, "data": data_digest})  # fmt: skip
    return cache_dir() / "user-models" / hashlib.sha256(key.encode()).hexdigest()[:16]


def expected_outputs(
    model_digest: str,
    shapes: Mapping[str, Any],
    seed: int,
    data_digest: str | None,
    framework: str,
    outputs: list[Any],
) -> tuple[list[Any], str]:
    """The recorded outputs to check against, recording `outputs` if they are the first.

    `model_digest` is the case's (plan.validate computed it): the file is not
    read again here. Outputs are kept in order (every framework that loads a
    format reads its outputs in the file's order); non-numeric ones are not kept.
    """
    import numpy as np

    folder = reference_folder(model_digest, shapes, seed, data_digest)
    path, meta = folder / "outputs.npz", folder / "meta.json"
    if path.exists() and meta.exists():
        first = json.loads(meta.read_text())["framework"]
        with np.load(path, allow_pickle=False) as stored:
            recorded = [stored[f"output_{i}"] for i in range(len(stored.files))]
        return recorded, f"outputs of the first framework that ran this model ({first})"
    kept = [o if o.dtype.kind in "fiub" else np.zeros(0) for o in outputs]
    arrays = {f"output_{i}": o for i, o in enumerate(kept)}
    write_atomic(path, lambda p: np.savez(p, **arrays))
    write_atomic(meta, lambda p: p.write_text(json.dumps({"framework": framework})))
    return kept, "first framework to run this model: recorded as the reference for the others"
