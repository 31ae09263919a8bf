"""Calibration data for the int8 quantizers (backends/*/quantize.py).

It comes from the workload's own input distribution under a seed of its own
(CALIBRATION_SEED added to the case's), so it never holds the inputs that are
timed or evaluated; a user's model is calibrated on its --input-data when
given, else on seeded random batches of its inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dlbench.spec.case import Case
from dlbench.spec.case_inputs import CaseInputs
from dlbench.spec.model_signature import InputSpec
from dlbench.workloads import get_workload
from dlbench.workloads.inputs import case_arrays
from dlbench.workloads.user_model import model_inputs

if TYPE_CHECKING:
    import numpy as np

CALIBRATION_SAMPLES = 64
# ONNX Runtime's calibration batches of built-in workloads (the export has a dynamic batch)
CALIBRATION_BATCH = 8
# added to the case's seed: calibration never sees the measured or evaluated inputs
CALIBRATION_SEED = 7919
# user models without --input-data: seeded random batches of the case's shapes
USER_CALIBRATION_BATCHES = 8


def calibration_inputs(case: Case, seed: int, batch: int) -> list[dict[str, np.ndarray]]:
    """A built-in workload's calibration data: CALIBRATION_SAMPLES samples, in batches."""
    workload = get_workload(case.workload)
    params = workload.resolve_params("cpu", dict(case.params))
    count = max(CALIBRATION_SAMPLES, batch)
    arrays = case_arrays(CaseInputs.of(case, params, seed + CALIBRATION_SEED, count))
    return [
        {name: array[start : start + batch] for name, array in arrays.items()}
        for start in range(0, count - batch + 1, batch)
    ]


def user_calibration(
    case: Case, signature: Sequence[InputSpec], seed: int
) -> tuple[list[dict[str, np.ndarray]], str]:
    """A user model's calibration batches, and where they came from: its
    --input-data when given, else seeded random batches of its inputs."""
    if case.given_model.input_data:
        return [model_inputs(case, signature, seed)], "--input-data"
    batches = [
        model_inputs(case, signature, seed + CALIBRATION_SEED + k)
        for k in range(USER_CALIBRATION_BATCHES)
    ]
    return batches, "seeded random batches of the model's inputs (a seed of their own)"
