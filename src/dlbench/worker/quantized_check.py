"""How far an int8 model strays from fp32: agreement on an evaluation batch.

An int8 model is not expected to match fp32 to fp32's tolerance, so its case
is held to what its outputs are for: a classifier's top-1 class, a
probability's side of 0.5, the direction of a feature vector (cosine
similarity). The built-in workloads run a seeded evaluation batch (at least
256 samples for classifiers) through the prepared int8 model, in batches of
the step's shape, against the torch fp32 reference on the same inputs; a
user's model is held to its own fp32 outputs on the case's inputs, which its
quantizer kept. Agreement below AGREEMENT_FLOOR fails the case. The
max |difference| from fp32 is recorded as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.backends.base import Job, Prepared
from dlbench.results.details import OutputCheck

AGREEMENT_FLOOR = 0.9
# evaluation samples per agreement kind: classifiers as the issue asks (>= 256);
# an encoder's 16 sequences of 128 tokens give 2,048 feature vectors
EVAL_SAMPLES = {"top1": 256, "threshold": 256, "cosine": 16}
MEASURES = {
    "top1": "top-1 agreement",
    "threshold": "agreement of the thresholded output (> 0.5)",
    "cosine": "mean cosine similarity of the output vectors",
    "exact": "fraction of equal outputs",
}


@dataclass(frozen=True)
class Agreement:
    kind: str
    value: float
    samples: int
    max_abs_diff: float

    @property
    def failed(self) -> bool:
        return not self.value >= AGREEMENT_FLOOR

    def details(self) -> OutputCheck:
        return OutputCheck(
            note="int8 against fp32",
            measure=MEASURES[self.kind],
            agreement=self.value,
            # classifiers also under the name the int8 tables and users look for
            top1_agreement=self.value if self.kind == "top1" else None,
            samples=self.samples,
            floor=AGREEMENT_FLOOR,
            max_abs_diff=self.max_abs_diff,
        )

    def reason(self) -> str:
        return (
            f"int8 outputs agree with fp32 at {self.value:.3f} ({MEASURES[self.kind]}, "
            f"{self.samples} samples), below {AGREEMENT_FLOOR}"
        )


def quantized_agreement(job: Job, prepared: Prepared) -> Agreement:
    """Run the evaluation batch through the int8 model and hold it to fp32."""
    if job.case.model is not None:
        return _user_model(job, prepared)
    if prepared.infer is None:
        raise RuntimeError(f"{job.case.framework} prepared no evaluation call for int8")
    import numpy as np

    from dlbench.reference.builtin import reference_output

    kind = job.workload.int8_agreement
    batch = job.batch_size
    count = math.ceil(EVAL_SAMPLES[kind] / batch) * batch
    inputs = job.workload.make_inputs(count, job.params, "infer", job.seed)
    outputs = [
        np.asarray(prepared.infer({name: a[start : start + batch] for name, a in inputs.items()}))
        for start in range(0, count, batch)
    ]
    reference = reference_output(job.workload.name, job.params, job.seed, count)
    return measure(kind, np.concatenate(outputs), reference, count)


def _user_model(job: Job, prepared: Prepared) -> Agreement:
    """A user's model on the case's inputs against fp32's outputs its quantizer kept."""
    import numpy as np

    from dlbench.reference.quantized import reference_outputs

    quantization = prepared.details.quantization
    assert quantization is not None and quantization.folder is not None
    expected = reference_outputs(Path(quantization.folder))
    assert prepared.fetch_output is not None
    fetched = prepared.fetch_output()  # the int8 model on the case's own inputs
    actual = [np.asarray(o) for o in (fetched if isinstance(fetched, list) else [fetched])]
    first = expected[0]
    return measure(output_kind(first), actual[0], first, int(first.shape[0]) if first.ndim else 1)


def output_kind(output: Any) -> str:
    """How to compare a user model's output: classes, a probability, features, or exact."""
    if output.dtype.kind != "f":
        return "exact"
    if output.ndim == 2 and output.shape[1] > 1:
        return "top1"
    if output.ndim == 2 and output.shape[1] == 1 and output.min() >= 0 and output.max() <= 1:
        return "threshold"
    return "cosine"


def measure(kind: str, actual: Any, expected: Any, samples: int) -> Agreement:
    """The agreement of `actual` with `expected` by `kind`, and their max |difference|."""
    import numpy as np

    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    diff = float(np.max(np.abs(actual - expected))) if expected.size else 0.0
    if kind == "top1":
        value = float(np.mean(actual.argmax(axis=-1) == expected.argmax(axis=-1)))
    elif kind == "threshold":
        value = float(np.mean((actual > 0.5) == (expected > 0.5)))
    elif kind == "exact":
        value = float(np.mean(actual == expected))
    else:
        a = actual.reshape(-1, actual.shape[-1])
        e = expected.reshape(-1, expected.shape[-1])
        norms = np.linalg.norm(a, axis=1) * np.linalg.norm(e, axis=1)
        value = float(np.mean(np.sum(a * e, axis=1) / np.maximum(norms, 1e-12)))
    return Agreement(kind, value, samples, diff)
