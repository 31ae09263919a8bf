"""Pivot tables over many runs: one row per machine, framework or compile mode.

Each cell holds the metric of that row's case and its ratio to the baseline
row in the same column, as the seed articles' comparison tables do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlbench.errors import UserError
from dlbench.report.compare import METRICS, SINGLE
from dlbench.report.table import params_label
from dlbench.results.records import Result, Run

BY = ("machine", "framework", "compile")


@dataclass(frozen=True)
class Pivot:
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], float]
    baseline: str | None

    def relative(self, row: str, column: str) -> float | None:
        base = self.cells.get((self.baseline, column)) if self.baseline else None
        value = self.cells.get((row, column))
        return value / base if base and value is not None else None


def hardware(run: Run, result: Result) -> str:
    """The device a result ran on, by name: the GPU's for CUDA cases, else the CPU's."""
    gpus = run.env.get("gpus") or []
    if result.device.startswith("cuda") and gpus:
        index = int(result.device.partition(":")[2] or 0)
        return str(gpus[min(index, len(gpus) - 1)].get("name", "GPU"))
    return f"{run.env.get('cpu_model', 'CPU')} ({run.env.get('hostname', '?')})"


def row_and_column(run: Run, result: Result, by: str) -> tuple[str, str]:
    params = params_label(result.params)
    case = f"{result.workload}{params} {result.mode} {result.scenario or ''} bs={result.batch_size}"
    if by == "machine":
        return hardware(run, result), f"{case} {result.framework}[{result.compile}]"
    if by == "framework":
        return result.framework, case  # its best compile mode (see pivot)
    return f"{result.framework} [{result.compile}]", case


def metric_value(result: Result, metric: str) -> float | None:
    if metric in SINGLE:
        return SINGLE[metric](result)
    if metric == "throughput":
        return result.throughput
    stats = result.latency_ms
    return None if stats is None else (stats.p99 if metric == "p99" else stats.median)


def pivot(runs: Sequence[Run], by: str, metric: str, baseline: str | None) -> Pivot:
    if by not in BY:
        raise UserError(f"unknown --by {by!r}; allowed: {', '.join(BY)}")
    if metric not in METRICS:
        raise UserError(f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}")
    # Where several results share a cell (a framework's compile modes under
    # --by framework, repeated runs), the cell shows the best of them.
    better = max if metric == "throughput" else min
    cells: dict[tuple[str, str], float] = {}
    for run in runs:
        for result in run.results:
            value = metric_value(result, metric) if result.ok else None
            if value is not None:
                cell = row_and_column(run, result, by)
                cells[cell] = better(cells[cell], value) if cell in cells else value
    rows = list(dict.fromkeys(r for r, _ in cells))
    columns = list(dict.fromkeys(c for _, c in cells))
    chosen = next((r for r in rows if baseline and baseline in r), None)
    if baseline and chosen is None:
        raise UserError(f"--baseline {baseline!r} matches no row; rows: {', '.join(rows)}")
    return Pivot(rows, columns, cells, chosen or (rows[0] if rows else None))
