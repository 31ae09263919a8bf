"""The kinds of loop a case runs, in one table: which one a case runs, what one of its
results measures, and where its runner and its checks are.

A case's kind follows from the case and the registry alone (its workload's kind of
loop, its framework's entry, its scenario): the first entry of LOOP_KINDS whose
`selects` holds. A result's case selects the kind its planned case ran, though the
worker records there the scenario its batch implies where none was given
(`recorded_scenario`; tests/test_loop_kinds.py), so a stored result plans again as it
ran (`dlbench rerun`). The worker runs
the kind's runner (worker.steps.execute), and planning runs the kind's checks after
the ones every case has (plan.validate.validate_case). Both are named by module and
function, not imported: planning must not import worker code, and the worker no
planning code (the import contracts in pyproject.toml); tests/test_loop_kinds.py holds
every name to a function of the right shape. A new loop kind is an entry here, its
runner's module and its checks.

Each kind's load is one typed record (`load`: the fields of the case's parts beyond
the ones every case has; the epoch and DDP kinds' are their parts, spec.case_parts, and
the four serving kinds', which share fields, are spec.loads'), and a kind that runs a
user's model file takes its part too (`user_model`). Planning refuses any other part's field
given a value, in one place, naming the kinds that take it (plan.validate); the kind's
checks then judge the values of its own, and its checks and runner read them as its
record (`case_load`), never as another kind's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TypeVar, cast

from dlbench.spec.case import LOADGEN_SCENARIOS, Case
from dlbench.spec.case_parts import DdpLaunch, TimeToTrain, UserModel
from dlbench.spec.loads import (
    ForeignServerLoad,
    GenerationServerLoad,
    LoadGenLoad,
    PeakSearch,
    ServedEngineLoad,
)
from dlbench.spec.registry import (
    ENDPOINT_WORKLOAD,
    EPOCH_WORKLOADS,
    FRAMEWORKS,
    LLM_WORKLOADS,
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
# The option of `dlbench roofline`'s GEMM and copy cases (plan/builtin_suites/ceilings.yaml)
CEILING_OPTION = "ceiling"
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
    # (case, its framework's entry; None for a name the registry lacks: a stored run's
    # case is read whatever its framework) -> whether it is this kind's
    selects: Callable[[Case, FrameworkInfo | None], bool]
    runner: str
    checks: str
    # the record its load is made of (None: a load of no fields of its own)
    load: type | None
    how: str
    # the process the runner runs in: one spawned worker, or each rank torchrun starts
    launcher: str = SPAWNED
    # whether it runs a user's model file (--model): its part's fields are taken too
    user_model: bool = False
    # the framework option (--option KEY=VALUE) that selects the kind, where one does:
    # planning refuses it on a case another kind runs
    option: str | None = None
    # what the kind's load is made of, where a refusal of another kind's field should
    # say it (the options a user reaches for first are LoadGen's)
    load_how: str | None = None
    # whether its results keep the scenario the case was given, not the one its batch
    # implies: time-to-train serves no queries, and a server's load (an endpoint's, an
    # engine dlbench serves) has the case's own fields for its profile
    keeps_scenario: bool = False

    @functools.cached_property
    def takes(self) -> frozenset[str]:
        """The fields of the case's parts its cases may give: its load's, its model's."""
        load = _names(self.load) if self.load is not None else frozenset()
        return load | (_USER_MODEL_FIELDS if self.user_model else frozenset())

    def load_of(self, case: Case) -> object | None:
        """`case`'s load as this kind's record, read from its parts (None: no record)."""
        if self.load is None:
            return None
        return self.load(**{f.name: case.value_of(f.name) for f in fields(self.load)})

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
        lambda case, info: case.is_ddp,
        "dlbench.worker.ddp_rank:run_ddp_steps",
        LOAD_CHECKS,
        DdpLaunch,
        "--nproc N (DistributedDataParallel, launched by torchrun)",
        launcher=TORCHRUN,
    ),
    LoopKind(
        "time-to-train",
        "epochs of training, each timed, until the target accuracy or the last epoch",
        lambda case, info: case.workload in EPOCH_WORKLOADS,
        "dlbench.worker.epochs:run_epochs",
        "dlbench.plan.validate:checked_time_to_train",
        TimeToTrain,
        "a time-to-train workload (mnist-train)",
        keeps_scenario=True,
    ),
    LoopKind(
        "endpoint",
        "an OpenAI-compatible server someone runs, under dlbench's client's load",
        lambda case, info: case.workload == ENDPOINT_WORKLOAD,
        "dlbench.worker.endpoint_run:run_endpoint_case",
        LOAD_CHECKS,
        ForeignServerLoad,
        "--endpoint URL (an OpenAI-compatible server)",
        keeps_scenario=True,
    ),
    LoopKind(
        "served-engine",
        "an engine's own server, started for the case, under the endpoint client's load",
        lambda case, info: info is not None and info.serves_openai,
        "dlbench.worker.served_engine:run_served_engine",
        "dlbench.plan.served_engine_cases:validate_served_engine",
        ServedEngineLoad,
        f"an engine dlbench serves ({frameworks_having('serves_openai')})",
        load_how=CLIENT_LOAD_HOW,
        keeps_scenario=True,
    ),
    LoopKind(
        "generation-server",
        "a generation engine under LoadGen's server scenario, with token latencies",
        # only "server" selects it: a generation's result holds the scenario its batch
        # implies (single-stream, offline), and still reads as the generation loop's
        lambda case, info: (
            case.workload in LLM_WORKLOADS and (case.scenario == "server" or case.driven_by_loadgen)
        ),
        "dlbench.worker.token_serving:run_token_serving",
        "dlbench.plan.validate:checked_generation_server",
        GenerationServerLoad,
        "--scenario server on a generation workload",
        load_how="--target-qps Q or --find-peak, its tokens held to --ttft-ms and --tpot-ms "
        "at --slo-percentile (not a whole query's --latency-bound-ms)",
    ),
    LoopKind(
        "generation",
        "whole greedy generations, timed token by token, their tokens checked",
        lambda case, info: case.workload in LLM_WORKLOADS,
        "dlbench.worker.generation:run_generation",
        "dlbench.plan.validate:checked_generation",
        None,
        "a generation workload",
    ),
    LoopKind(
        "ceiling",
        "a kernel in windows: a burst figure and a sustained one (dlbench roofline)",
        lambda case, info: CEILING_OPTION in dict(case.options),
        "dlbench.worker.ceiling_windows:run_ceiling",
        "dlbench.plan.validate:checked_ceiling",
        None,
        "dlbench roofline",
        option=CEILING_OPTION,
    ),
    LoopKind(
        "loadgen",
        "MLPerf LoadGen's scenario around the prepared step: its queries, its verdict",
        # as planning reads it (plan.server_load_checks), which then sets loadgen
        lambda case, info: case.driven_by_loadgen or case.scenario in LOADGEN_SCENARIOS,
        "dlbench.worker.serving:run_loadgen",
        LOAD_CHECKS,
        LoadGenLoad,
        "MLPerf LoadGen (--scenario server or multi-stream, or --loadgen)",
        user_model=True,
    ),
    LoopKind(
        "steps",
        "timed steps until --min-time and --min-iters, waited for or pipelined",
        lambda case, info: True,
        "dlbench.worker.steps:run_steps",
        LOAD_CHECKS,
        None,
        "a model's timed steps (the default loop)",
        user_model=True,
    ),
)


def loop_kind(case: Case) -> LoopKind:
    """The kind of loop `case` runs (the last entry, the step loop, takes any case)."""
    info = FRAMEWORKS.get(case.framework)
    return next(kind for kind in LOOP_KINDS if kind.selects(case, info))


def case_load(case: Case, record: type[L]) -> L:
    """`case`'s load as `record`: its kind's record, or a group of fields it is made of
    (spec.loads), for a kind's own checks and runner; TypeError where it is not one (a
    case of another kind: a bug, planning refuses such a case)."""
    load = load_part(case, record)
    if load is None:
        kind = loop_kind(case)
        raise TypeError(f"a {kind.name} case's load is no {record.__name__}")
    return load


def load_part(case: Case, record: type[L]) -> L | None:
    """`case`'s load as `record` where its kind's load is one, else None: for code that
    reads any kind's case (a report's peak search, a backend's served streams)."""
    load = loop_kind(case).load_of(case)
    return load if isinstance(load, record) else None


def searches_peak(case: Case) -> bool:
    """Whether `case` searches for its highest load that holds (--find-peak), whatever
    its kind of server."""
    search = load_part(case, PeakSearch)
    return search is not None and search.find_peak
