"""The output check: a case's output against the reference, after measurement.

Runs after the resource monitor has stopped, so the reference (and the
regenerated inputs of a kernel's spot check) never count in the case's
memory or time. A difference beyond the precision's tolerance fails the case:
a fast number from a wrong computation is not a result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dlbench.backends.base import Job, Prepared
from dlbench.results.details import OutputCheck
from dlbench.spec.registry import precision_info
from dlbench.worker.quantized_check import Agreement, quantized_model_check
from dlbench.worker.result import Verdict

if TYPE_CHECKING:
    import numpy as np

    from dlbench.reference.user_model import Reference

# Outputs compared: numbers, booleans and strings (a map or an object is passed over)
COMPARED_KINDS = "fiubU"


@dataclass(frozen=True)
class CheckOutcome:
    max_abs_diff: float | None
    tolerance: float | None
    note: str

    @property
    def failed(self) -> bool:
        if self.tolerance is None or self.max_abs_diff is None:
            return False  # not checked: both are None then
        return not (self.max_abs_diff <= self.tolerance)  # a NaN difference fails

    def details(self) -> OutputCheck:
        return OutputCheck(note=self.note, tolerance=self.tolerance)

    def reason(self) -> str:
        return (
            f"output differs from the reference: max_abs_diff {self.max_abs_diff:.3g} > "
            f"tolerance {self.tolerance:.3g} ({self.note})"
        )


def verdict_of(outcome: CheckOutcome | Agreement) -> Verdict:
    """What the output check records, and why it fails the case where it does (the
    step loop's and the kernel windows' one rule: a mismatch fails the case)."""
    return Verdict(
        error=outcome.reason() if outcome.failed else None,
        max_abs_diff=outcome.max_abs_diff,
        check=outcome.details(),
    )


def check_output(job: Job, prepared: Prepared) -> CheckOutcome | Agreement:
    """Compare one more output of the prepared step with the reference.

    A model with several outputs has each compared, with the tolerance of
    its dtype; the outcome reports the output closest to failing. A user's
    ONNX model that is already quantized is held to int8's rule instead
    (worker.quantized_check.quantized_model_check). A user model's first run
    has nothing to be checked against: it records its outputs and says so.
    """
    if prepared.fetch_output is None or job.case.mode != "infer":
        return CheckOutcome(None, None, "not checked (no output to compare in this mode)")
    import numpy as np

    fetched = prepared.fetch_output()
    outputs = [np.asarray(o) for o in (fetched if isinstance(fetched, list) else [fetched])]
    if job.workload.name == "user-model":
        reference = _user_reference(job, prepared, outputs)
        if reference.recorded_now:
            return CheckOutcome(None, None, _not_cross_checked(job, prepared, reference.by))
        from dlbench.reference.user_model import comparable

        source = f"checked against the first framework that ran this model ({reference.by})"
        expected, actual = reference.outputs, [comparable(o) for o in outputs]
    else:
        expected, actual = _expected_and_actual(job, outputs)
        source = _source(job)
    mismatch = _shape_mismatch(expected, actual)
    if mismatch is not None:
        return mismatch
    ops = _quantized_ops(job)
    if ops:
        return quantized_model_check(expected, actual, ops, source)
    return _compared(expected, actual, source, job)


def _compared(
    expected: list[np.ndarray], actual: list[np.ndarray], source: str, job: Job
) -> CheckOutcome:
    """Every output against its reference (counts and shapes agree): the one closest
    to failing."""
    worst = CheckOutcome(0.0, 0.0, source)
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        name = f"output {index}: " if len(actual) > 1 else ""
        if got.dtype.kind not in COMPARED_KINDS:
            continue  # not numbers or strings (a map): nothing to compare it by
        diff, tolerance = _compare(want, got, job.case.precision)
        if _closer_to_failing(diff, tolerance, worst):
            where = f"{source}; {name}{got.dtype}" if len(actual) > 1 else source
            worst = CheckOutcome(diff, tolerance, where)
    if len(actual) > 1:
        worst = CheckOutcome(
            worst.max_abs_diff, worst.tolerance, f"{len(actual)} outputs compared; {worst.note}"
        )
    return worst


def _shape_mismatch(expected: list[np.ndarray], actual: list[np.ndarray]) -> CheckOutcome | None:
    """A failing outcome where the outputs' count or a numeric output's shape differs."""
    if len(expected) != len(actual):
        return CheckOutcome(
            float("inf"), 0.0, f"{len(actual)} outputs, the reference has {len(expected)}"
        )
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if got.dtype.kind in COMPARED_KINDS and want.shape != got.shape:
            name = f"output {index}: " if len(actual) > 1 else ""
            return CheckOutcome(
                float("inf"), 0.0, f"{name}shape {got.shape} != reference {want.shape}"
            )
    return None


def _quantized_ops(job: Job) -> list[str]:
    """The int8 operators of a user's ONNX model ([]: not quantized, or not ONNX)."""
    if job.workload.name != "user-model" or job.case.user_model is None:
        return []
    from pathlib import Path

    from dlbench.workloads.model_format import model_format
    from dlbench.workloads.onnx_ops import quantized_ops

    path = Path(job.case.given_model.model)
    return quantized_ops(path) if model_format(path) == "onnx" else []


