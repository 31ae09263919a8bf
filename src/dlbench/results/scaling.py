"""DDP scaling: an N-process result's throughput against N times the throughput of
the same case in one plain process of the same run, T_N / (N x T_1). T_N is the
group's rate as worker.ddp_rank records it: every rank's samples over the slowest
rank's measured wall time.

Computed when a result is read, from its run's results as they stand, so a
--repeat run compares the merged throughputs of both cases. Results written
before kept it in `details.ddp` (scaling_efficiency, baseline_throughput, or
scaling_note when the run had no 1-process result; `details.ddp.stored_scaling`
since run schema 3); those are what their run showed, so they are read as they are.
"""

from __future__ import annotations

from dlbench.results.records import Result, Run
from dlbench.untyped import JSONObject

NO_BASELINE = "no 1-process result of this case in the run"


def scaling_in_run(result: Result, run: Run) -> JSONObject | None:
    """{"scaling_efficiency", "baseline_throughput"} of a DDP result in its run, or
    {"scaling_note"} when the run has no 1-process result of the case; None for a
    result that is not DDP or has no throughput."""
    ddp = result.details.ddp
    if not result.case.is_ddp or ddp is None:
        return None
    if ddp.stored_scaling:
        return dict(ddp.stored_scaling)  # the caller's own copy of the read-only record's
    if not result.throughput:
        return None
    single = baseline(result, run)
    if single is None or not single.throughput:
        return {"scaling_note": NO_BASELINE}
    world = ddp.world_size or result.case.ranks
    return {
        "baseline_throughput": single.throughput,
        "scaling_efficiency": result.throughput / (world * single.throughput),
    }


def baseline(result: Result, run: Run) -> Result | None:
    """The run's measured 1-process (not DDP) result of the same case."""
    key = result.case.key_without("nproc", "ddp")
    return next(
        (
            r
            for r in run.results
            if not r.case.is_ddp
            and r.ok
            and r.throughput
            and r.case.key_without("nproc", "ddp") == key
        ),
        None,
    )
