"""A LoadGen case's load (spec.loads.LoadGenLoad) and its scenario: inference only, LoadGen
installed, the server scenario's rate given (or searched for), its latency bound,
percentile and streams in range, with their defaults filled in; the server options
refused on any other scenario. A generation engine's server takes its checks from
plan.token_server_cases."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import NoReturn, TypeVar

from dlbench.errors import UserError
from dlbench.plan.endpoint_cases import option_value
from dlbench.plan.field_checks import (
    options_go,
    require_known,
)
from dlbench.plan.token_server_cases import validate_token_server
from dlbench.spec.case import SCENARIOS, Case
from dlbench.spec.case_parts import (
    DEFAULT_LATENCY_BOUND_MS,
    DEFAULT_LATENCY_PERCENTILE,
    MAX_STREAMS,
)
from dlbench.spec.cli_options import option_flag
from dlbench.spec.loads import LOADGEN_SCENARIOS, LoadGenLoad, PeakSearch, QueryLoad
from dlbench.spec.loop_kinds import case_load, load_part, loop_kind
from dlbench.spec.registry import ENDPOINT_FRAMEWORK, FrameworkInfo

T = TypeVar("T")

# The Case fields that belong to the server scenario, by the option that sets them
# (its flag, from the field's metadata).
SERVER_FIELDS = {
    name: option_flag(Case, name)
    for name in ("target_qps", "find_peak", "latency_bound_ms", "latency_percentile", "streams")
}


def refuse_server_options(given: Sequence[str], why: str = "") -> NoReturn:
    """Server options given where no server case takes them; `why` says where."""
    raise UserError(f"{options_go(given)} with --scenario server{why}")


def server_options_given(source: object, endpoint: bool = False) -> list[str]:
    """The server options a Case or a RunRequest sets, by their command-line names;
    for an endpoint's, without --find-peak (its own search, plan.endpoint_cases)."""
    return [
        flag
        for name, flag in SERVER_FIELDS.items()
        if option_value(source, name) not in (None, False)
        and not (endpoint and name == "find_peak")
    ]


def validate_scenario(case: Case) -> None:
    if case.scenario is None:
        return
    require_known("scenario", case.scenario, SCENARIOS)
    if case.scenario == "single-stream" and case.batch_size not in (None, 1):
        raise UserError(
            f"scenario single-stream sends one sample per request; batch size "
            f"{case.batch_size} belongs to the offline scenario"
        )


def validate_serving(case: Case, token_server: FrameworkInfo | None = None) -> Case:
    """LoadGen cases: inference only, LoadGen installed, the server's options
    complete and in range; returns the case with the server's defaults filled in.
    `token_server`: a generation workload's framework (plan.token_server_cases)."""
    loadgen = case.driven_by_loadgen or case.scenario in LOADGEN_SCENARIOS
    for name in ("loadgen", "find_peak"):
        if not isinstance(case.value_of(name), bool):
            raise UserError(f"invalid {name} {case.value_of(name)!r}; expected true or false")
    if token_server is not None:
        _require_loadgen()
        if case.scenario == "server":  # --loadgen without it is refused as such below
            _require_rate(case, "its TTFT and TPOT bounds")
        cpu_streams = case.threads if token_server.cpu_only else default_streams(case)
        most = token_server.max_streams or MAX_STREAMS
        return validate_token_server(case, token_server.continuous_batching, cpu_streams, most)
    given = server_options_given(case, endpoint=case.framework == ENDPOINT_FRAMEWORK)
    if case.scenario != "server" and given:
        refuse_server_options(given, f", not {case.scenario or 'the default'}")
    if not loadgen:
        return case
    if case.mode != "infer":
        raise UserError(
            f"LoadGen and the {case.scenario or 'serving'} scenario measure inference; "
            f"{case.workload} in mode {case.mode} is training"
        )
    if load_part(case, QueryLoad) is None:  # a kind before LoadGen's in the table runs it
        kind = loop_kind(case)
        named = f"--scenario {case.scenario}" if case.scenario in LOADGEN_SCENARIOS else "--loadgen"
        raise UserError(f"{named} runs a case under MLPerf LoadGen; {case.workload} on "
                        f"{case.framework} runs the {kind.name} loop "
                        f"({kind.measures})")  # fmt: skip
    _require_loadgen()
    if case.scenario != "server":
        return case.replaced(loadgen=True)
    return case.replaced(loadgen=True, **_server_settings(case))


def _server_settings(case: Case) -> dict[str, float | int]:
    if case.batch_size not in (None, 1):
        raise UserError(
            f"a server query is one sample; batch size {case.batch_size} belongs to the "
            "offline or multi-stream scenario"
        )
    _require_rate(case, "the latency bound")
    load = case_load(case, LoadGenLoad)
    bound = _first(load.latency_bound_ms, DEFAULT_LATENCY_BOUND_MS)
    # a given percentile is one LoadGen reports: planning held it to its option's reader
    percentile = _first(load.latency_percentile, DEFAULT_LATENCY_PERCENTILE)
    streams = load.streams if load.streams is not None else default_streams(case)
    return {"latency_bound_ms": float(bound), "latency_percentile": float(percentile),
            "streams": streams}  # fmt: skip


def _require_rate(case: Case, kept: str) -> None:
    """A server case's arrival rate: --target-qps in range, or --find-peak (the highest
    rate that keeps `kept`), one of the two."""
    rate, searched = case_load(case, QueryLoad).target_qps, case_load(case, PeakSearch).find_peak
    if rate is None and not searched:
        raise UserError(
            "scenario server needs --target-qps Q (queries per second) or --find-peak "
            f"(the highest rate that keeps {kept})"
        )
    if rate is not None and searched:
        raise UserError("--find-peak searches for the rate itself; drop --target-qps")


def default_streams(case: Case) -> int:
    """Server queries served at once, where none is given: one single-threaded
    stream per CPU thread on a CPU (a batch-1 query parallelises poorly, so
    concurrent queries use the cores better), one where a GPU does the work."""
    from dlbench.measure.devices import gpu_visible

    on_cpu = case.device == "cpu" or (case.device == "auto" and not gpu_visible())
    return case.threads if on_cpu else 1


def _require_loadgen() -> None:
    if importlib.util.find_spec("mlperf_loadgen") is None:
        raise UserError(
            "MLPerf LoadGen is not installed; install it with: pip install 'dlbench[serving]' "
            "(the mlcommons-loadgen package)"
        )


def _first(value: T | None, default: T) -> T:
    return default if value is None else value
