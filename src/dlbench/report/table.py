"""A run as a terminal table, and numbers formatted for people."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dlbench.results.ceilings import efficiency_in_run
from dlbench.results.flags import meaning
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


def readable(value: object) -> str:
    """A run's env or settings value as people read it, not as Python writes it: a
    mapping (a dict, or a record's read-only one) as "key: value" lines, a list or
    tuple comma-separated, None and an empty one as "none", booleans as yes and no,
    numbers as fmt() writes them."""
    if value is None or (isinstance(value, Mapping | list | tuple) and not value):
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return fmt(value)
    if isinstance(value, Mapping):
        return "\n".join(f"{key}: {readable(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(readable(item) for item in value)
    return str(value)


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
# The numbers of a results table row: metric keys (results.metrics) or DERIVED. A
# terminal shows the first three; --wide (and piped output, which keeps every column)
# shows them all.
TERMINAL_LAYOUT = ("latency", "throughput", "rate")
WIDE_LAYOUT = (
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
# Dropped first where a terminal is too narrow for the default columns.
DROPPABLE = ("rate", "device")


def number_header(name: str) -> str:
    return DERIVED[name][0] if name in DERIVED else METRICS[name].column


def number_cell(name: str, result: Result, run: Run) -> str:
    """One number of a results row (of `run`), formatted for people."""
    if name in DERIVED:
        return DERIVED[name][1](result, run)
    return fmt(read(METRICS[name], result, run))


COLUMNS = ("case", "device", "batch", *map(number_header, WIDE_LAYOUT), "status")
NUMERIC = frozenset(map(number_header, WIDE_LAYOUT))
# a rich table's border and padding: one border a column and one more, a space each side
BORDER, PADDING = 1, 2
# The columns that wrap, between words: the case's label on its parts, the flags
WRAPPED = ("case", "status")


def run_table(run: Run, width: int | None = None, wide: bool = False) -> RenderableType:
    """The results table, with each failure's error listed under it in full.

    `width`: the terminal's columns. The table then holds the default columns (all
    with `wide`), drops those that hold nothing in this run, and where it is still
    too wide drops the rate, then a device column every case shares (named in the
    title), so that no number, header or flag is cut; the case's label wraps on its
    own parts. None (output to a file or a pipe): every column, a row per case."""
    layout = WIDE_LAYOUT if wide or width is None else TERMINAL_LAYOUT
    every = ["case", "device", "batch", *map(number_header, layout), "status"]
    rows = [dict(zip(every, result_row(r, run, layout), strict=True)) for r in run.results]
    names = [n for n in every if n in ("case", "status") or _holds_something(rows, n)]
    title = f"run {run.id} - suite {run.suite} - {run.env.shown('hostname')}"
    if width is not None:
        names, title = _fitted(names, rows, width, title)
    wrapped = _wrapped_widths(names, rows, width) if width is not None else {}  # (least, most)
    table = Table(title=escape_markup(title))
    for name in names:
        table.add_column(
            name,
            justify="right" if name in NUMERIC else "left",
            no_wrap=name not in WRAPPED,
            overflow="fold",
            min_width=wrapped[name][0] if name in wrapped else None,  # words whole
            max_width=wrapped[name][1] if name in wrapped else None,
        )
    for cells in rows:
        table.add_row(*(cells[name] for name in names))
    hidden = _hidden(run, names) if width is not None else []
    return Group(table, *_notes(run, hidden, wide))


def _hidden(run: Run, shown: list[str]) -> list[str]:
    """The columns --wide would add that hold something in this run."""
    cells = {name: [number_cell(name, r, run) for r in run.results if r.ok] for name in WIDE_LAYOUT}
    return [
        number_header(name)
        for name, column in cells.items()
        if number_header(name) not in shown and any(cell != "-" for cell in column)
    ]


def _holds_something(rows: list[dict[str, str]], name: str) -> bool:
    return any(cells[name] not in ("-", "") for cells in rows)


def _fitted(
    names: list[str], rows: list[dict[str, str]], width: int, title: str
) -> tuple[list[str], str]:
    """The columns that fit `width` whole, and the title (naming a dropped device)."""
    names = list(names)
    for droppable in DROPPABLE:
        if _needed_width(names, rows) <= width:
            break
        if droppable not in names:
            continue
        if droppable == "device":
            devices = {cells["device"] for cells in rows}
            if len(devices) != 1:
                continue
            title += f" - device {devices.pop()}"
        names.remove(droppable)
    return names, title


def _needed_width(names: list[str], rows: list[dict[str, str]]) -> int:
    """The least width the table takes with each column unbroken, the case's label and
    the flags wrapped at their spaces."""
    return BORDER + sum(_least_width(name, rows) + PADDING + BORDER for name in names)


def _wrapped_widths(
    names: list[str], rows: list[dict[str, str]], width: int
) -> dict[str, tuple[int, int]]:
    """The least and most widths of the columns that wrap (the case's label, the flags)
    in a table of `width`: each at least its longest word and at most its widest line,
    the widest cut first to fit. Decided here, not by rich: where the two reached one
    width its collapse shrank every column evenly, and a flag such as
    compile-built-headers was broken mid-word at 100 columns."""
    slack = width - _needed_width(names, rows)
    if slack < 0:  # narrower than its words, even with every droppable column gone (or
        return {}  # --wide's columns kept): rich shrinks them all and folds words, as before
    shown = [name for name in WRAPPED if name in names]
    least = {name: _least_width(name, rows) for name in shown}
    widths = {name: max(least[name], _widest_line(name, rows)) for name in shown}
    excess = sum(widths.values()) - sum(least.values()) - slack
    while excess > 0:  # ends: at every least width the excess is -slack
        above_least = [name for name in shown if widths[name] > least[name]]
        widths[max(above_least, key=widths.__getitem__)] -= 1
        excess -= 1
    return {name: (least[name], widths[name]) for name in shown}


def _widest_line(name: str, rows: list[dict[str, str]]) -> int:
    lines = [line for cells in rows for line in Text.from_markup(cells[name]).plain.split("\n")]
    return max(map(len, [name, *lines]))


def _least_width(name: str, rows: list[dict[str, str]]) -> int:
    """A column's least width: its longest word where it wraps (the case's label, the
    flags), else its widest cell or header word."""
    cells = [Text.from_markup(cells[name]).plain for cells in rows]
    if name in WRAPPED:
        words = [word for cell in [name, *cells] for word in cell.split()]
        return max(map(len, words), default=1)
    return max(len(name), *(len(cell) for cell in cells))  # a header on one line, as shown


def _notes(run: Run, hidden: list[str], wide: bool = False) -> list[RenderableType]:
    """Under the table: each failure's error in full, each flag shown and what it
    means, where throughput and the median disagree, energy not measured, and the
    columns --wide adds (under --wide, those the terminal had no room for)."""
    failures = [
        Text(
            plain(f"{r.status}: {case_name(r)}: {r.error or 'no reason recorded'}"),
            style="yellow" if r.status == STATUS_SKIPPED else "red",
        )
        for r in run.results
        if not r.ok
    ]
    legend = [
        Text(plain(f"{mark}: {meaning(mark)}"), style="dim")
        for mark in dict.fromkeys(mark for r in run.results if r.ok for mark in r.flags)
    ]
    uneven = [case_name(r) for r in run.results if r.ok and uneven_steps(r)]
    spread = [Text(plain(UNEVEN_NOTE + "; ".join(uneven)), style="dim")] if uneven else []
    energy = [Text(plain(f"energy: unmeasurable ({why})"), style="dim") for why in no_energy(run)]
    # --wide given already: a wider terminal or a pipe (every column) shows the rest
    how = f"dlbench show {run.id} --wide" + (" | less -S" if wide else "")
    more = (
        [Text(f"more columns ({', '.join(hidden)}): {how}", style="dim")]
        if hidden and any(r.ok for r in run.results)
        else []
    )
    return [*failures, *legend, *spread, *energy, *more]


# samples/s counts every step; the median is the middle one: a tenth apart, say why
UNEVEN_SHARE = 0.1
UNEVEN_NOTE = (
    "samples/s counts every step (batch over their mean, or over the windows' time) and "
    "median ms is the middle step; they disagree by over 10%, the steps' times uneven, in: "
)


def uneven_steps(result: Result) -> bool:
    """Whether the rate implied by the median step and the reported rate disagree by
    more than UNEVEN_SHARE (a few slow steps, or a throughput-mode overlap)."""
    stats, rate, batch = result.latency_ms, result.throughput, result.case.batch_size
    if stats is None or not rate or not batch or stats.median <= 0:
        return False
    from_median = batch / (stats.median / 1000.0)
    return abs(from_median / rate - 1.0) > UNEVEN_SHARE


def no_energy(run: Run) -> list[str]:
    """The distinct reasons the run's measured cases have no energy reading."""
    reasons = (energy_unmeasurable(r) for r in run.results if r.ok)
    return list(dict.fromkeys(reason for reason in reasons if reason))


def result_row(result: Result, run: Run, layout: tuple[str, ...] = WIDE_LAYOUT) -> list[str]:
    batch = result.case.batch_size if result.case.batch_size is not None else "default"
    identity = [escape_markup(str(c)) for c in (case_name(result), result.case.device, batch)]
    stats = result.latency_ms
    if result.status == STATUS_SKIPPED:
        return [*identity, *["-"] * len(layout), "[yellow]skipped[/yellow]"]
    if not result.ok or stats is None:
        return [*identity, *["-"] * len(layout), "[red]failed[/red]"]
    marks = flags(result)
    status = f"[yellow]{escape_markup(marks)}[/yellow]" if marks else "ok"
    return [*identity, *(number_cell(name, result, run) for name in layout), status]
