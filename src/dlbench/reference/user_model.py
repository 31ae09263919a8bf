"""Cross-checking a user's model between frameworks.

A user model has no torch reference, so the first framework to run it (for a
given file, input shapes and seed) records its output, and every later
framework's output is checked against that one, with the same tolerance as
built-in workloads (strings exactly). The record lives in the artifact cache;
the run that records it checks nothing, and says so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.atomic import write_atomic
from dlbench.reference.builtin import cache_dir
from dlbench.untyped import JSONValue

if TYPE_CHECKING:
    import numpy as np


def reference_folder(
    model_digest: str, shapes: Mapping[str, JSONValue], seed: int, data_digest: str | None
) -> Path:
    key = json.dumps({"file": model_digest, "shapes": dict(sorted(shapes.items())),
                      "seed": seed, "data": data_digest})  # fmt: skip
    return cache_dir() / "user-models" / hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Reference:
    """The outputs a user model's run is checked against, and who recorded them."""

    outputs: list[np.ndarray]
    by: str  # the framework (and loader) that recorded them: "tensorflow via tf.saved_model.load"
    recorded_now: bool  # this run's own outputs, just recorded: nothing was checked


def expected_outputs(
    model_digest: str,
    shapes: Mapping[str, JSONValue],
    seed: int,
    data_digest: str | None,
    by: str,
    outputs: list[np.ndarray],
) -> Reference:
    """The recorded outputs to check against, recording `outputs` if they are the first.

    `model_digest` is the case's (plan.user_model_checks computed it): the file is not
    read again here. Outputs are kept in order (every framework that loads a
    format reads its outputs in the file's order), as `comparable` makes them.
    """
    import numpy as np

    folder = reference_folder(model_digest, shapes, seed, data_digest)
    path, meta = folder / "outputs.npz", folder / "meta.json"
    if path.exists() and meta.exists():
        first = json.loads(meta.read_text())["framework"]
        with np.load(path, allow_pickle=False) as stored:
            recorded = [stored[f"output_{i}"] for i in range(len(stored.files))]
        return Reference(recorded, first, recorded_now=False)
    arrays = {f"output_{i}": comparable(o) for i, o in enumerate(outputs)}

    def save(temp: Path) -> None:
        # numpy's annotation reads a ** of arrays as possibly filling savez's allow_pickle
        # (a bool) too; these keys are output_0, output_1, ...
        np.savez(temp, **arrays)  # type: ignore[arg-type]

    write_atomic(path, save)
    write_atomic(meta, lambda p: p.write_text(json.dumps({"framework": by})))
    return Reference(list(arrays.values()), by, recorded_now=True)


def comparable(output: object) -> np.ndarray:
    """An output as it is kept and compared: numbers as they are, strings as a str array
    (bytes decoded; invalid UTF-8 kept distinct by surrogateescape), and anything else (a
    map, a sequence) empty: there is nothing to compare it by."""
    import numpy as np

    array = np.asarray(output)
    if array.dtype.kind in "fiubU":
        return array
    values = array.ravel().tolist()
    if array.dtype.kind in "SO" and all(isinstance(v, str | bytes) for v in values):
        text = [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v for v in values]
        return np.array(text, dtype=str).reshape(array.shape)
    return np.zeros(0)
