"""Hardware ceilings (the roofline) and every result's efficiency against them.

`dlbench roofline` runs the `ceilings` suite: GEMM at each precision (the
most FLOP/s this machine achieves), `copy` (device memory bandwidth) and
`h2d` (host-to-device bandwidth). Its maxima are the ceilings. Any later run
on the same machine copies the newest ceilings into its env, and each of its
results is read with its achieved rate as a fraction of the matching
ceiling: GFLOP/s against GEMM at the result's precision on the same device,
GB/s against copy (or h2d for transfers). A measured ceiling, not a datasheet
number: the fraction says how much of what this machine can really do a case
gets.

The fraction is computed when a result is read (`efficiency_in_run`), from
the result's merged rates and the run's ceilings, and never stored. Results
written before kept it in their details (`details.stored_efficiency` since
run schema 3); that value is what their run showed, so it is read as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dlbench.results.records import Result, Run

CEILING_SUITE = "ceilings"
# workload -> what it is the ceiling of
COMPUTE_CEILING = "gemm"
ABOVE_CEILING = 1.05
BANDWIDTH_CEILINGS = {"copy": "memory", "h2d": "host-to-device"}


def _device(result: Result) -> str:
    return "cpu" if result.case.device == "cpu" else result.case.device


def ceiling_key(device: str, kind: str, precision: str | None = None) -> str:
    return f"{device}|{kind}|{precision}" if precision else f"{device}|{kind}"


def ceilings_from_results(results: Iterable[Result], run_id: str) -> dict[str, Any]:
    """{"source_run", "values": {key: rate}} from a run's ceiling cases (max per key)."""
    values: dict[str, float] = {}
    for result in results:
        if not result.ok:
            continue
        if result.case.workload == COMPUTE_CEILING and result.gflops:
            key = ceiling_key(_device(result), "gflops", result.case.precision)
            values[key] = max(values.get(key, 0.0), result.gflops)
        elif result.case.workload in BANDWIDTH_CEILINGS and result.gbps:
            key = ceiling_key(_device(result), BANDWIDTH_CEILINGS[result.case.workload])
            values[key] = max(values.get(key, 0.0), result.gbps)
    return {"source_run": run_id, "values": values}


def merge(base: dict[str, Any] | None, newer: dict[str, Any]) -> dict[str, Any]:
    """Ceilings measured in this run override the stored ones, key by key."""
    if not base:
        return newer
    return {
        "source_run": newer["source_run"] if newer["values"] else base.get("source_run"),
        "values": {**base.get("values", {}), **newer["values"]},
    }


def efficiency(result: Result, ceilings: dict[str, Any] | None) -> dict[str, Any] | None:
    """The result's rate as a fraction of the matching ceiling, or None."""
    if not ceilings or not result.ok:
        return None
    values = ceilings.get("values", {})
    device = _device(result)
    details = result.details
    bus_bytes = details.transfer_bytes_per_step
    if bus_bytes is not None and bus_bytes > 0 and result.throughput:
        # A timed host-to-device copy bounds the step: the bytes that crossed the
        # bus against the bus's ceiling (the kernel's own bytes would overstate it)
        steps_per_s = result.throughput / (result.case.batch_size or 1)
        achieved = bus_bytes * steps_per_s / 1e9
        ceiling = values.get(ceiling_key(device, "host-to-device"))
        unit, basis = "GB/s", "host-to-device bandwidth (bytes copied in the timed step)"
    elif result.primary_metric == "gbps" and result.gbps:
        kind = BANDWIDTH_CEILINGS.get(result.case.workload, "memory")
        if (details.transfer or "").startswith("inside"):
            kind = "host-to-device"  # recorded before the copied bytes were: the bus bounds it
        achieved, ceiling, unit = result.gbps, values.get(ceiling_key(device, kind)), "GB/s"
        basis = f"{kind} bandwidth"
    elif result.gflops:
        key = ceiling_key(device, "gflops", result.case.precision)
        achieved, ceiling, unit = result.gflops, values.get(key), "GFLOP/s"
        basis = f"gemm {result.case.precision}"
    else:
        return None
    if not ceiling:
        return None
    if result.case.nproc > 1 and device != "cpu":
        # DDP's rate is the sum over N GPUs, each with this ceiling; CPU ranks
        # share one machine and so one ceiling
        ceiling *= result.case.nproc
        basis += f" x {result.case.nproc} GPUs"
    found = {
        "fraction": achieved / ceiling,
        "ceiling": ceiling,
        "unit": unit,
        "basis": basis,
        "ceilings_run": ceilings.get("source_run"),
    }
    if achieved > ABOVE_CEILING * ceiling:
        # The ceilings are measured far beyond the caches; a small working set
        # that stays in cache can beat them. Said, not hidden or clipped.
        found["note"] = "above the measured ceiling: the working set is likely cache-resident"
    return found


def efficiency_in_run(result: Result, run: Run) -> dict[str, Any] | None:
    """The result's efficiency against its run's ceilings, or None. A result written
    before efficiency was computed on read carries the one its run showed (a --repeat
    result's from its last process, a roofline run's own against the ceilings measured
    so far): kept, so an old run shows the numbers it always did."""
    stored = result.details.stored_efficiency
    if stored is not None:
        return stored
    return efficiency(result, run.env.get("ceilings"))


def add_measured_ceilings(run: Run, result: Result) -> None:
    """A roofline run's env holds the ceilings it has measured so far (over those it
    copied), so its own results, and the ceilings table, are read against them."""
    if run.suite != CEILING_SUITE:
        return  # a gemm in another suite, at another size or thread count, is no ceiling
    own = ceilings_from_results([result], run.id)
    if own["values"]:
        run.env["ceilings"] = merge(run.env.get("ceilings"), own)
