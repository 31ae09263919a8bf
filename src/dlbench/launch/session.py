"""Run a plan of cases into a Run: store, files and progress, case by case.

Each finished case is committed to the store and the JSON/CSV files are
rewritten (atomically) before the next case starts, so an interrupted run
loses at most the case that was running.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dlbench.errors import RunBroken, RunInterrupted, UserError
from dlbench.launch.runner import run_case
from dlbench.results.ceilings import with_measured_ceilings
from dlbench.results.env import fingerprint
from dlbench.results.files import write_csv, write_json
from dlbench.results.limits import with_limits
from dlbench.results.records import Result, Run, now_iso
from dlbench.results.repeats import add_process, last_process_ok, processes, slots_done
from dlbench.results.run_ids import new_run_id, run_path
from dlbench.results.store import Store
from dlbench.results.store_location import redacted_argv
from dlbench.spec.case import Case, Settings


@dataclass(frozen=True)
class Outputs:
    """Where a run is written besides the store."""

    json_path: Path | None = None
    csv_path: Path | None = None


# (case, settings, on_note, files_dir): run_case, or a stand-in in tests
Runner = Callable[[Case, Settings, Callable[[str], None], Path], Result]


class Progress:
    """Callbacks the CLI implements to show progress; the default shows nothing."""

    def case_started(self, index: int, total: int, case: Case) -> None:
        """Called before a case's worker starts."""

    def case_note(self, line: str) -> None:
        """A progress line from the running case (an epoch finished)."""

    def case_finished(self, index: int, total: int, result: Result, run: Run) -> None:
        """Called once the case's result is stored in `run` (which its derived values,
        efficiency and scaling, are read with)."""

    def process_added(self) -> None:
        """A --repeat process was disturbed and its repeat runs again: one more process
        than the plan counted."""


def run_plan(
    suite: str,
    cases: Sequence[Case],
    settings: Settings,
    store: Store,
    outputs: Outputs = Outputs(),
    progress: Progress | None = None,
    runner: Runner = run_case,
) -> Run:
    """Measure every case in its own worker and return the complete Run."""
    env = fingerprint()
    ceilings = store.latest_ceilings(env.value_of("hostname"))
    if ceilings is not None:  # every result's efficiency is measured against these
        env = replace(env, ceilings=ceilings)
    run = Run(
        id=new_run_id(),
        started_at=now_iso(),
        suite=suite,
        settings=settings,
        env=env,
        command=redacted_argv(sys.argv),  # a store URL's password is never stored
        plan=tuple(cases),  # what --resume needs to finish the run
    )
    store.begin_run(run)  # the first write: a locked, read-only or full store stops here
    try:
        _write_files(run, outputs)  # fails early, before any case, if a path is unwritable
    except UserError:
        store.discard_run(run.id)  # a run that never started leaves nothing stored
        raise
    return _run_pending(run, list(cases), settings, store, outputs, progress or Progress(), runner)


def resume_run(
    run: Run,
    cases: Sequence[Case],
    settings: Settings,
    store: Store,
    outputs: Outputs = Outputs(),
    progress: Progress | None = None,
    runner: Runner = run_case,
) -> Run:
    """Run the cases of an interrupted run that have no stored result yet.

    Results are stored under their index in the plan, so a finished case is
    kept exactly once and a case that was running when the run died (it has
    no result) runs again. `cases` and `settings` are the run's own plan,
    validated again (plan.resume.pending_cases).
    """
    done = dict(zip(store.result_seqs(run.id), run.results, strict=True))
    return _run_pending(
        run, list(cases), settings, store, outputs, progress or Progress(), runner, done
    )


