"""Pivot tables over many runs: one row per machine, framework or compile mode.

Each cell holds the metric of that row's case and its ratio to the baseline
row in the same column, as the seed articles' comparison tables do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlbench.errors import UserError
from dlbench.results.metrics import metric, read
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
    """The device a result ran on, by name: the GPU's for CUDA cases, else the CPU's
    with its machine's (a CPU's number depends on the machine around it)."""
    name = device_model(run, result)
    if is_gpu_result(run, result):
        return name
    return f"{name} ({run.env.shown('hostname')})"


def device_model(run: Run, result: Result) -> str:
    """The model of the device a result ran on: the GPU's name for CUDA cases, else
    the CPU's; machines with the same model are peers (report.fleet_report)."""
    gpus = run.env.gpu_list
    if is_gpu_result(run, result):
        index = int(result.case.device.partition(":")[2] or 0)
        return gpus[min(index, len(gpus) - 1)].name
    return run.env.shown("cpu_model", "CPU")


def is_gpu_result(run: Run, result: Result) -> bool:
    return result.case.device.startswith("cuda") and bool(run.env.gpu_list)


# Axes that differ between machines by nature; a row names the machine instead.
MACHINE_AXES = ("device", "threads", "interop_threads")
ROW_AXES = {"framework": ("framework",), "compile": ("framework", "compile")}


def row_and_column(run: Run, result: Result, by: str) -> tuple[str, str]:
    """The row (machine, framework or framework [compile]) and column (the rest of the label)."""
    case = result.case
    if by == "machine":
        return hardware(run, result), case.label(omit=MACHINE_AXES)
    row_axes = ROW_AXES[by]
    # under --by framework a cell holds the framework's best compile mode (see pivot)
    column = case.label(omit=(*MACHINE_AXES, "framework", "compile"))
    return case.label(only=row_axes), column


def pivot(runs: Sequence[Run], by: str, metric_key: str, baseline: str | None) -> Pivot:
    if by not in BY:
        raise UserError(f"unknown --by {by!r}; allowed: {', '.join(BY)}")
    chosen_metric = metric(metric_key)
    # Where several results share a cell (a framework's compile modes under
    # --by framework, repeated runs), the cell shows the best of them.
    cells: dict[tuple[str, str], float] = {}
    for run in runs:
        for result in run.results:
            value = read(chosen_metric, result) if result.ok else None
            if value is not None:
                cell = row_and_column(run, result, by)
                cells[cell] = chosen_metric.better(cells[cell], value) if cell in cells else value
    rows = list(dict.fromkeys(r for r, _ in cells))
    columns = list(dict.fromkeys(c for _, c in cells))
    chosen = next((r for r in rows if baseline and baseline in r), None)
    if baseline and chosen is None:
        raise UserError(f"--baseline {baseline!r} matches no row; rows: {', '.join(rows)}")
    return Pivot(rows, columns, cells, chosen or (rows[0] if rows else None))
