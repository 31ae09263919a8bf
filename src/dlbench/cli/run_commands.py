"""`dlbench run`, `roofline` and `rerun`: plan cases, launch them, print what came back."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from dataclasses import replace

from dlbench.atomic import check_output_folder
from dlbench.cli.terminal import (
    RichProgress,
    comparison_table,
    out,
    print_cases,
    print_run,
    print_study,
    say,
    table_width,
)
from dlbench.errors import RunBroken, RunInterrupted, UserError
from dlbench.launch import session
from dlbench.launch.endpoint_probe import check_endpoints, take_credentials
from dlbench.launch.preflight import check_user_models
from dlbench.plan.build import Plan, RunRequest, build_plan, given_options, request_from_options
from dlbench.plan.resume import pending_cases
from dlbench.plan.validate import validate_case, validate_settings
from dlbench.report.compare import compare_runs
from dlbench.report.table import run_table
from dlbench.results.lookup import load_run
from dlbench.results.records import Run
from dlbench.results.store import Store, open_store


def request_from_args(args: argparse.Namespace) -> RunRequest:
    """The run command's request: every Case and Settings field's option by its field
    name (cli.parser adds them from the fields' metadata), and the plan's own options."""
    request = replace(
        request_from_options(vars(args)),
        suite=args.suite,
        inputs=tuple(sorted(dict(args.inputs).items())),  # one shape per input, the last
        strict=args.strict,
        samples_per_query=args.samples_per_query,
        sweeps=tuple(args.sweep),
    )
    if args.epochs:  # --epochs N is the epoch workloads' parameter epochs=N
        request = replace(request, params=(*request.params, ("epochs", args.epochs)))
    return request


def cmd_run(args: argparse.Namespace) -> int:
    if args.plots is not None:  # before the run, not after it is stored
        check_output_folder(args.plots, "--plots")
    # before anything sees the URL: its credentials are sent, never printed or stored
    args.endpoint = take_credentials(args.endpoint, args.api_key, resuming=args.resume is not None)
    if args.resume is not None:
        given = given_options(request_from_args(args))
        if given:
            raise UserError(f"--resume takes the run's own plan; drop {', '.join(given)}")
        if args.dry_run:
            raise UserError("--dry-run checks a new plan; drop it, or drop --resume")
        return _resume(args)
    if args.dry_run:
        return _dry_run(request_from_args(args), args)
    return _finish(_run_request(request_from_args(args), args), args)


def _dry_run(request: RunRequest, args: argparse.Namespace) -> int:
    """The plan as a run would make it, every check passed, and nothing run or stored."""
    plan = _checked_plan(request, args)
    say(f"{_plan_line(plan)}; nothing run (--dry-run)")
    print_cases(plan.cases)
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    """The `ceilings` suite; later runs on this machine report efficiency against it."""
    settings = {"min_time_s": args.min_time, "timeout_s": args.timeout, "sustain_s": args.sustain}
    request = RunRequest(
        suite="ceilings",
        device=args.device,
        threads=args.threads,
        settings=tuple((k, v) for k, v in settings.items() if v is not None),
    )
    run = _run_request(request, args)
    out.print(run_table(run, table_width()))
    from dlbench.report.studies.hardware import ceilings_table

    out.print(ceilings_table(run))
    if run.failures:
        say(f"{run.failures} of {len(run.results)} case(s) failed")
        return 1
    return 0


def _checked_plan(request: RunRequest, args: argparse.Namespace) -> Plan:
    plan = build_plan(request)
    for note in plan.skipped:
        say(f"skipping: {note}")
    # a user model's bad file or inputs end here, in exit 2, before the run is stored
    progress = None if args.quiet else say
    check_user_models(plan.cases, plan.settings.seed, progress=progress)
    # a server that cannot be measured ends here too; its cases get the model it serves
    return replace(plan, cases=tuple(check_endpoints(plan.cases, plan.settings)))


def _plan_line(plan: Plan) -> str:
    """What a plan will run, as the run and its dry run both say it."""
    repeat = plan.settings.repeat
    each = f", {repeat} processes each, round-robin" if repeat > 1 else ""
    return f"{len(plan.cases)} case(s) of suite {plan.suite!r}{each}"


def _run_request(request: RunRequest, args: argparse.Namespace) -> Run:
    plan = _checked_plan(request, args)
    outputs = session.Outputs(json_path=args.json_path, csv_path=args.csv_path)
    with open_store(args.db, on_wait=say) as store:
        say(f"{_plan_line(plan)}; store {store.name}")
        run = _interruptible(
            store,
            lambda progress: session.run_plan(
                plan.suite, plan.cases, plan.settings, store, outputs, progress
            ),
            len(plan.cases) * plan.settings.repeat,
            args,
        )
    return run


def _resume(args: argparse.Namespace) -> int:
    outputs = session.Outputs(json_path=args.json_path, csv_path=args.csv_path)
    with open_store(args.db, on_wait=say) as store:
        if args.resume not in store.run_ids():
            raise UserError(f"no run {args.resume!r} in store {store.name} (see dlbench runs)")
        previous = store.load_run(args.resume)
        cases, settings, pending = pending_cases(previous)
        left = f"{pending} of {len(previous.plan) * settings.repeat}"
        rerun = "; a process disturbed while measured runs again" if settings.repeat > 1 else ""
        say(f"resuming run {previous.id}: {left} process(es) left{rerun}")
        run = _interruptible(
            store,
            lambda progress: session.resume_run(
                previous, cases, settings, store, outputs, progress
            ),
            pending,
            args,
        )
    return _finish(run, args)


def _interruptible(
    store: Store,
    work: Callable[[session.Progress | None], Run],
    total: int,
    args: argparse.Namespace,
) -> Run:
    """Run with a progress bar; on Ctrl-C, or a fault that stops the run midway, say
    what was kept and how to go on."""
    try:
        if getattr(args, "quiet", False):
            return work(None)
        with RichProgress(total) as progress:
            return work(progress)
    except RunInterrupted as stop:
        say(
            f"interrupted; {len(stop.run.results)} finished case(s) of run {stop.run.id} are "
            f"stored in {store.name}; resume with: {resume_command(stop.run.id, args)}"
        )
        raise
    except RunBroken as broken:
        raise UserError(
            f"{broken}; {len(broken.run.results)} finished case(s) of run {broken.run.id} are "
            f"stored in {store.name}; once that is fixed, resume with: "
            f"{resume_command(broken.run.id, args)}"
        ) from None


def resume_command(run_id: str, args: argparse.Namespace) -> str:
    """The command that finishes this run: with the store, and the files, it was given."""
    words = ["dlbench", "run", "--resume", run_id]
    for option, name in (("--db", "db"), ("--json", "json_path"), ("--csv", "csv_path")):
        value = getattr(args, name, None)
        if value is not None:
            words += [option, str(value)]
    return shlex.join(words)


def _finish(run: Run, args: argparse.Namespace) -> int:
    print_run(run, getattr(args, "wide", False))
    try:
        print_study(run, args.baseline, args.plots, args.latency_budget_ms)
    except UserError as exc:
        raise UserError(
            f"{exc}; run {run.id} is stored: print its study again with "
            f"`dlbench show {run.id} --plots DIR`"
        ) from None
    if run.failures:
        say(f"{run.failures} of {len(run.results)} case(s) failed")
        return 1
    return 0


def cmd_rerun(args: argparse.Namespace) -> int:

    original = load_run(args.run, args.db, on_wait=say)
    # As it ran, but on the device as asked: "auto" finds this machine's device
    # again, and a DDP case its GPUs (rank 0 recorded cuda:0).
    cases = list(
        dict.fromkeys(
            validate_case(replace(r.case, device=r.requested_device or r.case.device))
            for r in original.results
        )
    )
    if not cases:
        raise UserError(f"run {original.id} has no results to rerun")
    settings = validate_settings(original.settings)
    # A label names the code measured, which only the user knows: the original's would
    # misname a rerun of other code, so the rerun carries only the one given here.
    settings = replace(settings, label=args.label)
    with open_store(args.db, on_wait=say) as store:
        run = _interruptible(
            store,
            lambda progress: session.run_plan(
                original.suite, cases, settings, store, progress=progress
            ),
            len(cases) * settings.repeat,  # a bar step per worker process
            args,
        )
    comparison = compare_runs(original, run, args.metric)
    out.print(comparison_table(comparison, args.metric, original.id, run.id))
    return 1 if run.failures else 0
