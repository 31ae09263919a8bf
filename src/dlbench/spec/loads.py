"""A case's load: each loop kind's as one typed record, the groups of fields those
records are made of, and which kind of loop a case runs.

Several kinds share fields (the SLO bounds, the peak search, the served streams), so
each field is declared once, with its option and default, in a group here, and a
kind's record inherits the groups it has: code that reads a group (a report's peak
search, across kinds) narrows to it (spec.loop_kinds: `load_part`), and a kind's checks
and runner read the kind's own record (`case_load`). A case holds its load in one field
(spec.case.Case.load), the record of its kind, the kind being decided here from the
case's own fields and the registry (`kind_name`); its fields are written flat, as case
files, options and stored runs have always had them (spec.record_dict).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from dlbench.measure.load_profile import LATENCY_CLOCKS
from dlbench.measure.openai_api import APIS, COMPLETIONS
from dlbench.spec.case_parts import (
    DEFAULT_LATENCY_BOUND_MS,
    DEFAULT_LATENCY_PERCENTILE,
    DEFAULT_SLO_PERCENTILE,
    LAUNCH_DETAIL,
    LOADGEN_PERCENTILES_TEXT,
    MAX_LATENCY_BOUND_MS,
    MAX_RATE,
    MAX_STREAMS,
    MAX_TARGET_QPS,
    MAX_USERS,
    SUITE_AXIS,
    DdpLaunch,
    TimeToTrain,
    loadgen_percentile,
)
from dlbench.spec.cli_options import (
    cli,
    endpoint_url,
    integer_in,
    percentile_value,
    positive_at_most,
    positive_float,
    positive_int,
    resolved_path,
)
from dlbench.spec.digest import short_digest
from dlbench.spec.registry import (
    ENDPOINT_WORKLOAD,
    EPOCH_WORKLOADS,
    FRAMEWORKS,
    KIND_OPTIONS,
    LLM_WORKLOADS,
)

# --- the groups --------------------------------------------------------------------


@dataclass(frozen=True)
class QueryLoad:
    """MLPerf LoadGen's queries: `loadgen` drives the case with LoadGen instead of
    dlbench's step loop (always in the multi-stream and server scenarios), at a Poisson
    arrival rate (target_qps) where no search is asked."""

    loadgen: bool = field(
        default=False,
        metadata=SUITE_AXIS
        | cli(
            "--loadgen",
            switch=True,
            group="serving",
            help="drive single-stream and offline cases with LoadGen instead of dlbench's "
            "step loop (multi-stream and server always use it)",
        ),
    )
    target_qps: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--target-qps",
            parse=positive_at_most(MAX_TARGET_QPS),
            metavar="Q",
            group="serving",
            help="server: the Poisson arrival rate, queries per second",
        ),
    )


@dataclass(frozen=True)
class PeakSearch:
    """A load that can search for the highest load that holds its bounds (--find-peak)."""

    find_peak: bool = field(
        default=False,
        metadata=SUITE_AXIS
        | cli(
            "--find-peak",
            switch=True,
            group="serving",
            help="server: search for the highest rate whose latency percentile keeps the "
            "bound; --endpoint: the highest rate (or concurrency) whose SLOs hold",
        ),
    )


@dataclass(frozen=True)
class LatencyBound:
    """A server query's latency bound: its latency_percentile-th percentile at most
    latency_bound_ms (plan.server_load_checks fills the defaults in)."""

    latency_bound_ms: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--latency-bound-ms",
            parse=positive_at_most(MAX_LATENCY_BOUND_MS),
            metavar="L",
            group="serving",
            help="server: the latency bound in ms "
            f"(default {DEFAULT_LATENCY_BOUND_MS:g}, MLPerf's)",
        ),
    )
    latency_percentile: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--latency-percentile",
            parse=loadgen_percentile,
            metavar="P",
            group="serving",
            help="server: the percentile held to the bound "
            f"({LOADGEN_PERCENTILES_TEXT}; default {DEFAULT_LATENCY_PERCENTILE:g})",
        ),
    )


@dataclass(frozen=True)
class ServedStreams:
    """Queries (or sequences) a server serves at once (None: not given)."""

    streams: int | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--streams",
            parse=integer_in(1, MAX_STREAMS),
            group="serving",
            help="server: queries served at once, each with threads/streams threads "
            "(default: one single-threaded stream per CPU thread; 1 on a GPU)",
        ),
    )


@dataclass(frozen=True)
class ServerAddress:
    """A server someone runs: its `endpoint` (a launch detail: the same server at
    another address is the same case) and the model its requests name."""

    endpoint: str | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--endpoint",
            parse=endpoint_url,
            metavar="URL",
            group="endpoint",
            help="benchmark an OpenAI-compatible server at URL (http://host:port) through "
            "its streaming API, with the llm-requests workload",
        ),
    )
    served_model: str | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--served-model",
            metavar="NAME",
            group="endpoint",
            help="the model the requests name (default: the one the server lists)",
        ),
    )


@dataclass(frozen=True)
class LoadProfile:
    """The endpoint client's load profile (measure.load_profile) and the API it speaks."""

    api: str = field(
        default=COMPLETIONS,
        metadata=SUITE_AXIS
        | cli(
            "--api",
            vocabulary=APIS,
            group="endpoint",
            help="/v1/completions (completions, default) or /v1/chat/completions (chat)",
        ),
    )
    concurrency: int | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--concurrency",
            parse=integer_in(1, MAX_USERS),
            metavar="N",
            group="endpoint",
            help="N users, each sending its next request when its last has ended",
        ),
    )
    request_rate: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--request-rate",
            parse=positive_at_most(MAX_RATE),
            metavar="R",
            group="endpoint",
            help="requests sent at seeded random times, R per second on average (an open "
            "loop); neither this nor --concurrency: one request at a time",
        ),
    )
    burstiness: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--burstiness",
            parse=positive_float,
            metavar="B",
            group="endpoint",
            help="--request-rate's gaps: gamma of shape B (1: Poisson, default; below 1 burstier)",
        ),
    )


