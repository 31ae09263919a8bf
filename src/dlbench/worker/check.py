"""The output check: a case's output against the reference, after measurement.

Runs after the resource monitor has stopped, so the reference (and the
regenerated inputs of a kernel's spot check) never count in the case's
memory or time. A difference beyond the precision's tolerance fails the case:
a fast number from a wrong computation is not a result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlbench.backends.base import Job, Prepared

# Relative to the reference's largest magnitude (at least 1).
RELATIVE_TOLERANCE = {"fp32": 1e-3, "tf32": 1e-2, "amp-fp16": 1e-2, "amp-bf16": 5e-2}


@dataclass(frozen=True)
class CheckOutcome:
    max_abs_diff: float | None
    tolerance: float | None
    note: str

    @property
    def failed(self) -> bool:
        return self.tolerance is not None and not (self.max_abs_diff <= self.tolerance)  # type: ignore[operator]


def check_output(job: Job, prepared: Prepared) -> CheckOutcome:
    """Compare one more output of the prepared step with the reference."""
    if prepared.fetch_output is None or job.case.mode != "infer":
        return CheckOutcome(None, None, "not checked (no output to compare in this mode)")
    import numpy as np

    output = np.asarray(prepared.fetch_output())
    expected, actual = _expected_and_actual(job, prepared, output)
    if expected.shape != actual.shape:
        return CheckOutcome(
            float("inf"), 0.0, f"output shape {actual.shape} != reference {expected.shape}"
        )
    diff = float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64))))
    scale = max(1.0, float(np.max(np.abs(expected))))
    tolerance = RELATIVE_TOLERANCE.get(job.case.precision, 1e-3) * scale
    source = _source(job)
    return CheckOutcome(diff, tolerance, source)


def _source(job: Job) -> str:
    if job.workload.name == "user-model":
        return "cross-check with the first framework that ran this model"
    return "numpy spot check" if job.workload.is_kernel else "torch eager fp32 reference"


def _expected_and_actual(job: Job, prepared: Prepared, output: Any) -> tuple[Any, Any]:
    if job.workload.name == "user-model":
        from pathlib import Path

        from dlbench.reference.user_model import expected_output
        from dlbench.spec.digest import path_digest

        shapes = prepared.details.get("inputs", {})  # as resolved by the backend
        digest = job.case.model_digest or path_digest(Path(job.case.model or ""))
        expected, _ = expected_output(digest, shapes, job.seed, job.case.framework, output)
        return expected, output
    if job.workload.is_kernel:
        inputs = job.workload.make_inputs(job.batch_size, job.params, "infer", job.seed)
        return job.workload.kernel_check(inputs, output)
    from dlbench.reference.builtin import reference_output

    return reference_output(job.workload.name, job.params, job.seed, job.batch_size), output
