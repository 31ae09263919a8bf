"""A built-in workload's inputs, made in one place from the case's record of them
(spec.case_inputs.CaseInputs): each framework's worker, the checks, the generation
loops and the torch reference's builder all call case_arrays, so they hold the same
numbers. An axis marked INPUT_AXIS is applied here.
"""

from __future__ import annotations

from dlbench.spec.case_inputs import CaseInputs
from dlbench.workloads import get_workload
from dlbench.workloads.base import WeightDict, Workload


def case_arrays(inputs: CaseInputs, workload: Workload | None = None) -> WeightDict:
    """The arrays by input name (and the targets, in training); `workload` where the
    caller holds its object already (the worker's), else looked up by name."""
    made = workload if workload is not None else get_workload(inputs.workload)
    return made.make_inputs(inputs.batch_size, dict(inputs.params), inputs.mode, inputs.seed)