@dataclass(frozen=True)
class SloBounds:
    """Token latencies held to bounds at a percentile (--ttft-ms, --tpot-ms)."""

    ttft_ms: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--ttft-ms",
            parse=positive_float,
            metavar="MS",
            group="endpoint",
            help="SLO: time to first token at most MS at --slo-percentile",
        ),
    )
    tpot_ms: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--tpot-ms",
            parse=positive_float,
            metavar="MS",
            group="endpoint",
            help="SLO: time per output token after the first at most MS at --slo-percentile",
        ),
    )
    slo_percentile: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--slo-percentile",
            parse=percentile_value,
            metavar="P",
            group="endpoint",
            help=f"the percentile the SLO bounds hold at (default {DEFAULT_SLO_PERCENTILE:g}, "
            "MLPerf's)",
        ),
    )


@dataclass(frozen=True)
class ServedModelFiles:
    """What the client knows of a served model beside its answers: the tokenizer that
    sizes prompts and counts tokens, the config that sizes its roofline, and the
    client processes the load is spread over."""

    # the tokenizer that sizes prompts and counts output tokens where the server
    # reports no usage (its content digest is the identity)
    tokenizer: str | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--tokenizer",
            parse=resolved_path,
            metavar="PATH",
            group="endpoint",
            help="the served model's tokenizer.json (or its folder): prompts of exactly "
            "isl tokens, and output counted where the server sends no usage",
        ),
    )
    tokenizer_digest: str | None = None
    # the served model's config.json, whose shape sizes the roofline's work (results.
    # roofline_bound); not what is measured, so no part of the key
    model_config: str | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--model-config",
            parse=resolved_path,
            metavar="FILE",
            group="endpoint",
            help="the served model's config.json (or its folder), for the roofline: decode "
            "bytes and prefill FLOPs (default: the one beside --tokenizer)",
        ),
    )
    # client processes the load is spread over (worker.client_processes): the same
    # load, so no part of the key
    client_processes: int | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--client-processes",
            parse=positive_int,
            metavar="N",
            group="endpoint",
            help="spread the users or the arrival schedule over N client processes, each "
            "its own event loop (default 1; where one is client-bound)",
        ),
    )


