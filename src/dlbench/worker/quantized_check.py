"""How far an int8 model strays from fp32: SQNR and agreement on an evaluation batch.

An int8 model is not expected to match fp32 to fp32's tolerance. Its case is
held to the signal-to-quantization-noise ratio of its outputs against fp32's,
SQNR = 10 log10(sum ref^2 / sum (ref - q)^2) in dB, over the whole evaluation
batch (a classifier's scores each less its sample's mean: class_scores), and
passes at the precision's `min_sqnr_db` (spec.registry.PRECISIONS) or above.
Beside it, agreement says what the outputs are for: a classifier's top-1
class, a probability's side of 0.5, the direction of a feature vector (cosine
similarity). Agreement is reported, not the verdict: on the built-in models'
seeded random weights the scores of one synthetic image barely differ from
another's, so a little noise moves a 1000-class argmax and top-1 agreement
measures the weights, while SQNR measures the noise the quantization added
(docs/guides/int8.md). Integer outputs (ids) have no noise to measure: they
are held to agreement, the fraction equal, at AGREEMENT_FLOOR.

The built-in workloads run a seeded evaluation batch (at least 256 samples
for classifiers) through the prepared int8 model, in batches of the step's
shape, against the torch fp32 reference on the same inputs; a user's model is
held to its own fp32 outputs on the case's inputs, which its quantizer kept.
The max |difference| from fp32 is recorded as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.base import Job, Prepared
from dlbench.results.details import OutputCheck
from dlbench.spec.registry import QUANTIZED_MODEL_PRECISION, precision_info

if TYPE_CHECKING:
    import numpy as np

# integer outputs only: the fraction of them equal to fp32's
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
AGAINST_FP32 = "int8 against fp32"


@dataclass(frozen=True)
class Agreement:
    """An int8 model's outputs against fp32's (or an already quantized model's across
    frameworks): the SQNR that decides, and the agreement (by `kind`) beside it."""

    kind: str
    value: float
    samples: int
    max_abs_diff: float
    # None where there is no noise to measure: integer outputs, or outputs equal to fp32's
    sqnr_db: float | None
    min_sqnr_db: float
    note: str = AGAINST_FP32
    # a user's model that is already quantized: its int8 operators
    quantized_ops: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        if self.kind == "exact":
            return not self.value >= AGREEMENT_FLOOR
        return self.sqnr_db is not None and not self.sqnr_db >= self.min_sqnr_db

    def details(self) -> OutputCheck:
        exact = self.kind == "exact"
        return OutputCheck(
            note=self.note,
            measure=MEASURES[self.kind],
            agreement=self.value,
            # classifiers also under the name the int8 tables and users look for
            top1_agreement=self.value if self.kind == "top1" else None,
            samples=self.samples,
            floor=AGREEMENT_FLOOR if exact else None,
            max_abs_diff=self.max_abs_diff,
            sqnr_db=self.sqnr_db,
            min_sqnr_db=None if exact else self.min_sqnr_db,
            quantized_ops=tuple(self.quantized_ops) or None,
        )

    def reason(self) -> str:
        if self.kind == "exact":
            return (
                f"{self.note}: {self.value:.3f} of the outputs equal ({self.samples} samples), "
                f"below {AGREEMENT_FLOOR}"
            )
        return (
            f"{self.note}: SQNR {self.sqnr_db:.1f} dB, below {self.min_sqnr_db:g} dB "
            f"({MEASURES[self.kind]} {self.value:.3f}, {self.samples} samples)"
        )


def quantized_agreement(job: Job, prepared: Prepared) -> Agreement:
    """Run the evaluation batch through the int8 model and hold it to fp32."""
    if job.case.user_model is not None:
        return _user_model(job, prepared)
    if prepared.infer is None:
        raise RuntimeError(f"{job.case.framework} prepared no evaluation call for int8")
    import numpy as np

    from dlbench.reference.builtin import reference_output

    kind = job.workload.int8_agreement
    batch = job.batch_size
    count = math.ceil(EVAL_SAMPLES[kind] / batch) * batch
    inputs = job.inputs(count)
    outputs = [
        np.asarray(prepared.infer({name: a[start : start + batch] for name, a in inputs.items()}))
        for start in range(0, count, batch)
    ]
    reference = reference_output(job.case_inputs(count))
    return measure(kind, np.concatenate(outputs), reference, count, job.case.precision)


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
    return measure(output_kind(first), actual[0], first, _samples(first), job.case.precision)


def quantized_model_check(
    expected: list[np.ndarray], actual: list[np.ndarray], ops: list[str], source: str
) -> Agreement:
    """A user's model that is already quantized, against the outputs it is cross-checked
    with: each numeric output held to int8's rule (spec.registry.QUANTIZED_MODEL_PRECISION),
    the one closest to failing reported. The outputs' count and shapes match (worker.check)."""
    note = f"already quantized ({', '.join(ops)}): {source}"
    checked = [
        replace(
            measure(output_kind(want), got, want, _samples(want), QUANTIZED_MODEL_PRECISION,
                    note if len(actual) == 1 else f"output {index}: {note}"),
            quantized_ops=tuple(ops),
        )
        for index, (want, got) in enumerate(zip(expected, actual, strict=True))
        if got.dtype.kind in "fiub"
    ]  # fmt: skip
    if not checked:  # no numeric output: nothing to hold to a bound
        bound = precision_info(QUANTIZED_MODEL_PRECISION).min_sqnr_db or 0.0
        return Agreement("exact", 1.0, 0, 0.0, None, bound, note, tuple(ops))
    return min(checked, key=_margin)


