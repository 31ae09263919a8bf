"""The CLI's subcommands, each a thin call into the library plus printing."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dlbench.config import Case
from dlbench.errors import RunInterrupted, UserError
from dlbench.launch import session
from dlbench.plan import RunRequest, build_plan
from dlbench.registry import FRAMEWORKS, WORKLOADS
from dlbench.report.table import case_name, escape_markup, flags, fmt, rate_column, run_table
from dlbench.results.files import read_json
from dlbench.results.records import STATUS_SKIPPED, Result, Run
from dlbench.results.store import Store
from dlbench.workloads import get_workload

# Wide enough for the results table when output goes to a file or a CI log.
out = Console(width=None if sys.stdout.isatty() else 180)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 180)


class RichProgress(session.Progress):
    """A bar on stderr, redrawn only when a case starts or ends.

    auto_refresh is off on purpose: a refresh thread would wake the parent
    ten times a second while the worker is being measured.
    """

    def __init__(self, total: int) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            auto_refresh=False,
            transient=True,
        )
        self._task = self._bar.add_task("starting", total=total)
        self._description = "starting"

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def case_started(self, index: int, total: int, case: Case) -> None:
        self._description = f"running {escape_markup(case.label())}"
        self._bar.update(self._task, description=self._description)
        self._bar.refresh()

    def case_note(self, line: str) -> None:
        self._bar.update(self._task, description=f"{self._description}: {escape_markup(line)}")
        self._bar.refresh()

    def case_finished(self, index: int, total: int, result: Result) -> None:
        self._bar.console.print(case_line(result), highlight=False)
        self._bar.advance(self._task)
        self._bar.refresh()


def say(message: str) -> None:
    """One status line on stderr, never wrapped or styled (it may hold a command to copy)."""
    err.print(f"dlbench: {message}", markup=False, highlight=False, soft_wrap=True)


def case_line(result: Result) -> str:
    name = escape_markup(f"{case_name(result)} bs={result.batch_size} {result.device}")
    if result.status == STATUS_SKIPPED:
        return f"[yellow]SKIPPED[/yellow] {name}: {escape_markup(result.error or '')}"
    if not result.ok or result.latency_ms is None:
        return f"[red]FAILED[/red] {name}: {escape_markup(result.error or '')}"
    marks = flags(result)
    noisy = f" [yellow]({escape_markup(marks)})[/yellow]" if marks else ""
    return (
        f"[green]ok[/green] {name}: median {fmt(result.latency_ms.median)} ms, "
        f"{fmt(result.throughput)} samples/s, {rate_column(result)}{noisy}"
    )


def torchrun_args(text: str | None) -> tuple[str, ...]:
    """--torchrun "..." split as a shell would, or a one-line error."""
    try:
        return tuple(shlex.split(text or ""))
    except ValueError as exc:
        raise UserError(f"--torchrun {text!r}: {exc}") from None


def request_from_args(args: argparse.Namespace) -> RunRequest:
    settings = {
        "min_time_s": args.min_time,
        "min_iters": args.min_iters,
        "warmup_iters": args.warmup,
        "timeout_s": args.timeout,
        "seed": args.seed,
    }
    return RunRequest(
        suite=args.suite,
        workloads=tuple(args.workload),
        frameworks=tuple(args.framework),
        compiles=tuple(args.compiles),
        modes=tuple(args.mode),
        scenarios=tuple(args.scenario),
        device=args.device,
        batch_sizes=tuple(args.batch_size),
        threads=args.threads,
        interop_threads=args.interop_threads,
        params=tuple(args.param) + ((("epochs", args.epochs),) if args.epochs else ()),
        precisions=tuple(args.precisions),
        target_accuracy=args.target_accuracy,
        nproc=args.nproc or 1,
        transfer=args.transfer,
        torchrun_args=torchrun_args(args.torchrun),
        data_dir=str(args.data_dir.resolve()) if args.data_dir is not None else None,
        settings=tuple((k, v) for k, v in settings.items() if v is not None),
        model=args.model,
        inputs=tuple(sorted(dict(args.inputs).items())),
        trust_model=args.trust_model,
    )


CASE_OPTIONS = (
    "suite",
    "workload",
    "framework",
    "compiles",
    "mode",
    "scenario",
    "device",
    "precisions",
    "nproc",
    "torchrun",
    "transfer",
    "epochs",
    "target_accuracy",
    "data_dir",
    "batch_size",
    "threads",
    "interop_threads",
    "param",
    "min_time",
    "min_iters",
    "warmup",
    "timeout",
    "seed",
)


def cmd_run(args: argparse.Namespace) -> int:
    if args.resume is not None:
        given = [name for name in CASE_OPTIONS if getattr(args, name) not in (None, [])]
        if given:
            raise UserError(f"--resume takes the run's own plan; drop {', '.join(given)}")
        return _resume(args)
    return _finish(_run_request(request_from_args(args), args), args)


def cmd_roofline(args: argparse.Namespace) -> int:
    """The `ceilings` suite; later runs on this machine report efficiency against it."""
    settings = {"min_time_s": args.min_time, "timeout_s": args.timeout}
    request = RunRequest(
        suite="ceilings",
        device=args.device,
        threads=args.threads,
        settings=tuple((k, v) for k, v in settings.items() if v is not None),
    )
    run = _run_request(request, args)
    out.print(run_table(run))
    from dlbench.report.hardware import ceilings_table

    out.print(ceilings_table(run))
    if run.failures:
        say(f"{run.failures} of {len(run.results)} case(s) failed")
        return 1
    return 0


def _run_request(request: RunRequest, args: argparse.Namespace) -> Run:
    plan = build_plan(request)
    for note in plan.skipped:
        say(f"skipping: {note}")
    outputs = session.Outputs(json_path=args.json_path, csv_path=args.csv_path)
    with Store(args.db) as store:
        say(f"{len(plan.cases)} case(s) of suite {plan.suite!r}; store {store.path}")
        run = _interruptible(
            store,
            lambda progress: session.run_plan(
                plan.suite, plan.cases, plan.settings, store, outputs, progress
            ),
            len(plan.cases),
            args.quiet,
        )
    return run


def _resume(args: argparse.Namespace) -> int:
    outputs = session.Outputs(json_path=args.json_path, csv_path=args.csv_path)
    with Store(args.db) as store:
        if args.resume not in store.run_ids():
            raise UserError(f"no run {args.resume!r} in store {store.path} (see dlbench runs)")
        previous = store.load_run(args.resume)
        _, _, pending = session.pending_cases(previous)
        say(f"resuming run {previous.id}: {pending} of {len(previous.plan)} case(s) left")
        run = _interruptible(
            store,
            lambda progress: session.resume_run(previous, store, outputs, progress),
            pending,
            args.quiet,
        )
    return _finish(run, args)


def _interruptible(
    store: Store, work: Callable[[session.Progress | None], Run], total: int, quiet: bool
) -> Run:
    """Run with a progress bar; on Ctrl-C say what was kept and how to go on."""
    try:
        if quiet:
            return work(None)
        with RichProgress(total) as progress:
            return work(progress)
    except RunInterrupted as stop:
        say(
            f"interrupted; {len(stop.run.results)} finished case(s) of run {stop.run.id} are "
            f"stored in {store.path}; resume with: dlbench run --resume {stop.run.id}"
        )
        raise


def _finish(run: Run, args: argparse.Namespace) -> int:
    print_run(run)
    print_study(run, args.baseline, args.plots)
    if run.failures:
        say(f"{run.failures} of {len(run.results)} case(s) failed")
        return 1
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    tables = {
        "frameworks": frameworks_table,
        "workloads": workloads_table,
        "support": support_table,
        "suites": suites_table,
    }
    for topic in [args.topic] if args.topic else list(tables):
        out.print(tables[topic]())
    return 0


def support_table() -> Table:
    """Which framework runs which workload, in which modes ('-': not supported)."""
    table = Table(title="support matrix (modes per workload and framework)")
    table.add_column("workload")
    for name in FRAMEWORKS:
        table.add_column(name)
    for workload in WORKLOADS:
        modes = get_workload(workload).modes
        cells = [
            ", ".join(m for m in modes if info.supports(workload, m)) or "-"
            for info in FRAMEWORKS.values()
        ]
        table.add_row(workload, *cells)
    return table


def frameworks_table() -> Table:
    table = Table(title="frameworks")
    for name in ("name", "installed", "compile modes", "about"):
        table.add_column(name)
    for info in FRAMEWORKS.values():
        version = info.installed_version()
        status = f"[green]{version}[/green]" if version else f"[red]no[/red] ({info.install_hint})"
        table.add_row(info.name, status, ", ".join(info.compile_modes), info.label)
    return table


def workloads_table() -> Table:
    table = Table(title="workloads")
    for name in ("name", "modes", "default batch (cpu/gpu)", "params (cpu / gpu)", "about"):
        table.add_column(name)
    for name in WORKLOADS:
        w = get_workload(name)
        params = f"{_pairs(w.cpu_params)} / {_pairs(w.gpu_params)}"
        table.add_row(
            name,
            ", ".join(w.modes),
            f"{w.cpu_batch_size}/{w.gpu_batch_size}",
            escape_markup(params),
            w.description,
        )
    return table


def _pairs(params: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "-"


def suites_table() -> Table:
    from dlbench.suites import builtin_suite_names, load_suite

    table = Table(title="suites")
    table.add_column("name")
    table.add_column("about")
    for name in builtin_suite_names():
        table.add_row(name, load_suite(name).description)
    return table


def cmd_env(args: argparse.Namespace) -> int:
    from dlbench.cli import print_json
    from dlbench.results.env import fingerprint

    data = fingerprint()
    if args.json:
        print_json(data)
        return 0
    table = Table(title="environment", show_header=False)
    table.add_column("key")
    table.add_column("value")
    for key, value in data.items():
        table.add_row(key, escape_markup(str(value)))
    out.print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    run = load_run(args.run, args.db)
    print_run(run)
    print_study(run, args.baseline, args.plots)
    return 0


def print_run(run: Run) -> None:
    """The results table, and the per-epoch table where the run trained to a target."""
    from dlbench.report.training_studies import epochs_table

    out.print(run_table(run))
    epochs = epochs_table(run)
    if epochs is not None:
        out.print(epochs)


def print_study(run: Run, baseline: str, plots: Path | None) -> None:
    """The study report of the run's suite, if it has one, and its files."""
    from dlbench.report.study_output import STUDIES, rich_table, startup_table, write_study_files

    if run.suite not in STUDIES:
        if plots is not None:
            say(f"suite {run.suite!r} has no study charts; --plots ignored")
        return
    tables = STUDIES[run.suite](run, baseline)
    for table in tables:
        out.print(rich_table(table, baseline))
    out.print(startup_table(run))
    if plots is not None:
        for path in write_study_files(run, tables, plots):
            say(f"wrote {path}")


def load_run(ref: str, db: Path | None) -> Run:
    """A run from a JSON file path, else by id from the store."""
    if Path(ref).is_file() or ref.endswith(".json"):
        return read_json(Path(ref))
    with Store(db) as store:
        if ref not in store.run_ids():
            raise UserError(f"{ref!r} is neither a run file nor a run id in store {store.path}")
        return store.load_run(ref)
