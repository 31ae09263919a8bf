"""`dlbench fleet report`: a fleet's nodes side by side, and the outliers among peers.

The first seed article's table put machines side by side by it/s and could not tell
an overheating GPU (55 it/s) from a slower model. Here each node of a fleet run is
a column: its hardware, its ceilings (where its run had them), each case's
throughput with its GPU throttle flags, and, per case, whether the node is an
outlier against its peers, the nodes whose device has the same model.

The rule is Iglewicz and Hoaglin's modified z-score, which a few bad nodes cannot
drag along as they would a mean and standard deviation: among n >= 3 peers with
throughputs x, the median m and the median absolute deviation
MAD = median(|x - m|), a node's z = 0.6745 (x - m) / MAD, and |z| > 3.5 is an
outlier (0.6745 makes MAD estimate the standard deviation of normal data). With
fewer than three peers, or a MAD of 0 (at least half the peers measured the
same), the node is "not judged": there is no spread to judge it against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table

from dlbench.report.leaderboard import MACHINE_AXES, device_model
from dlbench.report.table import escape_markup, fmt
from dlbench.results.flags import THROTTLED
from dlbench.results.fleet_marks import FleetMark, fleet_mark
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result, Run

# Iglewicz and Hoaglin (1993): the modified z-score and its outlier bound
MAD_TO_SIGMA = 0.6745
OUTLIER_Z = 3.5
MIN_PEERS = 3
THROUGHPUT = METRICS["throughput"]
RULE = (
    f"outlier: |z| > {OUTLIER_Z:g}, z = {MAD_TO_SIGMA} (x - median) / MAD over the n nodes "
    f"with the same device model (Iglewicz-Hoaglin); not judged where n < {MIN_PEERS} "
    "or the MAD is 0"
)


@dataclass(frozen=True)
class Verdict:
    """One node's throughput on one case against its peers."""

    peers: int  # nodes of the same device model with a value, this one included
    median: float | None = None
    z: float | None = None
    not_judged: str | None = None  # why there is no z

    @property
    def outlier(self) -> bool:
        return self.z is not None and abs(self.z) > OUTLIER_Z


def judge(values: Sequence[float]) -> list[Verdict]:
    """Each value's verdict against all of them (one case, one device model)."""
    peers = len(values)
    if peers < MIN_PEERS:
        why = f"n={peers}"  # the caption (RULE) says n counts the nodes of the model
        return [Verdict(peers, not_judged=why) for _ in values]
    # here, not at the top: every command's start imports this module, and numpy and
    # scipy.stats take longer to import than most commands take to run
    import numpy as np
    from scipy.stats import median_abs_deviation

    median = float(np.median(values))
    mad = float(median_abs_deviation(values, scale=1.0))  # scale 1: the raw MAD
    if mad == 0 or not math.isfinite(mad):
        return [Verdict(peers, median, not_judged="MAD 0") for _ in values]
    return [Verdict(peers, median, MAD_TO_SIGMA * (value - median) / mad) for value in values]


@dataclass(frozen=True)
class Cell:
    """A node's result on one case, with its verdict (None: no throughput to judge)."""

    result: Result
    throughput: float | None
    model: str
    verdict: Verdict | None = None


@dataclass(frozen=True)
class NodeColumn:
    run: Run
    mark: FleetMark
    cells: dict[str, Cell]


@dataclass(frozen=True)
class Outlier:
    node: str
    case: str
    model: str
    throughput: float
    verdict: Verdict


def case_name(result: Result) -> str:
    """A case as it lines up across nodes: without what each machine resolves for
    itself (device index, thread counts), as `compare --by machine` does."""
    return result.case.label(omit=MACHINE_AXES)


def fleet_columns(runs: Sequence[Run]) -> list[NodeColumn]:
    """A column per node's run, each case's cell judged against its peers."""
    columns = []
    for run in runs:
        mark = fleet_mark(run)
        if mark is None:
            continue
        cells = {}
        names = [case_name(result) for result in run.results]
        for position, (name, result) in enumerate(zip(names, run.results, strict=True)):
            value = read(THROUGHPUT, result) if result.ok else None
            if names.count(name) > 1:
                # cases apart only in what each machine resolves (threads 1 and all):
                # every node runs the suite's cases in one order, so its place names it
                name = f"{name} (case {position + 1})"
            cells[name] = Cell(result, value, device_model(run, result))
        columns.append(NodeColumn(run, mark, cells))
    return _judged(columns)


