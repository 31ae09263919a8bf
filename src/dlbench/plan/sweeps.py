"""Sweeps: several batch sizes, thread counts or token lengths of the same cases.

`--sweep batch=1,8,64,512` and `--sweep threads=1,all` on the command line,
`sweep: {batch: [1, 8], threads: [1, all]}` in a suite entry. "all" is the
CPUs available to dlbench. A sweep is a product axis like several -b values;
the latency-throughput charts (report.studies.sweeps) draw what it measured.
`isl` and `osl` sweep a text-generation workload's prompt and output lengths
(its parameters of those names); the LLM charts (report.studies.llm) draw them.
"""

from __future__ import annotations

import itertools
from typing import Any

from dlbench.errors import UserError
from dlbench.spec.case import MAX_BATCH, MAX_THREADS, available_cpus

# The longest prompt or output a sweep may ask for (a workload's context is checked apart)
MAX_TOKENS = 1 << 20
# sweep axis -> the Case field it sets ("params": the workload parameter of its name),
# and the largest value allowed
SWEEP_AXES = {
    "batch": ("batch_size", MAX_BATCH),
    "threads": ("threads", MAX_THREADS),
    "isl": ("params", MAX_TOKENS),
    "osl": ("params", MAX_TOKENS),
}
PARAM_SWEEPS = tuple(axis for axis, (field, _) in SWEEP_AXES.items() if field == "params")
ALL_CPUS = "all"

Sweep = tuple[tuple[str, tuple[int, ...]], ...]


def parse_sweep(text: str) -> tuple[str, tuple[int, ...]]:
    """AXIS=V1,V2,... from the command line, or a UserError naming what is allowed."""
    axis, sep, values = text.partition("=")
    if not sep:
        raise UserError(
            f"--sweep {text!r}: expected AXIS=V1,V2,... (axes: {', '.join(SWEEP_AXES)})"
        )
    items = [value.strip() for value in values.split(",") if value.strip()]
    return axis.strip(), sweep_values(axis.strip(), items, f"--sweep {text}")


def sweep_values(axis: str, values: Any, where: str) -> tuple[int, ...]:
    """The checked values of one sweep axis ("all": the CPUs available, for threads)."""
    if axis not in SWEEP_AXES:
        raise UserError(f"{where}: unknown sweep axis {axis!r}; allowed: {', '.join(SWEEP_AXES)}")
    if not isinstance(values, list | tuple) or not values:
        raise UserError(f"{where}: an empty sweep of {axis}; give one or more values")
    limit = SWEEP_AXES[axis][1]
    checked = []
    for value in values:
        if axis == "threads" and value == ALL_CPUS:
            value = available_cpus()
        number = _integer(value)
        if number is None or not 1 <= number <= limit:
            allowed = f"integers from 1 to {limit}" + (" or 'all'" if axis == "threads" else "")
            raise UserError(f"{where}: {axis} value {value!r}; expected {allowed}")
        checked.append(number)
    return tuple(dict.fromkeys(checked))  # in order, each once


def entry_sweep(entry: dict[str, Any], where: str) -> dict[str, tuple[int, ...]]:
    """A suite entry's `sweep:` mapping, checked."""
    sweep = entry.get("sweep")
    if sweep is None:
        return {}
    if not isinstance(sweep, dict):
        raise UserError(
            f"{where}.sweep: expected a mapping like {{batch: [1, 8], threads: [1, all]}}"
        )
    return {axis: sweep_values(axis, values, f"{where}.sweep") for axis, values in sweep.items()}


def param_variants(params: dict[str, Any], sweep: dict[str, tuple[int, ...]],
                   accepted: Any, workload: str) -> list[dict[str, Any]]:  # fmt: skip
    """`params` once per combination of the swept parameters (isl, osl); a workload
    without such a parameter is a UserError naming the workloads' own."""
    swept = [(axis, values) for axis, values in sweep.items() if axis in PARAM_SWEEPS]
    for axis, _ in swept:
        if axis not in accepted:
            names = ", ".join(sorted(accepted)) or "none"
            raise UserError(f"--sweep {axis}: workload {workload!r} has no parameter {axis} "
                            f"(its parameters: {names})")  # fmt: skip
    names = [axis for axis, _ in swept]
    return [{**params, **dict(zip(names, combination, strict=True))}
            for combination in itertools.product(*(values for _, values in swept))]  # fmt: skip


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None
