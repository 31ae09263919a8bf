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
    case's axes that change them (`axes`: Case fields marked INPUT_AXIS, by name)."""

    workload: str
    params: tuple[tuple[str, int], ...]
    seed: int
    batch_size: int
    mode: str = "infer"
    # each as text: a name from its vocabulary as it is, any other value as its JSON
    # (the marked fields may be of any type; text keeps this record typed)
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
    """The case's values of the fields that change its inputs, by their flat names."""
    return tuple(
        (name, _as_text(case.value_of(name)))
        for name, f in record_dict.flat_fields(Case)
        if f.metadata.get(INPUTS_KEY)
    )


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(record_dict.plain(value))
