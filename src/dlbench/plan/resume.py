"""What an interrupted run still has to do: its own plan, validated again."""

from __future__ import annotations

from dlbench.errors import UserError
from dlbench.plan.validate import validate_case, validate_settings
from dlbench.results.records import Run
from dlbench.results.repeats import last_process_ok, slots_done
from dlbench.spec.case import Case, Settings


def pending_cases(run: Run) -> tuple[list[Case], Settings, int]:
    """An interrupted run's plan, its settings, and how many worker processes are
    still to run (--repeat N: a case with fewer than N repeats done continues)."""
    if run.finished_at is not None:
        raise UserError(f"run {run.id} is complete; nothing to resume")
    if not run.plan:
        raise UserError(f"run {run.id} stored no plan (made by an older dlbench); rerun it instead")
    cases = [validate_case(case) for case in run.plan]
    settings = validate_settings(run.settings)
    done = sum(
        min(settings.repeat, slots_done(r)) if last_process_ok(r) else settings.repeat
        for r in run.results
    )
    return cases, settings, len(cases) * settings.repeat - done
