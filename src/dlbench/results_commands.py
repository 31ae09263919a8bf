"""CLI subcommands over stored results: runs, export, import, compare, report, rerun."""

from __future__ import annotations

import argparse
import math

from rich.table import Table

from dlbench.commands import load_run, out, say
from dlbench.errors import UserError
from dlbench.report.compare import RunComparison, compare_runs, regressions
from dlbench.report.leaderboard import Pivot, pivot
from dlbench.report.table import escape_markup, fmt
from dlbench.results.files import read_json, write_csv, write_json
from dlbench.results.store import Store


def cmd_runs(args: argparse.Namespace) -> int:
    with Store(args.db) as store:
        summaries = store.list_runs()
        table = Table(title=f"runs in {escape_markup(str(store.path))}")
    for name in ("id", "started", "machine", "suite", "cases", "failures", "state"):
        table.add_column(name, justify="right" if name in ("cases", "failures") else "left")
    for s in summaries:
        state = "complete" if s.finished_at else "[yellow]unfinished[/yellow]"
        table.add_row(
            escape_markup(s.id),  # an imported run's fields are data, not markup
            escape_markup(s.started_at),
            escape_markup(s.hostname or "?"),
            escape_markup(s.suite),
            str(s.cases),
            str(s.failures),
            state,
        )
    out.print(table)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.json_path is None and args.csv_path is None:
        raise UserError("dlbench export: give --json FILE and/or --csv FILE")
    run = load_run(args.run, args.db)
    if args.json_path is not None:
        write_json(run, args.json_path)
    if args.csv_path is not None:
        write_csv(run, args.csv_path)
    say(f"exported run {run.id}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    run = read_json(args.file)  # validated: schema version and every field's type
    with Store(args.db) as store:
        store.import_run(run)
        say(f"imported run {run.id} ({len(run.results)} results) into {store.path}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    runs = [load_run(ref, args.db) for ref in args.runs]
    if args.by == "hardware":
        from dlbench.report.hardware import hardware_rows, hardware_table

        if not hardware_rows(runs):
            raise UserError("--by hardware needs runs with add results (dlbench run seed-add)")
        out.print(hardware_table(runs))
        return 0
    if args.by is not None:
        out.print(pivot_table(pivot(runs, args.by, args.metric, args.baseline), args))
        return 0
    if len(runs) != 2:
        raise UserError("dlbench compare: give two runs (A B), or --by with any number of runs")
    comparison = compare_runs(runs[0], runs[1], args.metric)
    out.print(comparison_table(comparison, args.metric, runs[0].id, runs[1].id))
    if args.fail_on_regression is not None:
        slower = regressions(comparison, args.fail_on_regression)
        for case in slower:
            say(
                f"regression: {case.label}: {100 * case.slowdown:+.1f}% "
                f"(at least {100 * case.slowdown_low:+.1f}%)"
            )
        if slower:
            return 1
    return 0


VERDICT_STYLE = {"slower": "red", "faster": "green"}


def comparison_table(c: RunComparison, metric: str, id_a: str, id_b: str) -> Table:
    table = Table(title=f"{metric}: A = {id_a}, B = {id_b} (B/A with 95% bootstrap interval)")
    for name in ("case", "A", "B", "B/A", "95% interval", "verdict"):
        table.add_column(name, justify="left" if name in ("case", "verdict") else "right")
    for case in c.cases:
        interval = (
            "-" if case.interval is None else f"{case.interval[0]:.3f}-{case.interval[1]:.3f}"
        )
        style = VERDICT_STYLE.get(case.verdict)
        verdict = f"[{style}]{case.verdict}[/{style}]" if style else case.verdict
        ratio = "-" if math.isnan(case.ratio) else f"{case.ratio:.3f}"
        table.add_row(
            escape_markup(case.label),
            fmt(case.value_a),
            fmt(case.value_b),
            ratio,
            interval,
            verdict,
        )
    notes = [f"only in A: {label}" for label in c.only_a] + [f"only in B: {x}" for x in c.only_b]
    notes += [f"context differs: {k}: {a!r} vs {b!r}" for k, (a, b) in c.context.items()]
    table.caption = escape_markup("\n".join(notes)) if notes else "same context"
    return table


def pivot_table(p: Pivot, args: argparse.Namespace) -> Table:
    table = Table(title=f"{args.metric} by {args.by}; (x) relative to {p.baseline}")
    table.add_column(args.by)
    for column in p.columns:
        table.add_column(escape_markup(column), justify="right")
    for row in p.rows:
        cells = []
        for column in p.columns:
            value, relative = p.cells.get((row, column)), p.relative(row, column)
            cells.append(
                "-"
                if value is None
                else f"{fmt(value)}" + (f" ({relative:.2f}x)" if relative else "")
            )
        table.add_row(escape_markup(row), *cells)
    return table


def cmd_report(args: argparse.Namespace) -> int:
    from dlbench.report.html import write_html

    if args.html is None and args.plots is None:
        raise UserError("dlbench report: give --html FILE and/or --plots DIR")
    runs = [load_run(ref, args.db) for ref in args.runs]
    if args.html is not None:
        write_html(runs, args.html)
        say(f"wrote {args.html}")
    if args.plots is not None:
        from dlbench.report.run_plots import write_run_plots
        from dlbench.report.timeline_plot import write_timeline_pngs

        for path in [*write_run_plots(runs, args.plots), *write_timeline_pngs(runs, args.plots)]:
            say(f"wrote {path}")
    return 0


def cmd_rerun(args: argparse.Namespace) -> int:
    from dlbench.commands import RichProgress
    from dlbench.config import Case, Settings, validate_case, validate_settings
    from dlbench.launch import session

    original = load_run(args.run, args.db)
    cases = [validate_case(Case.from_dict(r.case)) for r in original.results if r.case]
    if not cases:
        raise UserError(f"run {original.id} records no cases to rerun (written before 0.1.0?)")
    settings = validate_settings(Settings.from_dict(original.settings))
    with Store(args.db) as store, RichProgress(len(cases)) as progress:
        run = session.run_plan(original.suite, cases, settings, store, progress=progress)
    comparison = compare_runs(original, run, args.metric)
    out.print(comparison_table(comparison, args.metric, original.id, run.id))
    return 1 if run.failures else 0