def _compare(expected: np.ndarray, actual: np.ndarray, precision: str) -> tuple[float, float]:
    """(max |difference|, tolerance) for one output, by its dtype.

    Floats: the precision's relative tolerance (spec.registry.PRECISIONS), at
    least fp16's for a half-precision output. Integers and booleans (ids,
    argmax, masks): exact. Strings: equal (a difference is infinite).
    """
    import numpy as np

    if expected.size == 0:
        return 0.0, 0.0
    if "U" in (expected.dtype.kind, actual.dtype.kind):  # strings: equal, or not at all
        return (0.0 if np.array_equal(expected, actual) else float("inf")), 0.0
    diff = float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64))))
    if expected.dtype.kind != "f":
        return diff, 0.0
    relative = relative_tolerance(precision)
    if expected.dtype.itemsize <= 2 or actual.dtype.itemsize <= 2:
        relative = max(relative, relative_tolerance("amp-fp16"))
    scale = max(1.0, float(np.max(np.abs(expected))))
    return diff, relative * scale


def relative_tolerance(precision: str) -> float:
    """The precision's tolerance: an unknown name is a UserError, and a quantized one
    (held to fp32 by its SQNR, worker.quantized_check) an error too, never fp32's."""
    tolerance = precision_info(precision).tolerance
    if tolerance is None:
        raise ValueError(
            f"precision {precision} is held to fp32 by its SQNR (worker.quantized_check), "
            "not by a tolerance"
        )
    return tolerance


def _closer_to_failing(diff: float, tolerance: float, worst: CheckOutcome) -> bool:
    def ratio(d: float, t: float) -> float:
        return d / t if t > 0 else (0.0 if d == 0 else float("inf"))

    return ratio(diff, tolerance) >= ratio(worst.max_abs_diff or 0.0, worst.tolerance or 0.0)


def _source(job: Job) -> str:
    return "numpy spot check" if job.workload.is_kernel else "torch eager fp32 reference"


def _user_reference(job: Job, prepared: Prepared, outputs: list[np.ndarray]) -> Reference:
    from pathlib import Path

    from dlbench.reference.user_model import expected_outputs
    from dlbench.spec.digest import path_digest

    shapes = prepared.details.extra.get("inputs", {})  # as resolved by the backend
    digest = job.case.given_model.model_digest or path_digest(Path(job.case.given_model.model))
    loader = prepared.details.extra.get("loader")  # a framework with several loaders
    by = f"{job.case.framework} via {loader}" if loader else job.case.framework
    return expected_outputs(
        digest, shapes, job.seed, job.case.given_model.input_data_digest, by, outputs
    )


def _not_cross_checked(job: Job, prepared: Prepared, by: str) -> str:
    """Why a user model's outputs were only recorded: which other frameworks could check them."""
    from pathlib import Path

    from dlbench.spec.registry import FRAMEWORKS
    from dlbench.workloads.model_format import model_format

    kind = model_format(Path(job.case.given_model.model))
    others = [name for name, info in FRAMEWORKS.items()
              if kind in info.model_formats and name != job.case.framework]  # fmt: skip
    if not others:
        why = f"no other framework dlbench runs reads {kind} files"
    elif prepared.details.extra.get("string_inputs") and not any(
        FRAMEWORKS[name].string_inputs for name in others
    ):
        why = f"no other framework that reads {kind} takes its string inputs"
    else:
        why = f"the first to run it with these inputs ({', '.join(others)}: checked against it)"
    return f"not cross-checked: {why}; the outputs of {by} are recorded as the reference"


def _expected_and_actual(
    job: Job, outputs: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    if job.workload.is_kernel:
        inputs = job.inputs()
        want, got = job.workload.kernel_check(inputs, outputs[0])
        return [want], [got]
    from dlbench.reference.builtin import reference_output

    return [reference_output(job.case_inputs())], outputs
