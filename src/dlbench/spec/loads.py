"""Each loop kind's load as one typed record, and the groups of fields they are made of.

Several kinds share fields (the SLO bounds, the peak search, the served streams), so
each field is declared once, with its option and default, in a group here, and a
kind's record inherits the groups it has: code that reads a group (a report's peak
search, across kinds) narrows to it, and a kind's checks and runner read the kind's
own record (spec.loop_kinds: `LoopKind.load`, `case_load`, `load_part`).

A case keeps these fields in two parts (ServerLoad and LlmServing, below, made of the
same groups), written flat in the order case files, options and stored runs have
always had them (spec.record_dict: FLATTENED); a kind's record is read from them once
the case's kind is known. A dataclass lays out the fields of its bases last base first
(`__mro__` reversed), so the parts list their groups in reverse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


# --- the case's parts, in the order stored runs write their fields -------------------


@dataclass(frozen=True)
class ServerLoad(ServedStreams, LatencyBound, PeakSearch, QueryLoad):
    """The part holding LoadGen's load, and the search and streams other server kinds
    share: loadgen, target_qps, find_peak, latency_bound_ms, latency_percentile,
    streams."""


@dataclass(frozen=True)
class LlmServing(LatencyClock, ServedModelFiles, SloBounds, LoadProfile, ServerAddress):
    """The part holding a served LLM's load: endpoint, served_model, api, concurrency,
    request_rate, burstiness, ttft_ms, tpot_ms, slo_percentile, tokenizer,
    tokenizer_digest, model_config, client_processes, latency_clock."""


# --- each kind's record ----------------------------------------------------------------


@dataclass(frozen=True)
class LoadGenLoad(ServedStreams, LatencyBound, PeakSearch, QueryLoad):
    """The loadgen kind's: LoadGen's scenario around the step loop's prepared step, its
    latency bound held at a percentile LoadGen reports."""


@dataclass(frozen=True)
class GenerationServerLoad(SloBounds, ServedStreams, PeakSearch, QueryLoad):
    """The generation-server kind's: a generation engine under LoadGen's server scenario,
    its token latencies held to the SLO bounds."""


@dataclass(frozen=True)
class ClientLoad(LatencyClock, SloBounds, LoadProfile, PeakSearch):
    """The endpoint client's load: its profile, its SLO bounds and its search."""


@dataclass(frozen=True)
class ServedEngineLoad(ClientLoad, ServedStreams):
    """The served-engine kind's: an engine dlbench starts a server of (vLLM), under the
    client's load, serving `streams` sequences at once."""


@dataclass(frozen=True)
class ForeignServerLoad(ClientLoad, ServedModelFiles, ServerAddress):
    """The endpoint kind's: a server someone runs, under the client's load."""
