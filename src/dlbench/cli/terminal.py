"""Everything the command line prints: the consoles, status lines, progress, tables.

Results go to stdout (`out`); status lines and the progress bar to stderr
(`err`), so `dlbench ... > results.txt` keeps the table clean.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dlbench.launch import session
from dlbench.measure.load_profile import SCHEDULE
from dlbench.report.compare import RunComparison, flagged_text, shown
from dlbench.report.leaderboard import Pivot
from dlbench.report.table import escape_markup, flags, fmt, plain, rate_column, run_table
from dlbench.results.decode_bound import decode_bound, no_ceiling_note
from dlbench.results.flags import disturbed
from dlbench.results.records import STATUS_SKIPPED, Result, Run
from dlbench.results.repeats import processes
from dlbench.results.roofline_bound import prefill_bound
from dlbench.spec.case import Case
from dlbench.spec.case_parts import DEFAULT_SLO_PERCENTILE

# Output to a file, a pipe or a CI log keeps every column of a table on one line a row
# (report.table sizes tables for a terminal only); status lines wrap at 180.
PIPED_WIDTH = 1000
out = Console(width=None if sys.stdout.isatty() else PIPED_WIDTH)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 180)


def table_width() -> int | None:
    """The terminal's columns a results table must fit, or None where output is piped."""
    return out.width if out.is_terminal else None


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

    def case_finished(self, index: int, total: int, result: Result, run: Run) -> None:
        self._bar.console.print(case_line(result, run), highlight=False)
        self._bar.advance(self._task)

    def process_added(self) -> None:
        # a disturbed --repeat process runs again: the bar's end moves with it
        task = self._bar.tasks[self._task]
        self._bar.update(self._task, total=(task.total or 0) + 1)
        self._bar.refresh()


def say(message: str) -> None:
    """One status line on stderr, never wrapped or styled (it may hold a command to copy)."""
    err.print(f"dlbench: {plain(message)}", markup=False, highlight=False, soft_wrap=True)


def print_cases(cases: Sequence[Case]) -> None:
    """A plan's cases, one label a line (plain: a label can hold a user's file name)."""
    for case in cases:
        out.print(plain(case.label()), markup=False, highlight=False, soft_wrap=True)


def case_line(result: Result, run: Run) -> str:
    name = escape_markup(result.case.label())
    if result.status == STATUS_SKIPPED:
        return f"[yellow]SKIPPED[/yellow] {name}: {escape_markup(result.error or '')}"
    if not result.ok or result.latency_ms is None:
        return f"[red]FAILED[/red] {name}: {escape_markup(result.error or '')}"
    marks = flags(result)
    noisy = f" [yellow]({escape_markup(marks)})[/yellow]" if marks else ""
    listed = processes(result)
    count = f" [{len(listed)} processes]" if listed else ""
    return (
        f"[green]ok[/green] {name}: median {fmt(result.latency_ms.median)} ms, "
        f"{fmt(result.throughput)} samples/s, {rate_column(result, run)}{_served(result)}"
        f"{_endpoint(result)}{_decode(result, run)}{_prefill(result, run)}{_limit(result)}"
        f"{noisy}{count}"
    )


def _decode(result: Result, run: Run) -> str:
    """A generation's decode against the memory-bandwidth bound (results.decode_bound)."""
    bound = decode_bound(result, run)
    if bound is None or bound.achieved_gbps is None:
        return ""
    text = f"; decode {fmt(bound.achieved_gbps)} GB/s"
    if bound.ceiling is not None:
        text += (f", {100 * (bound.mbu or 0.0):.0f}% of the {fmt(bound.ceiling.gbps)} GB/s "
                 f"ceiling ({bound.ceiling.source}): bound {fmt(bound.bound_tokens_per_s)} "
                 "tokens/s a sequence")  # fmt: skip
    note = bound.note(no_ceiling_note(result, run))
    if note is None:
        return escape_markup(text)
    style = "red" if bound.above_bound else "dim"
    return f"{escape_markup(text)} [{style}]({escape_markup(note)})[/{style}]"


