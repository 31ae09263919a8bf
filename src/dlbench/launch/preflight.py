"""Before a run starts: do the user's model files load, and do --input and
--input-data fit what each framework sees in them?

The worker resolves a user model's inputs too, but only once the run is in the
store. A missing .npz key, a wrong shape or dtype, or a truncated file is the
user's mistake: it must end in exit 2 with one line, and nothing stored. So each
(model, framework) pair is loaded once here, in a process of its own (the same
loader as `dlbench inspect`), and the case's inputs are resolved against the
signature it reports with the worker's own `case_inputs`. A framework that
cannot load the file is not the user's mistake (an operator it lacks, a
conversion it cannot do): that case runs and fails with the framework's own
reason kept in the result. A file the loader would read only unsafely (a Keras
Lambda layer) without --trust-model is the user's call: exit 2 here, as a
pickled torch file is refused earlier, from its format alone (plan.user_model_checks).
A file cut short is caught earlier too, by its format's own length fields
(workloads.model_format).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.errors import CaseError, UserError
from dlbench.launch.inspect import FrameworkView, load_in_worker
from dlbench.spec.case import Case
from dlbench.spec.registry import framework_info
from dlbench.workloads.memory import WORKER_BYTES, available_bytes
from dlbench.workloads.model_format import model_format

if TYPE_CHECKING:  # user_model imports NumPy: importing dlbench's command line must not
    import numpy as np


def check_user_models(
    cases: Sequence[Case], seed: int, progress: Callable[[str], None] | None = None
) -> None:
    """UserError (exit 2) where a user model case's inputs do not fit the signature
    its framework reads from the file."""
    if all(case.user_model is None for case in cases):
        return
    from dlbench.workloads.user_model import case_inputs, load_input_data

    views: dict[tuple[str, str, bool], FrameworkView] = {}
    # (model, framework, trust), --input's specs, --input-data's file, batch size
    checked: set[
        tuple[tuple[str, str, bool], tuple[tuple[str, str], ...], str | None, int | None]
    ] = set()
    data: dict[str, dict[str, np.ndarray]] = {}
    for case in cases:
        user = case.user_model
        if user is None:
            continue
        key = (user.model, case.framework, user.trust_model)
        name = Path(user.model).name
        if key not in views:
            if progress is not None:
                progress(f"checking {name} on {case.framework}")
            views[key] = _load(case)
        view = views[key]
        if view.untrusted:  # refused by the user's own choice: no run to store
            raise UserError(f"--model {name} on {case.framework}: {view.reason}")
        inputs = (key, user.inputs, user.input_data, case.batch_size)
        if view.verdict != "loads" or inputs in checked:
            continue
        checked.add(inputs)
        if user.input_data is not None and user.input_data not in data:
            data[user.input_data] = load_input_data(Path(user.input_data))
        signature = list(view.inputs)
        given = data.get(user.input_data) if user.input_data is not None else None
        # the worker holds the file's arrays and the values made beside them
        room = available_bytes() - WORKER_BYTES - sum(a.nbytes for a in (given or {}).values())
        try:
            case_inputs(case, signature, seed, given, room)  # the worker's own resolution
        except CaseError as exc:
            raise UserError(f"--model {name} on {case.framework}: {exc}") from None


def _load(case: Case) -> FrameworkView:
    user = case.given_model
    path = Path(user.model)
    version = framework_info(case.framework).installed_version() or "?"
    return load_in_worker(case.framework, version, model_format(path), path, user.trust_model)
