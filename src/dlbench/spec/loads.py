"""Each kind of loop's load as one typed record: exactly the fields its runner and its
checks read, so that a kind's code reads no field of another kind's load.

A case keeps these fields in its parts (spec.case_parts), where case files, options and
stored runs have always had them; a kind's record is read from the case once its kind
is known (spec.loop_kinds: `LoopKind.load`, and `case_load`, `load_part`). Several kinds
share fields (the SLO bounds, the peak search, the served streams): each shared group
is a record of its own here, and a kind's record inherits the groups it has, so a field
is declared once and code that reads a group (a report's peak search, across kinds)
narrows to the group, not to every kind that has it.

No field here has a default: a record is only ever read from a case, whose parts hold
the defaults (spec.case_parts).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeakSearch:
    """A load that can search for the highest load that holds its bounds (--find-peak)."""

    find_peak: bool


@dataclass(frozen=True)
class ServedStreams:
    """Queries (or sequences) a server serves at once (--streams; None: not given)."""

    streams: int | None


@dataclass(frozen=True)
class SloBounds:
    """Token latencies held to bounds at a percentile (--ttft-ms, --tpot-ms)."""

    ttft_ms: float | None
    tpot_ms: float | None
    slo_percentile: float | None


@dataclass(frozen=True)
class QueryLoad(PeakSearch, ServedStreams):
    """MLPerf LoadGen's queries: driven by LoadGen, at a Poisson rate or searched."""

    loadgen: bool
    target_qps: float | None


@dataclass(frozen=True)
class LoadGenLoad(QueryLoad):
    """The loadgen kind's: LoadGen's scenario around the step loop's prepared step, its
    latency bound held at a percentile LoadGen reports."""

    latency_bound_ms: float | None
    latency_percentile: float | None


@dataclass(frozen=True)
class GenerationServerLoad(QueryLoad, SloBounds):
    """The generation-server kind's: a generation engine under LoadGen's server scenario,
    its token latencies held to the SLO bounds."""


@dataclass(frozen=True)
class ClientLoad(PeakSearch, SloBounds):
    """The endpoint client's load profile (measure.load_profile) and the API it speaks."""

    api: str
    concurrency: int | None
    request_rate: float | None
    burstiness: float | None
    latency_clock: str | None


@dataclass(frozen=True)
class ServedEngineLoad(ClientLoad, ServedStreams):
    """The served-engine kind's: an engine dlbench starts a server of (vLLM), under the
    client's load, serving `streams` sequences at once."""


@dataclass(frozen=True)
class ForeignServerLoad(ClientLoad):
    """The endpoint kind's: a server someone runs at `endpoint`, for `served_model`; the
    tokenizer and config that size its prompts and its roofline, and the client
    processes the load is spread over."""

    endpoint: str | None
    served_model: str | None
    tokenizer: str | None
    tokenizer_digest: str | None
    model_config: str | None
    client_processes: int | None
