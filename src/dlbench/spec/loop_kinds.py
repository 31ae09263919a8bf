"""The kinds of loop a case runs, in one table: what one of its results measures, where
its runner and its checks are, and the record its load is.

Which kind a case runs follows from the case and the registry alone (spec.loads.
kind_name, `Case.kind`), and the case holds its load as that kind's record (`Case.load`,
spec.loads), so a stored result's case is read into the kind its planned case ran,
though the worker records there the scenario its batch implies where none was given
(`recorded_scenario`; tests/test_loop_kinds.py), and plans again as it ran (`dlbench
rerun`). The worker runs the kind's runner (worker.steps.execute), and planning runs the
kind's checks after the ones every case has (plan.validate.validate_case). Both are named
by module and function, not imported: planning must not import worker code, and the
worker no planning code (the import contracts in pyproject.toml); tests/test_loop_kinds.py
holds every name to a function of the right shape. A new loop kind is an entry here, its
rule in spec.loads.kind_name (and its record, where its load has fields of its own), its
runner's module and its checks.

A kind that runs a user's model file takes that part's fields too (`user_model`). A
case holds no load field its kind's record lacks (Case.of raises spec.loads.
FieldsNotTaken): planning makes the case without it (plan.validate.made_case) and
refuses it, as it refuses a user model's field on a kind that runs none, after the
checks every case has, naming the kinds that take it. A kind's checks and
runner read its load as its record (`case_load`), and code that reads any kind's a
group of its fields (`load_part`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TypeVar, cast

from dlbench.spec.case import Case
from dlbench.spec.case_parts import UserModel
from dlbench.spec.loads import KIND_LOADS, Load, PeakSearch
from dlbench.spec.registry import (
    KIND_OPTIONS,
    FrameworkInfo,
    frameworks_having,
    imported_target,
)

# Where a kind's runner runs (launch.runner starts it): one spawned worker process, or
# each of the ranks torchrun starts (worker.ddp_rank)
SPAWNED = "spawned"
TORCHRUN = "torchrun"
# (case, its framework's entry) -> the case checked, its defaults filled in
Checks = Callable[[Case, FrameworkInfo], Case]
# The kernels timed in windows under it: their work runs on the device (h2d's copy
# waits for the host each call)
WINDOWED_WORKLOADS = ("gemm", "copy", "add")


L = TypeVar("L")


def _names(*records: type) -> frozenset[str]:
    return frozenset(f.name for record in records for f in fields(record))


# The user model's fields, by the flat names case files and options give them
_USER_MODEL_FIELDS = _names(UserModel)
# How a user gives the endpoint client's load profile, for the refusals that name it
CLIENT_LOAD_HOW = (
    "--concurrency N or --request-rate R, with --find-peak and the SLOs (--ttft-ms, --tpot-ms)"
)


@dataclass(frozen=True)
class LoopKind:
    """One kind of loop: `runner` and `checks` are "module:function" names; `load`, the
    record its load is read as; `how`, how a case is made one, for refusals."""

    name: str
    measures: str
    runner: str
    checks: str
    how: str
    # the process the runner runs in: one spawned worker, or each rank torchrun starts
    launcher: str = SPAWNED
    # whether it runs a user's model file (--model): its part's fields are taken too
    user_model: bool = False
    # what the kind's load is made of, where a refusal of another kind's field should
    # say it (the options a user reaches for first are LoadGen's)
    load_how: str | None = None
    # whether its results keep the scenario the case was given, not the one its batch
    # implies: time-to-train serves no queries, and a server's load (an endpoint's, an
    # engine dlbench serves) has the case's own fields for its profile
    keeps_scenario: bool = False

    @property
    def option(self) -> str | None:
        """The framework option (--option KEY=VALUE) that selects the kind, where one does
        (spec.registry.KIND_OPTIONS): planning refuses it on a case another kind runs."""
        return next((key for key, kind in KIND_OPTIONS.items() if kind == self.name), None)

    @property
    def load(self) -> type[Load] | None:
        """The record its load is (spec.loads; None: a load of no fields of its own)."""
        return KIND_LOADS.get(self.name)

    @functools.cached_property
    def takes(self) -> frozenset[str]:
        """The fields of the case's parts its cases may give: its load's, its model's."""
        load = _names(self.load) if self.load is not None else frozenset()
        return load | (_USER_MODEL_FIELDS if self.user_model else frozenset())

    def recorded_scenario(self, case: Case, batch: int) -> str | None:
        """The scenario a result of `case` at `batch` records: the one given, else, where
        the kind does not keep the case's own, the one the batch implies."""
        return case.scenario if self.keeps_scenario else case.effective_scenario(batch)

    def runner_function(self) -> Callable[..., object]:
        """The runner: (backend, job, settings, process set-up) -> the case's Result, in
        the worker (worker.steps.Runner names that type: this layer is below the backends
        and the records)."""
        return cast("Callable[..., object]", imported_target(self.runner))

    def checks_function(self) -> Checks:
        return cast(Checks, imported_target(self.checks))


