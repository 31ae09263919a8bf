"""A result's details: what a reader may need beside its numbers, as typed records.

Each capability that adds to a result has a record of its own (the output
check, placement, LoadGen, time-to-train, DDP, --repeat processes, int8
quantization, the parent's timeline), and the facts every case has (threads,
the frameworks loaded, the timed loop's length) are fields of Details. What
the instruments measure over the region (its wall-clock window and the rest of
measure.instruments.Measured's fields) Details takes from Measured, its base: a
newly measured quantity is a field there, and no line here.
What is truly free-form, a framework's own settings (ONNX Runtime's
providers, OpenVINO's hints, a user model's inputs and outputs, an export's
facts), goes in `extra`. Readers use the fields; none sniffs for keys.

Every record is immutable, not only frozen: a sequence is a tuple, and a mapping
(a field annotated `Mapping[str, X]`: latency percentiles by name, errors by kind,
a framework's own settings) is a read-only `types.MappingProxyType` copy, made when
the record is built (Immutable) or read (spec.record_dict), so no reader can
change what another reads. A mapping, not (name, value) pairs: its JSON object
keeps its keys in their order (pairs are read back sorted, for a case's params).
The JSON values inside a free-form mapping (`extra`'s lists) are kept as JSON has
them.

Run schema 2 kept all of this in one flat dict: `details_from_v2` turns
that dict into this form when an older file or store row is read.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field

from dlbench.measure.client_health import ClientHealth
from dlbench.measure.instruments import Measured
from dlbench.measure.power_regime import PowerRegimes
from dlbench.measure.server_counters import ServerCounters
from dlbench.measure.timeline import TimelinePoint, TimelineSummary
from dlbench.read_only import read_only
from dlbench.spec.record_dict import ABSENT, REST_FIELD, from_dict, to_dict, without_none
from dlbench.untyped import JSONObject, JSONValue


class Immutable:
    """The base of a record with sequence or mapping fields, which makes them immutable
    as it is built (`dataclasses.replace` too): a mapping (a field annotated `Mapping`)
    given as a dict is replaced by a read-only copy, a MappingProxyType (already
    read-only) kept; a sequence (a field annotated `tuple[...]`) given as a list, which
    only an untyped caller can give (a `**kwargs` of Any), becomes a tuple. None, and
    ABSENT (a run's fact it did not record: results.env), are kept as they are."""

    def __post_init__(self) -> None:
        kind = type(self)
        found = _SHAPED_FIELDS.get(kind)
        if found is None:  # once per record type
            found = _SHAPED_FIELDS[kind] = _shaped_fields(kind)
        mappings, sequences = found
        for name in mappings:
            value = getattr(self, name)
            if value is not None and value is not ABSENT:
                object.__setattr__(self, name, read_only(value))
        for name in sequences:
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))


