"""`dlbench runs`, `export`, `import`, `compare` and `report`: work on stored runs."""

from __future__ import annotations

import argparse

from rich.table import Table

from dlbench.atomic import check_output_folder
from dlbench.cli.terminal import comparison_table, out, pivot_table, say
from dlbench.errors import UserError
from dlbench.report.compare import (
    RunComparison,
    compare_runs,
    flagged_text,
    gate_warnings,
    nothing_to_gate,
    regressions,
)
from dlbench.report.leaderboard import pivot
from dlbench.report.server_side import server_comparison_table
from dlbench.report.table import escape_markup
from dlbench.results.ci_formats import write_ci_format
from dlbench.results.files import read_json, write_csv, write_json
from dlbench.results.lookup import load_run
from dlbench.results.run_ids import run_path
from dlbench.results.store import open_store


def cmd_runs(args: argparse.Namespace) -> int:
    with open_store(args.db, read_only=True, on_wait=say) as store:
        summaries = store.list_runs()
        table = Table(title=f"runs in {escape_markup(store.name)}")
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
    if (args.ci_format is None) != (args.ci_out is None):
        raise UserError("dlbench export: --format and --out go together (--format "
                        "github-action-benchmark|bmf --out PATH)")  # fmt: skip
    if args.json_path is None and args.csv_path is None and args.ci_format is None:
        raise UserError("dlbench export: give --json FILE, --csv FILE and/or --format "
                        "github-action-benchmark|bmf --out PATH")  # fmt: skip
    run = load_run(args.run, args.db, on_wait=say)
    if args.json_path is not None:
        write_json(run, args.json_path)
    if args.csv_path is not None:
        write_csv(run, args.csv_path)
    if args.ci_format is not None:
        for path, what in write_ci_format(run, args.ci_format, args.ci_out):
            say(f"wrote {path}: {what}")
    say(f"exported run {run.id}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    run = read_json(args.file)  # validated: schema version and every field's type
    with open_store(args.db, on_wait=say) as store:
        store.import_run(run)
        say(f"imported run {run.id} ({len(run.results)} results) into {store.name}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    runs = [load_run(ref, args.db, on_wait=say) for ref in args.runs]
    if args.by == "hardware":
        from dlbench.report.studies.hardware import hardware_rows, hardware_table

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
    server = server_comparison_table(runs[0], runs[1])  # endpoints' own counters
    if server is not None:
        out.print(server)
    return 0 if args.fail_on_regression is None else _gate(comparison, args.fail_on_regression)


def _gate(comparison: RunComparison, percent: float) -> int:
    """--fail-on-regression: 1 on a regression; a user error (2) when no case matched,
    since a gate that judged nothing must not pass; warnings for what it left out."""
    problem = nothing_to_gate(comparison)
    if problem is not None:
        raise UserError(problem)
    for line in gate_warnings(comparison):
        say(line)
    slower = regressions(comparison, percent)
    for case in slower:
        # replicated evidence: both ends of its interval were estimated (report.compare)
        assert case.slowdown is not None and case.slowdown_low is not None
        disturbed = f"; {flagged_text(case)}" if case.flagged else ""
        say(
            f"regression: {case.label}: {100 * case.slowdown:+.1f}% "
            f"(at least {100 * case.slowdown_low:+.1f}%){disturbed}"
        )
    return 1 if slower else 0


def cmd_report(args: argparse.Namespace) -> int:
    from dlbench.report.html import write_html

    if args.html is None and args.plots is None:
        raise UserError("dlbench report: give --html FILE and/or --plots DIR")
    if args.plots is not None:
        check_output_folder(args.plots, "--plots")
    runs = [load_run(ref, args.db, on_wait=say) for ref in args.runs]
    if args.html is not None:
        write_html(runs, args.html)
        say(f"wrote {args.html}")
    if args.plots is not None:
        from dlbench.report.charts.png import curve_chart
        from dlbench.report.run_plots import write_run_plots
        from dlbench.report.studies.study_output import curve_charts
        from dlbench.report.timeline_plot import write_timeline_pngs

        curves = [
            curve_chart(chart, run_path(args.plots, run.id, f"-{chart.name}.png"))
            for run in runs
            for chart in curve_charts(run)
        ]
        for path in [*write_run_plots(runs, args.plots), *write_timeline_pngs(runs, args.plots)]:
            say(f"wrote {path}")
        for path in curves:
            say(f"wrote {path}")
    return 0
