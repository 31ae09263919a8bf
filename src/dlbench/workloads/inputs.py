"""A built-in workload's inputs, made in one place from the case's record of them
(spec.case_inputs.CaseInputs): each framework's worker, the checks, the generation
loops, calibration and the torch reference's builders all call case_arrays, so they
hold the same numbers. An axis marked INPUT_AXIS is applied here, or refused.
"""

from __future__ import annotations

from dlbench.spec.case_inputs import CaseInputs
from dlbench.workloads import get_workload
from dlbench.workloads.base import WeightDict

# The INPUT_AXIS fields case_arrays applies (none yet): a marked field it does not
# apply would change the reference's cache key and nothing else
APPLIED_AXES: frozenset[str] = frozenset()


def case_arrays(inputs: CaseInputs) -> WeightDict:
    """The arrays by input name (and the targets, in training)."""
    unknown = sorted({name for name, _ in inputs.axes} - APPLIED_AXES)
    if unknown:
        raise TypeError(f"case_arrays does not apply the input axes {unknown}")
    workload = get_workload(inputs.workload)
    return workload.make_inputs(inputs.batch_size, dict(inputs.params), inputs.mode, inputs.seed)