LOAD_CHECKS = "dlbench.plan.validate:checked_load"
LOOP_KINDS = (
    LoopKind(
        "ddp",
        "training steps under DistributedDataParallel, one process per rank; the group's rate",
        "dlbench.worker.ddp_rank:run_ddp_steps",
        LOAD_CHECKS,
        "--nproc N (DistributedDataParallel, launched by torchrun)",
        launcher=TORCHRUN,
    ),
    LoopKind(
        "time-to-train",
        "epochs of training, each timed, until the target accuracy or the last epoch",
        "dlbench.worker.epochs:run_epochs",
        "dlbench.plan.validate:checked_time_to_train",
        "a time-to-train workload (mnist-train)",
        keeps_scenario=True,
    ),
    LoopKind(
        "endpoint",
        "an OpenAI-compatible server someone runs, under dlbench's client's load",
        "dlbench.worker.endpoint_run:run_endpoint_case",
        LOAD_CHECKS,
        "--endpoint URL (an OpenAI-compatible server)",
        keeps_scenario=True,
    ),
    LoopKind(
        "served-engine",
        "an engine's own server, started for the case, under the endpoint client's load",
        "dlbench.worker.served_engine:run_served_engine",
        "dlbench.plan.served_engine_cases:validate_served_engine",
        f"an engine dlbench serves ({frameworks_having('serves_openai')})",
        load_how=CLIENT_LOAD_HOW,
        keeps_scenario=True,
    ),
    LoopKind(
        "generation-server",
        "a generation engine under LoadGen's server scenario, with token latencies",
        "dlbench.worker.token_serving:run_token_serving",
        "dlbench.plan.validate:checked_generation_server",
        "--scenario server on a generation workload",
        load_how="--target-qps Q or --find-peak, its tokens held to --ttft-ms and --tpot-ms "
        "at --slo-percentile (not a whole query's --latency-bound-ms)",
    ),
    LoopKind(
        "generation",
        "whole greedy generations, timed token by token, their tokens checked",
        "dlbench.worker.generation:run_generation",
        "dlbench.plan.validate:checked_generation",
        "a generation workload",
    ),
    LoopKind(
        "ceiling",
        "a kernel in windows: a burst figure and a sustained one (dlbench roofline)",
        "dlbench.worker.ceiling_windows:run_ceiling",
        "dlbench.plan.validate:checked_ceiling",
        "dlbench roofline",
    ),
    LoopKind(
        "loadgen",
        "MLPerf LoadGen's scenario around the prepared step: its queries, its verdict",
        "dlbench.worker.serving:run_loadgen",
        LOAD_CHECKS,
        "MLPerf LoadGen (--scenario server or multi-stream, or --loadgen)",
        user_model=True,
    ),
    LoopKind(
        "steps",
        "timed steps until --min-time and --min-iters, waited for or pipelined",
        "dlbench.worker.steps:run_steps",
        LOAD_CHECKS,
        "a model's timed steps (the default loop)",
        user_model=True,
    ),
)


KINDS_BY_NAME = {kind.name: kind for kind in LOOP_KINDS}


def loop_kind(case: Case) -> LoopKind:
    """The kind of loop `case` runs (Case.kind names it)."""
    return KINDS_BY_NAME[case.kind]


def case_load(case: Case, record: type[L]) -> L:
    """`case`'s load as `record`: its kind's record, or a group of fields it is made of
    (spec.loads), for a kind's own checks and runner; TypeError where it is not one (a
    case of another kind: a bug, planning refuses such a case)."""
    load = case.load
    if not isinstance(load, record):
        raise TypeError(f"a {case.kind} case's load is no {record.__name__}")
    return load


def load_part(case: Case, record: type[L]) -> L | None:
    """`case`'s load as `record` where its kind's load is one, else None: for code that
    reads any kind's case (a report's peak search, a backend's served streams)."""
    return case.load if isinstance(case.load, record) else None


def searches_peak(case: Case) -> bool:
    """Whether `case` searches for its highest load that holds (--find-peak), whatever
    its kind of server."""
    search = load_part(case, PeakSearch)
    return search is not None and search.find_peak