def _prefill(result: Result, run: Run) -> str:
    """A generation's prefill against the compute bound (results.roofline_bound); the
    decode's line already says why there is no ceiling where there is none."""
    bound = prefill_bound(result, run)
    if bound is None or bound.achieved_gflops is None or bound.ceiling is None:
        return ""
    text = (f"; prefill {fmt(bound.achieved_gflops)} GFLOP/s, MFU {100 * (bound.mfu or 0.0):.0f}% "
            f"of {fmt(bound.ceiling.gflops)} ({bound.ceiling.source})")  # fmt: skip
    if not bound.above_bound:
        return escape_markup(text)
    return f"{escape_markup(text)} [red]({escape_markup(bound.note('') or '')})[/red]"


def _limit(result: Result) -> str:
    """What limits the case (results.limits), with its figure."""
    limit = result.details.limit
    if limit is None:
        return ""
    return f"; [bold]{escape_markup(limit.verdict)}[/bold]: {escape_markup(limit.figure)}"


def _served(result: Result) -> str:
    """LoadGen's own verdict and percentiles, for a case it drove."""
    loadgen = result.details.loadgen
    if loadgen is None:
        return ""
    latency = loadgen.latency_ms
    peak = ""
    if loadgen.tries is not None:  # --find-peak
        found = loadgen.peak_qps
        peak = f"peak {fmt(found)} QPS, " if found is not None else "no peak within the bound, "
    first, rest = loadgen.ttft_percentiles_ms, loadgen.tpot_percentiles_ms
    if first is not None and rest is not None:  # a generation server
        held = f"{loadgen.percentile or DEFAULT_SLO_PERCENTILE:g}"
        ttft, tpot = fmt(first.get(held)), fmt(rest.get(held))
        spread = f"TTFT p{held} {ttft} ms, TPOT p{held} {tpot} ms"
    else:
        spread = f"p50 {fmt(latency.get('50'))} ms, p99 {fmt(latency.get('99'))} ms"
    return f"; LoadGen: {peak}{spread}, {escape_markup(str(loadgen.verdict))}"


def clock_words(clock: str | None, open_loop: bool) -> str:
    """Where a load's latencies count from, in a few words (measure.load_profile)."""
    if clock == SCHEDULE:
        return "from the schedule"
    if not open_loop:
        return "closed loop: from the send"
    return "from the send"


def _endpoint(result: Result) -> str:
    """A server's load: its rates, token latencies, SLO verdict and errors."""
    load, tokens = result.details.endpoint, result.details.generation
    if load is None:
        return ""
    parts = [f"{fmt(load.requests_per_s)} requests/s", f"{fmt(load.output_tokens_per_s)} tok/s"]
    if tokens is not None:
        parts.append(
            f"TTFT p50 {fmt(tokens.ttft_p50_ms)} / p99 {fmt(tokens.ttft_p99_ms)} ms "
            f"({clock_words(load.timed_from, load.send_lag_p99_ms is not None)})"
        )
        parts.append(f"TPOT p50 {fmt(tokens.tpot_p50_ms)} / p99 {fmt(tokens.tpot_p99_ms)} ms")
    client = load.client
    if client is not None and client.loop_lag_p99_ms is not None:
        processes = f" over {client.processes} processes" if client.processes > 1 else ""
        parts.append(f"client lag p99 {fmt(client.loop_lag_p99_ms)} ms, CPU "
                     f"{100 * (client.cpu_share or 0.0):.0f}%, {fmt(client.chunks_per_s)} "
                     f"chunks/s{processes}")  # fmt: skip
    if load.slo_holds is not None:
        verdict = "held" if load.slo_holds else "missed"
        parts.append(f"goodput {fmt(load.goodput_per_s)}/s (SLO {verdict})")
    if load.peak_axis is not None:
        found = "none held" if load.peak is None else fmt(load.peak)
        parts.append(f"peak {load.peak_axis} {found}")
    failed = sum(load.errors.values())
    if failed:
        parts.append(f"{failed} of {load.requests} requests failed")
    return "; server: " + escape_markup(", ".join(parts))


