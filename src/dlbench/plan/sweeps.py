"""Sweeps: several batch sizes, thread counts or token lengths of the same cases.

`--sweep batch=1,8,64,512` and `--sweep threads=1,all` on the command line,
`sweep: {batch: [1, 8], threads: [1, all]}` in a suite entry. "all" is the
CPUs available to dlbench. A sweep is a product axis like several -b values;
the latency-throughput charts (report.studies.sweeps) draw what it measured.
`isl` and `osl` sweep a text-generation workload's prompt and output lengths
(its parameters of those names); the LLM charts (report.studies.llm) draw them.
`concurrency` and `rate` sweep an endpoint's load (--endpoint): users, or
requests a second.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection

from dlbench.errors import UserError
from dlbench.spec.case import default_threads
from dlbench.spec.case_parts import MAX_BATCH, MAX_RATE, MAX_THREADS, MAX_USERS
from dlbench.spec.registry import ENDPOINT_FRAMEWORK
from dlbench.untyped import JSONObject, JSONValue

# The longest prompt or output a sweep may ask for (a workload's context is checked apart)
MAX_TOKENS = 1 << 20
# sweep axis -> the Case field it sets ("params": the workload parameter of its name),
# and the largest value allowed
SWEEP_AXES = {
    "batch": ("batch_size", MAX_BATCH),
    "threads": ("threads", MAX_THREADS),
    "isl": ("params", MAX_TOKENS),
    "osl": ("params", MAX_TOKENS),
    # an endpoint's load (--endpoint): users, or requests a second
    "concurrency": ("concurrency", MAX_USERS),
    "rate": ("request_rate", int(MAX_RATE)),
}
# The load axes: each value is a case of its own, for an endpoint's curves
LOAD_SWEEPS = ("concurrency", "rate")
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


def sweep_values(axis: str, values: JSONValue, where: str) -> tuple[int, ...]:
    """The checked values of one sweep axis ("all": the CPUs available, for threads)."""
    if axis not in SWEEP_AXES:
        raise UserError(f"{where}: unknown sweep axis {axis!r}; allowed: {', '.join(SWEEP_AXES)}")
    if not isinstance(values, list | tuple) or not values:
        raise UserError(f"{where}: an empty sweep of {axis}; give one or more values")
    limit = SWEEP_AXES[axis][1]
    checked = []
    for value in values:
        if axis == "threads" and value == ALL_CPUS:
            value = default_threads()
        number = _integer(value)
        if number is None or not 1 <= number <= limit:
            allowed = f"integers from 1 to {limit}" + (" or 'all'" if axis == "threads" else "")
            raise UserError(f"{where}: {axis} value {value!r}; expected {allowed}")
        checked.append(number)
    return tuple(dict.fromkeys(checked))  # in order, each once


def entry_sweep(entry: JSONObject, where: str) -> dict[str, tuple[int, ...]]:
    """A suite entry's `sweep:` mapping, checked."""
    sweep = entry.get("sweep")
    if sweep is None:
        return {}
    if not isinstance(sweep, dict):
        raise UserError(
            f"{where}.sweep: expected a mapping like {{batch: [1, 8], threads: [1, all]}}"
        )
    return {axis: sweep_values(axis, values, f"{where}.sweep") for axis, values in sweep.items()}


def param_variants(params: JSONObject, sweep: dict[str, tuple[int, ...]],
                   accepted: Collection[str], workload: str) -> list[JSONObject]:  # fmt: skip
    """`params` once per combination of the swept parameters (isl, osl); a workload
    without such a parameter is a UserError naming the workloads' own."""
    swept = [(axis, values) for axis, values in sweep.items() if axis in PARAM_SWEEPS]
    for axis, _ in swept:
        if axis not in accepted:
            names = ", ".join(sorted(accepted)) or "none"
            raise UserError(f"--sweep {axis}: workload {workload!r} has no parameter {axis} "
                            f"(its parameters: {names})")  # fmt: skip
    axes = [axis for axis, _ in swept]
    return [{**params, **dict(zip(axes, combination, strict=True))}
            for combination in itertools.product(*(values for _, values in swept))]  # fmt: skip


def load_variants(
    sweep: dict[str, tuple[int, ...]], framework: str
) -> list[dict[str, float | int]]:
    """The load fields of each case an endpoint sweep makes (one case, no field, where
    none is swept); a load sweep elsewhere is a UserError."""
    swept = [(axis, values) for axis, values in sweep.items() if axis in LOAD_SWEEPS]
    if not swept:
        return [{}]
    if framework != ENDPOINT_FRAMEWORK:
        raise UserError(f"--sweep {swept[0][0]} is an endpoint's load; give --endpoint URL")
    if len(swept) > 1:
        raise UserError("--sweep concurrency and --sweep rate are two load profiles; give one")
    axis, values = swept[0]
    field = SWEEP_AXES[axis][0]
    return [{field: float(v) if axis == "rate" else v} for v in values]


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None