def _margin(agreement: Agreement) -> tuple[bool, float]:
    """Failed first, then by how far above its bound, relative to the bound (no noise:
    the most)."""
    if agreement.kind == "exact":
        return not agreement.failed, agreement.value / AGREEMENT_FLOOR - 1.0
    if agreement.sqnr_db is None:
        return not agreement.failed, math.inf
    return not agreement.failed, agreement.sqnr_db / agreement.min_sqnr_db - 1.0


def _samples(output: np.ndarray) -> int:
    return int(output.shape[0]) if output.ndim else 1


def output_kind(output: np.ndarray) -> str:
    """How to compare a user model's output: classes, a probability, features, or exact."""
    if output.dtype.kind != "f":
        return "exact"
    if output.ndim == 2 and output.shape[1] > 1:
        return "top1"
    if output.ndim == 2 and output.shape[1] == 1 and output.min() >= 0 and output.max() <= 1:
        return "threshold"
    return "cosine"


def measure(
    kind: str,
    actual: np.ndarray,
    expected: np.ndarray,
    samples: int,
    precision: str,
    note: str = AGAINST_FP32,
) -> Agreement:
    """`actual` against `expected`: agreement by `kind`, SQNR, and their max |difference|,
    held to `precision`'s SQNR bound."""
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
    if kind == "top1":  # scores over classes: compared up to what softmax ignores
        sqnr = sqnr_db(class_scores(actual), class_scores(expected))
    else:
        sqnr = None if kind == "exact" else sqnr_db(actual, expected)
    bound = precision_info(precision).min_sqnr_db
    if bound is None:
        raise ValueError(f"precision {precision} is not quantized: it has no SQNR bound")
    return Agreement(kind, value, samples, diff, sqnr, bound, note)


def class_scores(output: np.ndarray) -> np.ndarray:
    """A classifier's outputs less each sample's mean over its classes.

    Softmax is blind to a constant added to a sample's scores, and a
    log-softmax output carries its log-partition there (about -2.3 for ten
    classes near-uniform): as signal, that constant would lift the SQNR of any
    log-softmax model by some 30 dB, a wrong scale included (measured on
    mnist-cnn, docs/guides/int8.md).
    """
    return output - output.mean(axis=-1, keepdims=True)


def sqnr_db(actual: np.ndarray, expected: np.ndarray) -> float | None:
    """The signal-to-quantization-noise ratio of `actual` against `expected`, in dB:
    10 log10(sum expected^2 / sum (expected - actual)^2). None where they are equal
    (no noise: unbounded); minus infinity where `expected` is all zeros and `actual`
    is not."""
    import numpy as np

    expected = np.asarray(expected, dtype=np.float64)
    noise = float(np.sum((expected - np.asarray(actual, dtype=np.float64)) ** 2))
    if noise == 0.0:
        return None
    signal = float(np.sum(expected**2))
    return 10.0 * math.log10(signal / noise) if signal > 0.0 else -math.inf