def _shaped_fields(record: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of `record`'s Mapping fields, and of its tuple fields."""
    hints = typing.get_type_hints(record)
    origins = {name: typing.get_origin(without_none(hint)) for name, hint in hints.items()}
    return (
        tuple(name for name, origin in origins.items() if origin is Mapping),
        tuple(name for name, origin in origins.items() if origin is tuple),
    )


_SHAPED_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


@dataclass(frozen=True)
class Placement:
    """Where the framework really put the work, in its own words and as a device kind
    ("cpu", "cuda", "mps"); the worker's placement check reads this."""

    by: str
    reported: str
    kind: str


@dataclass(frozen=True)
class NumpyBlas(Immutable):
    """NumPy's own BLAS pool in the worker, held at one thread."""

    threads: int | None = None
    libraries: tuple[str, ...] = ()


@dataclass(frozen=True)
class OutputCheck(Immutable):
    """The output against the reference (fp32's tolerance), or an int8 model's
    outputs against fp32's: their signal-to-quantization-noise ratio, which decides,
    and their agreement (`agreement` and how it was measured) beside it."""

    note: str | None = None
    tolerance: float | None = None
    measure: str | None = None
    agreement: float | None = None
    top1_agreement: float | None = None
    samples: int | None = None
    # the agreement that fails the case: integer outputs now; every int8 case in
    # results written before SQNR decided
    floor: float | None = None
    max_abs_diff: float | None = None
    # dB; None where there was no noise to measure (outputs equal, or integers)
    sqnr_db: float | None = None
    min_sqnr_db: float | None = None
    # a user's model that is already quantized: the int8 operators its graph holds,
    # which put its check across frameworks under int8's rule
    quantized_ops: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Quantization(Immutable):
    """What an int8 model's quantizer did; the rest of its metadata (tool versions,
    its source, preprocessing) is the quantizer's own, kept as it wrote it."""

    method: str | None = None
    model_file: str | None = None
    calibration: Mapping[str, JSONValue] | None = None
    seconds: float | None = None
    cached: bool | None = None
    # the quantizer process's wall time, kept out of the case's setup_s
    build_wall_s: float | None = None
    folder: str | None = None
    tool: Mapping[str, JSONValue] = field(default_factory=dict, metadata=REST_FIELD)


@dataclass(frozen=True)
class LoadGenTry(Immutable):
    """One rate --find-peak tried."""

    target_qps: float | None = None
    samples_per_s: float | None = None
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    keeps_bound: bool | None = None
    verdict: str | None = None
    invalid_reason: str | None = None
    over_bound: int | None = None  # a server's queries over the bound
    log_dir: str | None = None
    # a generation server's (use_token_latencies): LoadGen's TTFT and TPOT percentiles
    ttft_percentiles_ms: Mapping[str, float] | None = None
    tpot_percentiles_ms: Mapping[str, float] | None = None


@dataclass(frozen=True)
class LoadGen(Immutable):
    """What MLPerf LoadGen concluded for a served case (worker.serving, worker.loadgen_log)."""

    scenario: str | None = None
    note: str | None = None
    min_duration_s: float | None = None
    verdict: str | None = None
    invalid_reason: str | None = None
    perf_constraints_met: bool | None = None
    early_stopping: str | None = None
    samples_per_s: float | None = None
    samples_per_s_source: str | None = None
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    per_query_latency_ms: Mapping[str, float] | None = None
    # as LoadGen's log has them (worker.loadgen_log.LoadGenOutcome)
    queries: int | None = None
    scheduled_samples_per_s: float | None = None  # a server's
    errors: tuple[str, ...] | None = None  # each entry LoadGen marked as an error
    version: str | None = None  # LoadGen's own ("6.0.17 @ d6147c7eb7")
    over_bound: int | None = None  # a server's queries over the bound
    log_dir: str | None = None
    target_qps: float | None = None
    bound_ms: float | None = None
    percentile: float | None = None
    streams: int | None = None
    tries: tuple[LoadGenTry, ...] | None = None  # --find-peak only
    peak_qps: float | None = None
    peak_confirmed: bool | None = None
    peak_note: str | None = None
    # A generation server (worker.token_serving): LoadGen's token latencies, TTFT from
    # the query's arrival to its first token and TPOT over the rest, as percentiles
    # (ms) with their bounds, its completed tokens/s, and how requests shared the engine.
    ttft_percentiles_ms: Mapping[str, float] | None = None
    tpot_percentiles_ms: Mapping[str, float] | None = None
    ttft_bound_ms: float | None = None
    tpot_bound_ms: float | None = None
    tokens_per_s: float | None = None
    batching: str | None = None


@dataclass(frozen=True)
class Epoch:
    """One epoch of a time-to-train case: training and evaluation timed apart."""

    epoch: int | None = None
    train_s: float | None = None
    eval_s: float | None = None
    samples_per_s: float | None = None
    loss: float | None = None
    test_loss: float | None = None
    accuracy: float | None = None
    start_epoch_s: float | None = None
    end_epoch_s: float | None = None


@dataclass(frozen=True)
class TrainingData:
    """The data a time-to-train case learned from: MNIST's files, or the synthetic set."""

    source: str | None = None
    synthetic: bool | None = None
    train_samples_used: int | None = None
    test_samples: int | None = None
    load_s: float | None = None


@dataclass(frozen=True)
class Training(Immutable):
    """A time-to-train case: its epochs and the times and accuracy they add up to."""

    epochs: tuple[Epoch, ...] = ()
    time_to_train_s: float | None = None
    # without epoch 1, which holds compilation (torch.compile, tf.function tracing)
    steady_samples_per_s: float | None = None
    wall_to_train_s: float | None = None
    time_to_target_s: float | None = None
    target_accuracy: float | None = None
    final_accuracy: float | None = None
    data: TrainingData | None = None


@dataclass(frozen=True)
class Pipelined(Immutable):
    """A throughput-mode result's timing (measure.pipeline): steps issued back to back
    in windows with one wait each; its samples are inter-completion times. What
    limits it: the host's time to issue a step against the step's interval, the
    share of that interval the device spent in kernels, and the synchronisations a
    step makes on its own."""

    marker: str = ""  # cuda-events, host-clock or window-mean (measure.pipeline)
    window_s: float = 0.0  # the windows' target length
    windows: int = 0
    steps: int = 0
    wall_s: float = 0.0  # the windows' wall time, which the headline divides by
    # the least, over the windows, of the intervals' sum over the window's wall time
    min_cover: float | None = None
    interval_ms: float | None = None  # median inter-completion time
    # median host time to issue one step onto an empty queue (warm-up)
    host_issue_ms: float | None = None
    # host time inside the step calls per step in the windows (back-pressure included)
    window_issue_ms: float | None = None
    # kernel time of one profiled step (after measuring) over the median interval
    device_busy: float | None = None
    # synchronisations one step makes on its own (torch's sync debug mode)
    hidden_syncs: int | None = None
    # the same steps each waited for (after measuring): what the latency mode gets
    synced_samples_per_s: float | None = None
    # why a figure above is missing (no profiler, a synchronous device)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ddp(Immutable):
    """A DistributedDataParallel case's ranks."""

    world_size: int | None = None
    backend: str | None = None
    iterations_per_rank: int | None = None
    per_rank_throughput: tuple[float | None, ...] = ()
    per_rank_median_ms: tuple[float | None, ...] = ()
    per_rank_device: tuple[str, ...] = ()
    # each rank's measured loop; the group's rate divides by the longest (worker.ddp_rank)
    per_rank_wall_s: tuple[float, ...] = ()
    # Scaling as results written before it was computed on read kept it (results.scaling)
    stored_scaling: Mapping[str, JSONValue] | None = None


@dataclass(frozen=True)
class TokenCheck:
    """An engine's greedy tokens against the torch reference's, for the same prompts.

    A divergence where the reference's top two logits are within the precision's
    tolerance is a near tie (rounding may pick either); at a clear margin it fails."""

    compared: int = 0  # tokens compared: batch x osl
    agreeing: int = 0  # positions where the tokens are equal
    first_divergence: int | None = None  # output position (from 0); None: all agree
    margin_there: float | None = None  # the reference's top-1 minus top-2 logit there
    near_tie_bound: float | None = None  # a margin at most this is a near tie
    verdict: str | None = None  # "identical", "near tie", "diverged", or why unchecked
    # where the reference was made: the shared checkpoint's on the CPU, or the engine's
    # own weights on its device (torch building its model from the seed on a GPU)
    reference: str | None = None
    # whether the engine's repeated generations gave the same tokens; a GPU's bf16
    # kernels need not be run-to-run exact, so each is held to the reference alone
    generations_agree: bool | None = None


# What a generation's token times are (details.extra["token_clock"], where the engine
# says): transformers' generate stamps the host's clock as its streamer receives each
# step's tokens (a streaming client's moment); torch's device loop keeps the tokens on
# the GPU and stamps each step's end there by a CUDA event, or on a CPU the host's
# clock after each step
STREAMER_CLOCK = "host clock as generate's streamer receives each step's tokens"
DEVICE_CLOCK = "CUDA event at each step's end"
HOST_STEP_CLOCK = "host clock after each step"
# Appended to details.compile_cache where Inductor's precompiled headers were built
# while the case compiled (worker.compile_cache): the flag compile-built-headers reads it
HEADERS_BUILT = "; Inductor's precompiled headers built while it compiled (once per user)"


@dataclass(frozen=True)
class Generation:
    """A text-generation case: TTFT, TPOT and token rates over its timed generations,
    as the field defines them (docs/guides/llm.md), and its tokens' check."""

    isl: int = 0  # prompt tokens per sequence
    osl: int = 0  # output tokens per sequence
    generations: int = 0  # timed generations
    # time to first token: request start to the first output token on the host
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    # time per output token after the first: (end-to-end - TTFT) / (osl - 1)
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    # inter-token latency: every gap between consecutive output tokens
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p90_ms: float | None = None
    e2e_p99_ms: float | None = None
    # median generation's rates, every sequence of the batch counted
    prefill_tokens_per_s: float | None = None  # batch x isl / TTFT
    decode_tokens_per_s: float | None = None  # batch x (osl - 1) / (e2e - TTFT)
    output_tokens_per_s: float | None = None  # batch x osl / e2e
    # the KV cache of isl + osl positions at the engine's cache precision
    kv_cache_mb: float | None = None
    kv_cache_dtype: str | None = None
    # the bytes one decode step must read: the weights at their stored precision (of the
    # embedding table only the batch's rows) and the KV cache at the decode steps' mean
    # context (workloads.decoder.decode_step_bytes); results.decode_bound reads it
    decode_bytes_per_step: float | None = None
    # the rest of the roofline's work (workloads.decoder, results.roofline_bound): one
    # decode step's FLOPs, and one prefill's least bytes and FLOPs
    decode_flops_per_step: float | None = None
    prefill_bytes: float | None = None
    prefill_flops: float | None = None
    # what they count where it is not the case's: a server's sequences a step (its mean
    # of running requests, else 1) and its weights' precision (its config's dtype)
    work_batch: int | None = None
    work_precision: str | None = None
    # the model's shape they come from (the workload, a config.json), or why there is none
    work_source: str | None = None
    work_note: str | None = None
    # a GPU's kernel time over one generation's decode (torch's profiler): under
    # flags.DEVICE_BUSY_FLOOR the device waited for the host between steps
    decode_device_busy: float | None = None
    # the most a GPU's allocator held while generating (weights, KV cache, activations);
    # None on a CPU, where the result's peak RSS holds them
    device_peak_mb: float | None = None
    energy_per_output_token_j: float | None = None
    # converting the shared checkpoint to the engine's format (cached, timed apart)
    converter: str | None = None
    convert_s: float | None = None
    converted_now: bool | None = None  # by this case (else found in the cache)
    tokens: TokenCheck | None = None


@dataclass(frozen=True)
class LoadStep:
    """One load --find-peak tried on a server: the rate or concurrency, and whether
    its SLOs held."""

    load: float
    holds: bool
    requests_per_s: float | None = None
    goodput_per_s: float | None = None
    ttft_ms: float | None = None  # at the SLO's percentile
    tpot_ms: float | None = None
    errors: int = 0
    saturated: str | None = None


@dataclass(frozen=True)
class EndpointLoad(Immutable):
    """An OpenAI-compatible server under load (worker.endpoint_run): what was sent,
    what came back, and the SLOs (docs/guides/llm-serving.md). Its token latencies
    are the result's Generation record."""

    url: str = ""
    served_model: str = ""
    api: str = ""
    profile: str = ""  # measure.load_profile's description
    conversations: int = 0
    requests: int = 0  # every turn sent
    ok: int = 0
    # error kind (measure.openai_stream.ERROR_KINDS: connection, timeout, http, stream,
    # malformed, client) -> requests
    errors: Mapping[str, int] = field(default_factory=dict)
    first_errors: tuple[str, ...] = ()  # a few, as the client kept them
    # answered with fewer tokens than asked (the server stopped early or cut them off):
    # their rates are of less work
    short_answers: int = 0
    duration_s: float | None = None
    requests_per_s: float | None = None  # answered whole, over the run's duration
    output_tokens_per_s: float | None = None  # their output tokens, over the duration
    prompt_tokens_mean: float | None = None
    output_tokens_mean: float | None = None
    # token ids, server usage, max_tokens, tokenizer or streamed chunks (the least exact
    # any answer needed)
    tokens_counted_by: str | None = None
    # the request field that asked for token ids (None: the server answered none)
    token_ids_field: str | None = None
    # the request fields that fixed each answer's length (measure.openai_api.LENGTH_FIELDS);
    # empty in a run from before they were kept
    length_fields: tuple[str, ...] = ()
    # the run's random salt, drawn into each prompt's start (None: --param unsalted=1)
    salt: str | None = None
    send_lag_p99_ms: float | None = None  # an open loop's lateness against its schedule
    # where TTFT and end-to-end latency count from (measure.load_profile): "schedule",
    # each request's scheduled arrival (an open loop), or "send" (a closed loop, or
    # --latency-clock send); None: a run from before it was kept, timed from the send
    timed_from: str | None = None
    # how the client itself kept up (measure.client_health): its event loop's lag,
    # its CPU, the chunks it took in, over its --client-processes
    client: ClientHealth | None = None
    saturated: str | None = None  # why an open loop stopped sending early
    cancelled: int = 0  # conversations in flight when it did
    # the SLOs: bounds at a percentile; goodput counts the requests within both bounds
    slo_percentile: float | None = None
    ttft_bound_ms: float | None = None
    tpot_bound_ms: float | None = None
    slo_met_share: float | None = None
    goodput_per_s: float | None = None
    slo_holds: bool | None = None  # both percentiles within bounds, no error, not saturated
    dataset_file: str | None = None  # the requests sent, beside the run
    dataset_digest: str | None = None
    server_header: str | None = None
    # --find-peak: every load tried, and the highest whose SLOs held (confirmed)
    peak_axis: str | None = None  # rate or concurrency
    peak: float | None = None
    peak_confirmed: bool | None = None
    peak_note: str | None = None
    tries: tuple[LoadStep, ...] | None = None
    # the server's own counters over the same window (its /metrics), or why none
    server: ServerCounters | None = None


@dataclass(frozen=True)
class Limit:
    """What limits a generation or serving case (results.limits decides it when the case
    ends, with its run's ceilings): the verdict, the one figure that shows it (in words,
    and its number), and the phase the roofline judged."""

    verdict: str  # results.limits.VERDICTS, or "unknown"
    figure: str
    value: float | None = None
    phase: str | None = None  # decode or prefill, where the roofline decided


@dataclass(frozen=True)
class ProcessSummary(Immutable):
    """What a --repeat result keeps of one process (results.repeats): its bookkeeping
    and samples, and in `values` each metric that has a process_key in the metrics
    table, under that key (so a new metric needs no field here)."""

    status: str | None = None
    error: str | None = None
    started_at: str | None = None
    mean_ms: float | None = None
    n: int = 0
    flags: tuple[str, ...] = ()
    disturbed: bool = False
    samples_ms: tuple[float, ...] = ()
    used: bool | None = None  # made the headline (set when merged)
    values: Mapping[str, JSONValue] = field(default_factory=dict, metadata=REST_FIELD)


@dataclass(frozen=True)
class ProcessSpread:
    """How far a --repeat result's processes disagree: IQR over median of their medians."""

    median_ms_relative_iqr: float
    processes: int


@dataclass(frozen=True)
class Processes(Immutable):
    """A result merged from several --repeat processes: each one's summary, and their spread."""

    summaries: tuple[ProcessSummary, ...] = ()
    spread: ProcessSpread | None = None


@dataclass(frozen=True)
class Timeline(Immutable):
    """The parent's resource timeline of the case (launch.runner): its points, as
    seconds since `origin_epoch_s`, their summary over the measured region, the
    GPU's throttle verdict, why there are no GPU readings where there are none,
    and the CPUs the worker could run on (indices into a point's `cpu_cores`; None
    where not recorded: all of them)."""

    points: tuple[TimelinePoint, ...] = ()
    origin_epoch_s: float | None = None
    summary: TimelineSummary | None = None
    throttle: str | None = None
    gpu_telemetry: str | None = None
    cpu_set: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Details(Measured, Immutable):
    """Everything a result holds beside its numbers; each part None where it does not apply.

    The fields of its base, Measured, are the instruments' record of the measured
    region: they come first in its JSON, beside these."""

    threads: Mapping[str, JSONValue] | None = None  # each framework reports its own pools
    frameworks_in_process: tuple[str, ...] | None = None
    numpy_blas: NumpyBlas | None = None
    # worker.compile_cache's word: cold or warm, and HEADERS_BUILT where Inductor's
    # precompiled headers were built while the case compiled
    compile_cache: str | None = None
    placement: Placement | None = None
    # the timed loop's length (its wall-clock bounds are Measured.measured_wall)
    loop_wall_s: float | None = None
    first_step_ms: float | None = None
    final_loss: float | None = None
    # an int8 case's CPU int8 dot-product units ([]: none, so expect little gain)
    int8_dot_units: tuple[str, ...] | None = None
    # the host-to-device copy: outside or inside the timed step, and its bytes when inside
    transfer: str | None = None
    transfer_bytes_per_step: float | None = None
    check: OutputCheck | None = None
    quantization: Quantization | None = None
    loadgen: LoadGen | None = None
    training: Training | None = None
    # latency (each step waited for) or throughput (pipelined windows: measure.pipeline)
    timing_mode: str | None = None
    pipelined: Pipelined | None = None
    # a ceiling case (option ceiling): its burst and sustained rates, clocks and power
    power_regimes: PowerRegimes | None = None
    generation: Generation | None = None
    endpoint: EndpointLoad | None = None
    # what limits a generation or serving case (results.limits)
    limit: Limit | None = None
    ddp: Ddp | None = None
    processes: Processes | None = None
    timeline: Timeline | None = None
    # efficiency as results written before it was computed on read kept it (results.ceilings)
    stored_efficiency: Mapping[str, JSONValue] | None = None
    # a framework's own settings and facts: providers, hints, a user model's inputs...
    extra: Mapping[str, JSONValue] = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: JSONValue, where: str | None = None) -> Details:
        return from_dict(cls, data, where)