@dataclass(frozen=True)
class LatencyClock:
    """Where an open loop's latencies count from (measure.load_profile)."""

    # where an open loop's TTFT and end-to-end latency count from (measure.load_profile)
    latency_clock: str | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--latency-clock",
            vocabulary=LATENCY_CLOCKS,
            group="endpoint",
            help="--request-rate's TTFT and end-to-end latency from each request's scheduled "
            "arrival (schedule, default, as LoadGen) or from its send (send)",
        ),
    )


# --- each kind's record ----------------------------------------------------------------
# A dataclass lays out the fields of its bases last base first (`__mro__` reversed); a
# case writes the keys of every record below once each, in Load's order, which is the
# order every stored run has them in (loadgen ... streams, then endpoint ... latency_clock).


@dataclass(frozen=True)
class LoadGenLoad(ServedStreams, LatencyBound, PeakSearch, QueryLoad):
    """The loadgen kind's: LoadGen's scenario around the step loop's prepared step, its
    latency bound held at a percentile LoadGen reports."""


@dataclass(frozen=True)
class ForeignServerLoad(
    LatencyClock, ServedModelFiles, SloBounds, LoadProfile, ServerAddress, PeakSearch
):
    """The endpoint kind's: a server someone runs, under the endpoint client's load."""


@dataclass(frozen=True)
class GenerationServerLoad(SloBounds, ServedStreams, PeakSearch, QueryLoad):
    """The generation-server kind's: a generation engine under LoadGen's server scenario,
    its token latencies held to the SLO bounds."""


@dataclass(frozen=True)
class ServedEngineLoad(LatencyClock, SloBounds, LoadProfile, PeakSearch, ServedStreams):
    """The served-engine kind's: an engine dlbench starts a server of (vLLM), under the
    endpoint client's load, serving `streams` sequences at once."""


# The endpoint client's load: a server someone runs, or one dlbench starts
ClientLoad = ForeignServerLoad | ServedEngineLoad
# What a case's `load` holds: its kind's record (None: a kind whose load has no fields
# of its own, the step loop's, a generation's, a ceiling's)
Load = (
    TimeToTrain
    | DdpLaunch
    | LoadGenLoad
    | ForeignServerLoad
    | GenerationServerLoad
    | ServedEngineLoad
)


# --- which kind of loop a case runs ------------------------------------------------------

# Scenarios only MLPerf LoadGen drives: dlbench's step loop has no arrival process.
LOADGEN_SCENARIOS = ("multi-stream", "server")
# Each kind whose load has fields of its own, by its name (spec.loop_kinds), and its record
KIND_LOADS: Mapping[str, type[Load]] = MappingProxyType(
    {
        "ddp": DdpLaunch,
        "time-to-train": TimeToTrain,
        "endpoint": ForeignServerLoad,
        "served-engine": ServedEngineLoad,
        "generation-server": GenerationServerLoad,
        "loadgen": LoadGenLoad,
    }
)


def kind_name(values: Mapping[str, object]) -> str:
    """The kind of loop a case runs (spec.loop_kinds names each), from its flat fields
    alone (its JSON, the names Case.of is given, or a case's own: Case.kind) and the
    registry: the first rule that holds. A framework the registry lacks (a stored run's)
    serves nothing; a flag its load gives (--loadgen, a torchrun launch) counts where it
    is true."""
    workload, scenario = values.get("workload"), values.get("scenario")
    info = FRAMEWORKS.get(str(values.get("framework")))
    options = values.get("options") or ()
    loadgen = values.get("loadgen") is True
    if values.get("ddp") is True:
        return "ddp"
    if workload in EPOCH_WORKLOADS:
        return "time-to-train"
    if workload == ENDPOINT_WORKLOAD:
        return "endpoint"
    if info is not None and info.serves_openai:
        return "served-engine"
    if workload in LLM_WORKLOADS:
        # only "server" selects the server: a generation's result holds the scenario its
        # batch implies (single-stream, offline), and still reads as a generation's
        return "generation-server" if scenario == "server" or loadgen else "generation"
    given = dict(options) if isinstance(options, Mapping | tuple | list) else {}
    for option, kind in KIND_OPTIONS.items():
        if option in given:
            return kind
    if loadgen or scenario in LOADGEN_SCENARIOS:
        return "loadgen"
    return "steps"


def chosen_load(values: Mapping[str, object]) -> type[Load] | None:
    """The record a case of these flat fields holds its load in: its kind's."""
    return KIND_LOADS.get(kind_name(values))


