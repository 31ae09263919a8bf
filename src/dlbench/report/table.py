"""A run as a terminal table, and numbers formatted for people."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dlbench.results.ceilings import efficiency_in_run
from dlbench.results.metrics import METRICS, energy_unmeasurable, read
from dlbench.results.records import STATUS_SKIPPED, Result, Run
from dlbench.results.repeats import headline_spread


def fmt(value: float | None, digits: int = 3) -> str:
    """Three significant digits, no scientific notation for everyday sizes."""
    if value is None or math.isnan(value):
        return "-"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 10**digits:
        return f"{value:,.0f}"
    decimals = max(0, digits - 1 - int(f"{magnitude:e}".split("e")[1]))
    return f"{value:.{decimals}f}"


# C0 and C1 control characters but tab and newline. Rich passes them to the terminal,
# and ESC begins its escape sequences: colours, cursor moves, clearing, the window title.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(text: str) -> str:
    """A string from a run or the user as the terminal should show it: each control
    character spelt out (ESC as \\x1b), so none recolours, moves or retitles anything."""
    return CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


def one_line(text: str) -> str:
    """A message that must stay one line (a user error): as plain(), and its
    newlines and tabs spelt out too, since they may come from the user's input."""
    return plain(text).replace("\n", "\\n").replace("\t", "\\t")


def escape_markup(text: str) -> str:
    """Strings from results are data: never rich markup, never terminal control."""
    return escape(plain(text))


# Axes the results table shows in columns of their own, left out of its case name.
TABLE_COLUMNS_AXES = ("batch_size", "device")


def case_name(result: Result) -> str:
    """The case's label in the results table (batch and device have their own columns)."""
    return result.case.label(omit=TABLE_COLUMNS_AXES)


def rate_column(result: Result, run: Run) -> str:
    """The workload's primary rate (GB/s for memory-bound ones, GFLOP/s otherwise),
    with the fraction of this machine's measured ceiling where the run has one."""
    efficiency = efficiency_in_run(result, run) or {}
    share = f" ({100 * efficiency['fraction']:.0f}%)" if "fraction" in efficiency else ""
    if result.primary_metric == "gbps" and result.gbps is not None:
        return f"{fmt(result.gbps)} GB/s{share}"
    if result.gflops is not None:
        return f"{fmt(result.gflops)} GFLOP/s{share}"
    return "-"


def flags(result: Result, noisy: str = "noisy", separator: str = ", ") -> str:
    """The result's flags as results.flags decided them (or, for a result written before
    flags were, read them when it was loaded), `noisy` spelt as the caller wants it."""
    return separator.join(noisy if mark == "noisy" else mark for mark in result.flags)


def iqr_percent(result: Result) -> str:
    """The spread that decides `noisy`: between the process medians under --repeat."""
    relative = headline_spread(result)
    return "-" if relative is None else f"{100.0 * relative:.1f}%"


# Shown between the metrics: the latency samples' spread, and the primary rate
# (GB/s or GFLOP/s, with the share of the machine's ceiling, read with the run).
DERIVED: dict[str, tuple[str, Callable[[Result, Run], str]]] = {
    "iqr": ("IQR/med", lambda result, _run: iqr_percent(result)),
    "rate": ("rate", rate_column),
}
# The numbers of a results table row: metric keys (results.metrics) or DERIVED.
TERMINAL_LAYOUT = (
    "latency",
    "p99",
    "iqr",
    "throughput",
    "rate",
    "energy",
    "cpu",
    "memory",
    "first_call",
)


def number_header(name: str) -> str:
    return DERIVED[name][0] if name in DERIVED else METRICS[name].column


def number_cell(name: str, result: Result, run: Run) -> str:
    """One number of a results row (of `run`), formatted for people."""
    if name in DERIVED:
        return DERIVED[name][1](result, run)
    return fmt(read(METRICS[name], result, run))


COLUMNS = ("case", "device", "batch", *map(number_header, TERMINAL_LAYOUT), "status")
NUMERIC = frozenset(map(number_header, TERMINAL_LAYOUT))


def run_table(run: Run) -> RenderableType:
    """The results table, with each failure's error listed under it in full."""
    title = f"run {run.id} - suite {run.suite} - {run.env.get('hostname', '?')}"
    table = Table(title=escape_markup(title))
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in NUMERIC else "left")
    for result in run.results:
        table.add_row(*result_row(result, run))
    failures = [
        Text(
            plain(f"{r.status}: {case_name(r)}: {r.error or 'no reason recorded'}"),
            style="yellow" if r.status == STATUS_SKIPPED else "red",
        )
        for r in run.results
        if not r.ok
    ]
    notes = [Text(plain(f"energy: unmeasurable ({why})"), style="dim") for why in no_energy(run)]
    return Group(table, *failures, *notes)


def no_energy(run: Run) -> list[str]:
    """The distinct reasons the run's measured cases have no energy reading."""
    reasons = (energy_unmeasurable(r) for r in run.results if r.ok)
    return list(dict.fromkeys(reason for reason in reasons if reason))


def result_row(result: Result, run: Run) -> list[str]:
    batch = result.case.batch_size if result.case.batch_size is not None else "default"
    identity = [escape_markup(str(c)) for c in (case_name(result), result.case.device, batch)]
    stats = result.latency_ms
    if result.status == STATUS_SKIPPED:
        return [*identity, *["-"] * len(TERMINAL_LAYOUT), "[yellow]skipped[/yellow]"]
    if not result.ok or stats is None:
        return [*identity, *["-"] * len(TERMINAL_LAYOUT), "[red]failed[/red]"]
    marks = flags(result)
    status = f"[yellow]{escape_markup(marks)}[/yellow]" if marks else "ok"
    return [*identity, *(number_cell(name, result, run) for name in TERMINAL_LAYOUT), status]