# Schema-2 keys (one flat dict) that became fields of Details as they were
V2_FIELDS = (
    "threads", "frameworks_in_process", "numpy_blas", "compile_cache", "placement",
    "loop_wall_s", "measured_wall", "first_step_ms", "final_loss", "int8_dot_units",
    "transfer", "transfer_bytes_per_step", "energy", "check", "quantization", "loadgen",
)  # fmt: skip
V2_TRAINING = (
    "epochs", "time_to_train_s", "steady_samples_per_s", "wall_to_train_s",
    "time_to_target_s", "target_accuracy", "final_accuracy", "data",
)  # fmt: skip
V2_TIMELINE = {
    "timeline": "points",
    "timeline_origin_epoch_s": "origin_epoch_s",
    "timeline_summary": "summary",
    "throttle": "throttle",
    "gpu_telemetry": "gpu_telemetry",
}
# What a DDP result kept in details.ddp before scaling was computed on read
V2_SCALING = ("scaling_efficiency", "baseline_throughput", "scaling_note")


def details_from_v2(old: JSONValue) -> JSONObject:
    """A schema-2 result's flat details dict in the typed form's JSON; what no record
    names goes to `extra`. (A details that was not an object was read as empty.)"""
    flat = dict(old) if isinstance(old, dict) else {}
    new: JSONObject = {k: flat.pop(k) for k in V2_FIELDS if k in flat}
    training = {k: flat.pop(k) for k in V2_TRAINING if k in flat}
    if training:
        new["training"] = training
    timeline = {V2_TIMELINE[k]: flat.pop(k) for k in list(V2_TIMELINE) if k in flat}
    if timeline:
        new["timeline"] = timeline
    if isinstance(flat.get("ddp"), dict):
        ddp = dict(flat.pop("ddp"))
        stored = {k: ddp.pop(k) for k in V2_SCALING if k in ddp}
        new["ddp"] = {**ddp, **({"stored_scaling": stored} if stored else {})}
    if "processes" in flat or "process_spread" in flat:
        new["processes"] = {
            "summaries": flat.pop("processes", []),
            "spread": flat.pop("process_spread", None),
        }
    if "efficiency" in flat:
        new["stored_efficiency"] = flat.pop("efficiency")
    new["extra"] = flat
    return new
