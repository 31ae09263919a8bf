"""What a case's inputs are made from, as one frozen record.

Every framework's step, the output check, the int8 check, the generation loops and
the torch reference's builder (a process of its own, sent this record as JSON) make
a built-in workload's inputs from it, through workloads.inputs.case_arrays. So an
axis that changes the inputs is a Case field marked INPUT_AXIS and the lines of
case_arrays that apply it: its value reaches every framework, the reference and the
reference's cache key (digest) without another edit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from dlbench.spec import record_dict
from dlbench.spec.case import Case
from dlbench.spec.case_parts import INPUTS_KEY


@dataclass(frozen=True)
class CaseInputs:
    """A built-in workload's inputs: `batch_size` samples of `workload` at its resolved
    `params`, from `seed`, for `mode` (training adds the targets), and the values of the
    case's axes that change them (`axes`: Case fields marked INPUT_AXIS, by name).
    The reference's outputs, its int8 models and the torch decoder's own reference are
    cached under its digest."""

    workload: str
    params: tuple[tuple[str, int], ...]
    seed: int
    batch_size: int
    mode: str = "infer"
    # those away from their default only (adding an axis keeps every cached output),
    # each value as its JSON text (the marked fields may be of any type; text keeps
    # this record typed, and JSON keeps 1 and "1" apart)
    axes: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # one order, so that the same inputs have one digest however params were given
        object.__setattr__(self, "params", tuple(sorted(self.params)))

    @classmethod
    def of(
        cls,
        case: Case,
        params: dict[str, int],
        seed: int,
        batch_size: int,
        mode: str = "infer",
    ) -> CaseInputs:
        """The inputs of `case` at its resolved params, a seed and a batch size."""
        return cls(case.workload, tuple(params.items()), seed, batch_size, mode, input_axes(case))

    def digest(self) -> str:
        """Names the reference's output for exactly these inputs (12 hex digits)."""
        text = json.dumps(record_dict.to_dict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def input_axes(case: Case) -> tuple[tuple[str, str], ...]:
    """The case's values of the fields that change its inputs, by their flat names, where
    they are not at their default."""
    axes = []
    for name, f in record_dict.flat_fields(Case):
        if not f.metadata.get(INPUTS_KEY):
            continue
        value = case.value_of(name)
        if not record_dict.holds_default(value, record_dict.field_default(f)):
            axes.append((name, json.dumps(record_dict.plain(value))))
    return tuple(axes)
