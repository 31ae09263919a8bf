"""Run a plan of cases into a Run: store, files and progress, case by case.

Each finished case is committed to the store and the JSON/CSV files are
rewritten (atomically) before the next case starts, so an interrupted run
loses at most the case that was running.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from dlbench.config import Case, Settings
from dlbench.launch.runner import run_case
from dlbench.launch.worker import now_iso
from dlbench.results.env import fingerprint
from dlbench.results.files import write_csv, write_json
from dlbench.results.records import Result, Run
from dlbench.results.store import Store


@dataclass(frozen=True)
class Outputs:
    """Where a run is written besides the store."""

    json_path: Path | None = None
    csv_path: Path | None = None


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: the finished cases are stored; `run` holds them."""

    def __init__(self, run: Run) -> None:
        super().__init__(run.id)
        self.run = run


class Progress:
    """Callbacks the CLI implements to show progress; the default shows nothing."""

    def case_started(self, index: int, total: int, case: Case) -> None:
        """Called before a case's worker starts."""

    def case_finished(self, index: int, total: int, result: Result) -> None:
        """Called once the case's result is stored."""


def new_run_id() -> str:
    """Sortable, readable and unique: UTC time plus random hex."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def run_plan(
    suite: str,
    cases: Sequence[Case],
    settings: Settings,
    store: Store,
    outputs: Outputs = Outputs(),
    progress: Progress | None = None,
    runner: Callable[[Case, Settings], Result] = run_case,
) -> Run:
    """Measure every case in its own worker and return the complete Run."""
    progress = progress or Progress()
    run = Run(
        id=new_run_id(),
        started_at=now_iso(),
        suite=suite,
        settings=settings.to_dict(),
        env=fingerprint(),
        command=list(sys.argv),
    )
    _write_files(run, outputs)  # fails early, before any case, if a path is unwritable
    store.begin_run(run)
    for index, case in enumerate(cases):
        progress.case_started(index, len(cases), case)
        try:
            result = runner(case, settings)  # the runner kills its worker on Ctrl-C
        except KeyboardInterrupt:
            raise RunInterrupted(run) from None
        run.results.append(result)
        store.add_result(run.id, index, result)
        _write_files(run, outputs)
        progress.case_finished(index, len(cases), result)
    run.finished_at = now_iso()
    store.finish_run(run.id, run.finished_at)
    _write_files(run, outputs)
    return run


def _write_files(run: Run, outputs: Outputs) -> None:
    if outputs.json_path is not None:
        write_json(run, outputs.json_path)
    if outputs.csv_path is not None:
        write_csv(run, outputs.csv_path)