# --- its part of a case's label ----------------------------------------------------------


def load_label_parts(load: Load | None, scenario: str | None) -> list[tuple[str, str]]:
    """(axis, text) of each field of a case's load in its label (spec.case.Case.label):
    every field not at its usual value, in the order labels have always had them."""
    return [
        *_server_label_parts(load, scenario),
        *_llm_serving_label_parts(load),
        *_ddp_label_parts(load),
        *_time_to_train_label_parts(load),
    ]


def _server_label_parts(load: Load | None, scenario: str | None) -> list[tuple[str, str]]:
    parts: list[tuple[str, str]] = []
    if isinstance(load, QueryLoad):
        shown = load.loadgen and scenario not in LOADGEN_SCENARIOS
        rate = load.target_qps
        parts += [("loadgen", "loadgen" if shown else ""),
                  ("target_qps", f"qps={rate:g}" if rate is not None else "")]  # fmt: skip
    if isinstance(load, PeakSearch):
        parts.append(("find_peak", "find-peak" if load.find_peak else ""))
    if isinstance(load, LatencyBound):
        parts.append(("latency_bound_ms", _bound_label(load)))
    if isinstance(load, ServedStreams):
        streams = load.streams
        parts.append(("streams", f"streams={streams}" if streams is not None else ""))
    return parts


def _bound_label(load: LatencyBound) -> str:
    if load.latency_bound_ms is None:
        return ""
    percentile = load.latency_percentile or DEFAULT_LATENCY_PERCENTILE
    return f"p{percentile:g}<={load.latency_bound_ms:g}ms"


def _llm_serving_label_parts(load: Load | None) -> list[tuple[str, str]]:
    parts: list[tuple[str, str]] = []
    if isinstance(load, ServerAddress):
        model = load.served_model
        parts.append(("served_model", f"model={model}" if model else ""))
    if isinstance(load, LoadProfile):
        users, rate, burstiness = load.concurrency, load.request_rate, load.burstiness
        parts += [("api", "chat" if load.api != COMPLETIONS else ""),
                  ("concurrency", f"users={users}" if users else ""),
                  ("request_rate", f"rate={rate:g}/s" if rate else ""),
                  ("burstiness", f"burstiness={burstiness:g}" if burstiness else "")]  # fmt: skip
    if isinstance(load, LatencyClock):
        clock = load.latency_clock
        parts.append(("latency_clock", f"clock={clock}" if clock else ""))
    if isinstance(load, SloBounds):
        parts.append(("ttft_ms", _slo_label(load)))
    if isinstance(load, ServedModelFiles):
        digest = load.tokenizer_digest
        parts.append(("tokenizer_digest", f"tokenizer={short_digest(digest)}" if digest else ""))
    return parts


def _slo_label(load: SloBounds) -> str:
    named = (("ttft", load.ttft_ms), ("tpot", load.tpot_ms))
    bounds = [f"{name}<={value:g}ms" for name, value in named if value is not None]
    if not bounds:
        return ""
    percentile = load.slo_percentile or DEFAULT_SLO_PERCENTILE
    return f"p{percentile:g} " + ",".join(bounds)


def _ddp_label_parts(launch: Load | None) -> list[tuple[str, str]]:
    if not isinstance(launch, DdpLaunch):
        return []
    return [
        ("nproc", f"x{launch.nproc} procs" if launch.nproc > 1 else ""),
        ("ddp", "ddp" if launch.ddp else ""),
    ]


def _time_to_train_label_parts(part: Load | None) -> list[tuple[str, str]]:
    if not isinstance(part, TimeToTrain):
        return []
    target, data = part.target_accuracy, part.data_digest
    return [
        ("target_accuracy", f"target={target:g}" if target else ""),
        ("data_digest", f"data={short_digest(data)}" if data else ""),
    ]


class FieldsNotTaken(ValueError):
    """Fields of a load given to a case whose kind's record has no place for them, by
    their flat names, with their values (planning refuses them, plan.validate, where it
    refused any other kind's field, after the checks every case has)."""

    def __init__(self, kind: str, given: Mapping[str, object]) -> None:
        super().__init__(f"{', '.join(given)}: not taken by the {kind} loop")
        self.given = dict(given)