# An OSError that is the machine's, not dlbench's: the disk or quota filled up.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _run_pending(
    run: Run,
    cases: list[Case],
    settings: Settings,
    store: Store,
    outputs: Outputs,
    progress: Progress,
    runner: Runner,
    done: dict[int, Result] | None = None,
) -> Run:
    """Run what is pending; a fault on the way (the store or a run file cannot be
    written) keeps what was stored and says so, as a RunBroken."""
    try:
        for latest in _runs_as_cases_end(
            run, cases, settings, store, outputs, progress, runner, dict(done or {})
        ):
            run = latest  # the run as stored so far, for the handlers below
            _write_files(run, outputs)
        finished = now_iso()
        store.finish_run(run.id, finished, run.env)
        run = replace(run, finished_at=finished)
        _write_files(run, outputs)
    except RunInterrupted:
        raise
    except KeyboardInterrupt:  # between workers (a store write, a wait for its lock)
        raise RunInterrupted(run) from None
    except UserError as exc:
        raise RunBroken(run, str(exc)) from None
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise  # anything else is a dlbench bug: keep its traceback
        raise RunBroken(run, f"{exc.filename or 'a file'}: {exc.strerror}") from None
    return run


def _runs_as_cases_end(
    run: Run,
    cases: list[Case],
    settings: Settings,
    store: Store,
    outputs: Outputs,
    progress: Progress,
    runner: Runner,
    results: dict[int, Result],
) -> Iterator[Run]:
    """The run after each case's process, its result stored: each a new Run, so what a
    caller holds is what the store holds."""
    # Round-robin: every case's first process, then every case's second, ...,
    # so drift over the run's time reaches every case alike.
    while pending := [i for i in range(len(cases)) if _needs_process(results.get(i), settings)]:
        for index in pending:
            case = cases[index]
            progress.case_started(index, len(cases), case)
            earlier = results.get(index)
            files = case_files(run, outputs, store, index, earlier)
            try:
                # the runner kills its worker on Ctrl-C
                process = runner(case, settings, progress.case_note, files)
            except KeyboardInterrupt:
                raise RunInterrupted(run) from None
            result = process if settings.repeat == 1 else add_process(earlier, process)
            if _rerun_added(earlier, result, settings):
                progress.process_added()
            # a roofline run's own ceilings so far: its results are read against them
            measured = with_measured_ceilings(run, result)
            result = with_limits(result, measured)  # a generation's verdict, by the ceilings
            if earlier is None:
                store.add_result(run.id, index, result)
            else:
                store.replace_result(run.id, index, result)
            # only once stored: a fault above leaves `run` holding what the store holds
            results[index] = result
            run = replace(measured, results=tuple(results[i] for i in sorted(results)))
            yield run
            progress.case_finished(index, len(cases), result, run)


def case_files(
    run: Run, outputs: Outputs, store: Store, index: int, earlier: Result | None
) -> Path:
    """Where a case's process may leave files (LoadGen's logs): beside the run's
    JSON file when it has one, else beside the store, one folder per case and
    process. Nothing is created unless the case writes there."""
    if outputs.json_path is not None:
        root = outputs.json_path.with_name(f"{outputs.json_path.stem}-files")
    else:
        # the id may be an imported run's (--resume): checked, and kept inside run-files/
        root = run_path(store.files_root, run.id)
    done = (len(processes(earlier)) or 1) if earlier is not None else 0
    return root / f"case-{index + 1:03d}" / f"process-{done + 1}"


def _rerun_added(earlier: Result | None, result: Result, settings: Settings) -> bool:
    """Whether the process just added left its repeat open (disturbed): the case then
    needs one process more than the plan counted."""
    before = slots_done(earlier) if earlier is not None else 0
    return _needs_process(result, settings) and slots_done(result) == before


def _needs_process(result: Result | None, settings: Settings) -> bool:
    """Another process for this case: fewer than --repeat repeats done so far (a
    disturbed repeat runs again, results.repeats.slots_done); never after a
    failure or a skip. Without --repeat a case runs once, as it always did."""
    if result is None:
        return True
    if settings.repeat == 1 or not last_process_ok(result):
        return False
    return slots_done(result) < settings.repeat


def _write_files(run: Run, outputs: Outputs) -> None:
    if outputs.json_path is not None:
        write_json(run, outputs.json_path)
    if outputs.csv_path is not None:
        write_csv(run, outputs.csv_path)