def _judged(columns: list[NodeColumn]) -> list[NodeColumn]:
    """Every cell with a throughput gets its verdict among the cells of the same case
    and device model."""
    groups: dict[tuple[str, str], list[tuple[NodeColumn, str]]] = {}
    for column in columns:
        for name, cell in column.cells.items():
            if cell.throughput is not None:
                groups.setdefault((name, cell.model), []).append((column, name))
    for members in groups.values():
        values = [column.cells[name].throughput or 0.0 for column, name in members]
        for (column, name), verdict in zip(members, judge(values), strict=True):
            cell = column.cells[name]
            column.cells[name] = Cell(cell.result, cell.throughput, cell.model, verdict)
    return columns


def outliers(columns: Sequence[NodeColumn]) -> list[Outlier]:
    found = []
    for column in columns:
        for name, cell in column.cells.items():
            if cell.verdict is not None and cell.verdict.outlier and cell.throughput is not None:
                found.append(
                    Outlier(column.mark.node, name, cell.model, cell.throughput, cell.verdict)
                )
    return found


def fleet_table(fleet_id: str, columns: Sequence[NodeColumn]) -> Table:
    """Nodes as columns; hardware, status and ceilings first, then a row per case."""
    suites = sorted({column.run.suite for column in columns})
    table = Table(
        title=f"fleet {escape_markup(fleet_id)}: suite {escape_markup(', '.join(suites))}, "
        f"{len(columns)} node(s); {THROUGHPUT.unit} per case",
        title_justify="left",
        caption=RULE,
        caption_justify="left",
    )
    table.add_column("")
    for column in columns:
        table.add_column(escape_markup(column.mark.node), justify="right")
    table.add_row("hardware", *[escape_markup(_hardware(column.run)) for column in columns])
    table.add_row("status", *[_status(column) for column in columns])
    table.add_row("run", *[escape_markup(column.run.id) for column in columns])
    for key in _ceiling_keys(columns):
        table.add_row(f"ceiling {escape_markup(key)}", *[_ceiling(c.run, key) for c in columns])
    names = list(dict.fromkeys(name for column in columns for name in column.cells))
    for name in names:
        table.add_row(escape_markup(name), *[_cell(column.cells.get(name)) for column in columns])
    return table


def _hardware(run: Run) -> str:
    gpus = [gpu.name for gpu in run.env.gpu_list]
    cpu = run.env.shown("cpu_model")
    return " + ".join([cpu, *gpus])


def _status(column: NodeColumn) -> str:
    if column.mark.failure is not None:
        return f"[red]failed: {escape_markup(column.mark.failure)}[/red]"
    failures = column.run.failures
    if failures:
        return f"[yellow]{failures} of {len(column.run.results)} case(s) failed[/yellow]"
    return "ok"


def _ceiling_keys(columns: Sequence[NodeColumn]) -> list[str]:
    keys = {key for column in columns for key in _ceilings(column.run)}
    return sorted(keys)


def _ceilings(run: Run) -> dict[str, float]:
    ceilings = run.env.ceilings_or_none
    return {key: float(value) for key, value in ceilings.values.items()} if ceilings else {}


def _ceiling(run: Run, key: str) -> str:
    value = _ceilings(run).get(key)
    unit = "GFLOP/s" if "|gflops" in key else "GB/s"
    return f"{fmt(value)} {unit}" if value is not None else "-"


def _cell(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    if not cell.result.ok:
        return f"[red]{escape_markup(cell.result.status)}[/red]"
    lines = [fmt(cell.throughput)]
    lines += [escape_markup(flag) for flag in cell.result.flags if flag.startswith(THROTTLED)]
    verdict = cell.verdict
    if verdict is not None:
        if verdict.not_judged is not None:
            lines.append(f"[dim]not judged ({escape_markup(verdict.not_judged)})[/dim]")
        elif verdict.outlier:
            lines.append(f"[bold red]OUTLIER z={verdict.z:+.1f}[/bold red]")
        else:
            lines.append(f"z={verdict.z:+.1f}")
    return "\n".join(lines)


def outlier_lines(found: Sequence[Outlier]) -> list[str]:
    """A line per outlier: which node, on which case, against what."""
    return [
        f"outlier: node {o.node} on {o.case}: {fmt(o.throughput)} {THROUGHPUT.unit} against "
        f"a median of {fmt(o.verdict.median)} over {o.verdict.peers} {o.model} nodes "
        f"(z={o.verdict.z:+.1f})"
        for o in found
    ]