def print_run(run: Run, wide: bool = False) -> None:
    """The results table, the per-epoch table where the run trained to a target, and a
    closing line where results were flagged as disturbed."""
    from dlbench.report.studies.training_studies import epochs_table

    out.print(run_table(run, table_width(), wide))
    epochs = epochs_table(run)
    if epochs is not None:
        out.print(epochs)
    closing = disturbed_line(run)
    if closing:
        say(closing)


def disturbed_line(run: Run) -> str | None:
    """One line when results were flagged as disturbed: how many, by what, what to do."""
    counts: dict[str, int] = {}
    flagged = 0
    for result in run.results:
        marks = [mark for mark in result.flags if disturbed(mark)]
        flagged += bool(marks)
        for mark in marks:
            counts[mark] = counts.get(mark, 0) + 1
    if not flagged:
        return None
    why = ", ".join(f"{mark} {count}" for mark, count in counts.items())
    return (
        f"{flagged} of {len(run.results)} result(s) were disturbed while measured ({why}): "
        "read them with care, or measure again on a quiet machine, with fewer --threads, "
        "or with --repeat 3 to see how far they move"
    )


def print_study(
    run: Run, baseline: str, plots: Path | None, budget_ms: float | None = None
) -> None:
    """The study report of the run's suite (if it has one), the best configuration
    under a latency budget (if asked), and with --plots their charts and the run's
    latency-throughput and serving curves."""
    from dlbench.report.studies.study_output import (
        rich_table,
        startup_table,
        studies_for,
        write_study_files,
    )

    tables = studies_for(run, baseline)
    for table in tables:
        out.print(rich_table(table, baseline))
    if tables:
        out.print(startup_table(run))
    if budget_ms is not None:
        from dlbench.report.studies.sweeps import budget_table

        out.print(rich_table(budget_table(run, budget_ms), baseline))
    if plots is not None:
        written = write_study_files(run, tables, plots)
        for path in written:
            say(f"wrote {path}")
        if not written:
            say(f"suite {run.suite!r} has no study charts and this run no curves; --plots ignored")


VERDICT_STYLE = {"slower": "red", "faster": "green"}


def comparison_table(c: RunComparison, metric: str, id_a: str, id_b: str) -> Table:
    # run ids are data (an imported run's, checked but still not markup)
    table = Table(
        title=escape_markup(
            f"{metric}: A = {id_a}, B = {id_b} (medians over processes; B/A with a 95% "
            "bootstrap interval over processes; Mann-Whitney U verdict)"
        )
    )
    for name in ("case", "procs A/B", "A", "B", "B/A", "95% interval", "verdict"):
        table.add_column(name, justify="left" if name in ("case", "verdict") else "right")
    for case in c.cases:
        interval = (
            "-" if case.interval is None else f"{case.interval[0]:.3f}-{case.interval[1]:.3f}"
        )
        style = VERDICT_STYLE.get(case.verdict.split(" ")[0])
        verdict = escape_markup(case.verdict)
        verdict = f"[{style}]{verdict}[/{style}]" if style else verdict
        if case.flagged:  # never a clean-looking verdict on a disturbed side
            verdict += f"\n[yellow]{escape_markup(flagged_text(case))}[/yellow]"
        if case.limits:  # what limits each side of a generation (results.limits)
            verdict += f"\n[dim]{escape_markup(case.limits)}[/dim]"
        ratio = "-" if math.isnan(case.ratio) else f"{case.ratio:.3f}"
        table.add_row(
            escape_markup(case.label),
            f"{case.processes_a}/{case.processes_b}",
            fmt(case.value_a),
            fmt(case.value_b),
            ratio,
            interval,
            verdict,
        )
    notes = [f"only in A: {label}" for label in c.only_a] + [f"only in B: {x}" for x in c.only_b]
    notes += [f"context differs: {k}: {shown(a)} vs {shown(b)}" for k, (a, b) in c.context.items()]
    table.caption = escape_markup("\n".join(notes)) if notes else "same context"
    return table


def pivot_table(p: Pivot, args: argparse.Namespace) -> Table:
    # the baseline is --baseline as typed, or a name read from the runs
    table = Table(title=escape_markup(f"{args.metric} by {args.by}; (x) relative to {p.baseline}"))
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


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
