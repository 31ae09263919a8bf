"""What is measured (Case) and how (Settings): frozen records.

Validation (plan.validate) happens at the edge, against the registry and the
workloads; these records import nothing above them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection
from dataclasses import Field, dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar

from dlbench.measure.load_profile import LATENCY_CLOCKS
from dlbench.measure.openai_api import APIS, COMPLETIONS
from dlbench.spec import JSONObject, JSONValue, record_dict
from dlbench.spec.case_parts import (
    LAUNCH_DETAIL,
    RECORDED_AXIS,
    SUITE_AXIS,
    DdpLaunch,
    TimeToTrain,
    UserModel,
)
from dlbench.spec.cli_options import (
    cli,
    endpoint_url,
    integer,
    non_negative_float,
    number_type,
    option_pair,
    param_pair,
    percentile_value,
    positive_float,
    positive_int,
    resolved_path,
    run_label,
)
from dlbench.spec.registry import FRAMEWORKS, PRECISIONS, WORKLOADS

MODES = ("infer", "train")
# MLPerf Inference's scenarios: one request at a time (latency), a query of N
# samples once the previous one is done (multi-stream), queries arriving at
# random (Poisson) times at a target rate (server), large batches (offline).
SCENARIOS = ("single-stream", "multi-stream", "server", "offline")
# Scenarios only MLPerf LoadGen drives: dlbench's step loop has no arrival process.
LOADGEN_SCENARIOS = ("multi-stream", "server")
# MLPerf's samples per multi-stream query, where none is given
MULTI_STREAM_SAMPLES = 8
# The server scenario's latency bound where none is given: MLPerf's default
# (mlperf.conf: *.Server.target_latency = 10) at its 99th percentile.
DEFAULT_LATENCY_BOUND_MS = 10.0
DEFAULT_LATENCY_PERCENTILE = 99.0
# The percentiles LoadGen's detail log reports (results.cc): a bound held at any
# other percentile could not be shown beside the verdict.
LOADGEN_PERCENTILES = (50.0, 90.0, 95.0, 97.0, 99.0, 99.9)
LOADGEN_PERCENTILES_TEXT = ", ".join(f"{p:g}" for p in LOADGEN_PERCENTILES)
loadgen_percentile = number_type(
    float,
    lambda v: v in LOADGEN_PERCENTILES,
    f"one of the percentiles LoadGen reports: {LOADGEN_PERCENTILES_TEXT}",
)
# MLPerf's early-stopping minimum for a 99th percentile with no over-latency
# queries (mlperf.conf sets it as multi-stream's min_query_count): fewer samples
# cannot bound p99.
MIN_P99_QUERIES = 662
MAX_TARGET_QPS = 1e7
# MLPerf Inference's minimum test duration (mlperf.conf: *.*.min_duration = 600000)
OFFICIAL_MIN_TIME_S = 600.0
MAX_STREAMS = 1024
# The percentile an endpoint's SLO bounds hold at, where none is given (MLPerf's LLM
# benchmarks hold TTFT and TPOT at their 99th)
DEFAULT_SLO_PERCENTILE = 99.0
DEVICE_PATTERN = re.compile(r"cpu|auto|mps|cuda(:\d+)?|remote")
# Where an endpoint case's work runs: its server, not this machine's devices
REMOTE_DEVICE = "remote"
DEVICE_HELP = "cpu, cuda, cuda:N, mps (Apple, torch) or auto"
# Host-to-device copy of the inputs: before the clock (default) or in every step;
# each value's meaning is quoted by the error that refuses it (a by_framework axis).
TRANSFERS = MappingProxyType(
    {
        "outside": "the inputs on the device before the clock",
        "inside": "the input copy in the timed step",
    }
)
# Every framework's compile modes: what --compile may name (each framework has its own).
COMPILE_MODES = tuple(sorted({mode for info in FRAMEWORKS.values() for mode in info.compile_modes}))
# Bounds that keep values sane and below what the OS and frameworks accept.
MAX_MIN_TIME_S = 86_400.0
MAX_TIMEOUT_S = 7 * 86_400.0
MAX_SEED = 2**32 - 1
MAX_THREADS = 1024
MAX_BATCH = 2**31 - 1
MAX_NPROC = 1024
# processes per case: more is a different experiment, not a benchmark run
MAX_REPEAT = 100


def available_cpus() -> int:
    """CPUs this process may run on (affinity-aware, unlike os.cpu_count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Case:
    """The identity of one measurement; equal keys measure the same thing.

    A Result embeds the Case as it ran: the worker resolves `device` ("auto"),
    `batch_size` (None: the workload's default for the device), `params` (the
    workload's defaults filled in), `scenario` and `interop_threads`. Adding an
    axis is one field here (with its `dlbench run` option in metadata "cli"
    and its part of label()) and its check in plan.validate; key(), the result
    schema, CSV columns, suite keys, the option and the plan's RunRequest all
    follow from the fields. An axis only some frameworks implement (its option
    marked by_framework, as --transfer is) needs no check of its own: plan.validate
    checks it against each framework's registry entry (FrameworkInfo.axes).

    The fields only some cases have are held by parts (spec.case_parts: a user's
    model file and its inputs, `user_model`; a time-to-train case's target and data,
    `time_to_train`; a DDP launch, `ddp_launch`), each a record or None, written flat
    beside the case's own fields under their own names: `Case.of` and `replaced`
    take those flat names, as a case file, a suite entry and `dlbench run` give them.
    """

    # its JSON holds every field, as every stored case does (spec.record_dict)
    WRITES_EVERY_FIELD: ClassVar[bool] = True

    workload: str = field(
        metadata=SUITE_AXIS
        | cli(
            "--workload",
            "-w",
            repeat=True,
            vocabulary=WORKLOADS,
            metavar="WORKLOAD",
            help="a workload, by the name dlbench list workloads shows",
        )
    )
    framework: str = field(
        metadata=SUITE_AXIS
        | cli(
            "--framework",
            "-f",
            repeat=True,
            vocabulary=FRAMEWORKS,
            metavar="FRAMEWORK",
            help=", ".join(FRAMEWORKS),
        )
    )
    compile: str = field(
        metadata=SUITE_AXIS
        | cli(
            "--compile",
            "-c",
            repeat=True,
            vocabulary=COMPILE_MODES,
            noun="compile mode",
            metavar="COMPILE",
            help="compile mode, e.g. eager, compile, script; each applies to the frameworks "
            "that have it",
        )
    )
    mode: str = field(
        default="infer",
        metadata=RECORDED_AXIS
        | cli(
            "--mode",
            "-m",
            repeat=True,
            vocabulary=MODES,
            help="default: infer, or train for time-to-train workloads",
        ),
    )
    device: str = field(
        default="auto",
        metadata=RECORDED_AXIS | cli("--device", "-d", help=f"{DEVICE_HELP} (default: auto)"),
    )
    batch_size: int | None = field(
        default=None,
        metadata=RECORDED_AXIS
        | cli(
            "--batch-size",
            "-b",
            repeat=True,
            parse=positive_int,
            help="samples per step; default: the workload's, 1 for single-stream and server, "
            f"{MULTI_STREAM_SAMPLES} for multi-stream",
        ),
    )
    precision: str = field(
        default="fp32",
        metadata=RECORDED_AXIS
        | cli(
            "--precision",
            "-p",
            repeat=True,
            vocabulary=PRECISIONS,
            metavar="PRECISION",
            help="fp32 (strict, default), tf32, amp-fp16, amp-bf16 (torch), bf16 or fp16 "
            "(torch text generation: the whole model in that type), int8 or "
            "int8-dynamic (post-training quantization: onnxruntime, openvino, torch)",
        ),
    )
    threads: int = field(
        default_factory=available_cpus,
        metadata=RECORDED_AXIS
        | cli(
            "--threads",
            "-t",
            parse=positive_int,
            help="intra-op threads (default: all CPUs available)",
        ),
    )
    interop_threads: int | None = field(
        default=None,
        metadata={record_dict.REQUIRED: True}
        | cli(
            "--interop-threads",
            parse=positive_int,
            help="inter-op threads (default: same as --threads)",
        ),
    )
    params: tuple[tuple[str, int], ...] = field(
        default=(),
        metadata=SUITE_AXIS
        | cli(
            "--param",
            repeat=True,
            parse=param_pair,
            metavar="KEY=INT",
            help="workload parameter, e.g. size=2048",
        ),
    )
    options: tuple[tuple[str, str], ...] = field(
        default=(),
        metadata=SUITE_AXIS
        | cli(
            "--option",
            repeat=True,
            parse=option_pair,
            metavar="KEY=VALUE",
            help="a framework's own option, part of the case's label, e.g. optimizer=fused "
            "(torch's fused AdamW); `dlbench list support` names each framework's",
        ),
    )
    scenario: str | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--scenario",
            "-s",
            repeat=True,
            vocabulary=SCENARIOS,
            metavar="SCENARIO",
            help="single-stream (batch 1, latency), offline (large batches, throughput), or "
            "with MLPerf LoadGen: multi-stream (a query of N samples after the last) or server "
            "(Poisson arrivals at --target-qps, or --find-peak)",
        ),
    )
    # a user's model file, its inputs and its trust (--model): None for a built-in
    # workload; its fields are written beside the case's own (spec.case_parts)
    user_model: UserModel | None = field(default=None, metadata=record_dict.FLATTENED)
    # a time-to-train case's target accuracy and real data (--target-accuracy,
    # --data-dir): None where it has neither (spec.case_parts)
    time_to_train: TimeToTrain | None = field(default=None, metadata=record_dict.FLATTENED)
    # DistributedDataParallel (--nproc, --torchrun): None for a plain process
    ddp_launch: DdpLaunch | None = field(default=None, metadata=record_dict.FLATTENED)
    transfer: str = field(
        default="outside",
        metadata=SUITE_AXIS
        | cli(
            "--transfer",
            vocabulary=TRANSFERS,
            by_framework=True,
            help="GPU cases: copy the inputs host-to-device before timing (outside, default) "
            "or in every timed step (inside)",
        ),
    )
    # Serving, measured by MLPerf LoadGen: `loadgen` drives the case with LoadGen
    # instead of dlbench's step loop (always in the multi-stream and server
    # scenarios). A server case has a Poisson arrival rate (target_qps) or
    # searches for the highest rate that keeps its bound (find_peak); the bound
    # is the latency_percentile-th percentile at most latency_bound_ms; `streams`
    # queries are served at once (plan.validate fills the defaults in).
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
            parse=positive_float,
            metavar="Q",
            group="serving",
            help="server: the Poisson arrival rate, queries per second",
        ),
    )
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
    latency_bound_ms: float | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--latency-bound-ms",
            parse=positive_float,
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
    streams: int | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--streams",
            parse=positive_int,
            group="serving",
            help="server: queries served at once, each with threads/streams threads "
            "(default: one single-threaded stream per CPU thread; 1 on a GPU)",
        ),
    )

    # An OpenAI-compatible server (worker.endpoint_run): the llm-requests workload sent
    # to `endpoint` (a launch detail: the same server at another address is the same
    # case) for `served_model`, under a load profile (measure.load_profile), its
    # latencies held to the SLO bounds at slo_percentile.
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
            parse=positive_int,
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
            parse=positive_float,
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

    def effective_batch_size(self, default: int) -> int:
        """The batch the worker uses: a single-stream or server query is one sample,
        a multi-stream query MLPerf's 8 unless given."""
        if self.batch_size is not None:
            return self.batch_size
        if self.scenario in ("single-stream", "server"):
            return 1
        return MULTI_STREAM_SAMPLES if self.scenario == "multi-stream" else default

    def effective_scenario(self, batch_size: int) -> str:
        """Given, or derived from the batch: 1 is single-stream, more is offline."""
        if self.scenario is not None:
            return self.scenario
        return "single-stream" if batch_size == 1 else "offline"

    @property
    def effective_interop_threads(self) -> int:
        """Inter-op threads default to the intra-op count, as the frameworks' own defaults do."""
        return self.interop_threads if self.interop_threads is not None else self.threads

    @property
    def threads_in_use(self) -> int:
        """CPU threads the case runs at once: each DDP rank (on a GPU too) has its own."""
        return self.threads * self.ranks

    @property
    def is_ddp(self) -> bool:
        """Launched by torchrun under DistributedDataParallel (--nproc N, N >= 1)."""
        return self.ddp_launch is not None and self.ddp_launch.ddp

    @property
    def ranks(self) -> int:
        """The processes the case trains in: its DDP ranks, 1 for a plain process."""
        launch = self.ddp_launch
        return launch.nproc if launch is not None and launch.ddp else 1

    @property
    def given_model(self) -> UserModel:
        """The user model's part, for the code that runs only a user model's case."""
        if self.user_model is None:
            raise TypeError(f"a {self.workload} case has no model file (--model)")
        return self.user_model

    @property
    def device_kind(self) -> str:
        """cpu, cuda, mps or auto: the device without its index (cuda:1 and cuda:0 compare)."""
        return self.device.split(":")[0]

    def key(self) -> str:
        """What makes two results the same case, within a run and across runs.

        Every field that changes what is measured, with the device reduced to
        its kind; launch details and file paths (their digests count) are left
        out. Stored beside each result and used by compare, rerun and scaling.
        """
        return self.key_without()

    def key_without(self, *names: str) -> str:
        """The key with some axes left out: the 1-process twin of a DDP case matches on it."""
        whole = self.to_dict()
        data = {
            name: whole[name]
            for name, f in record_dict.flat_fields(Case)
            if _in_key(f) and name not in names
        }
        if "device" in data:
            data["device"] = self.device_kind
        if "interop_threads" in data:  # None and the same count as threads are one case
            data["interop_threads"] = self.effective_interop_threads
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def label(self, omit: Collection[str] = (), only: Collection[str] | None = None) -> str:
        """The one human-readable name of a case, for every table, chart and message.

        Every key axis that is not at its usual value appears, so two cases
        with different keys never share a label. `omit` drops axes a table
        shows in columns of their own; `only` keeps just the named axes (a
        study table whose rows differ by framework and compile mode).
        """
        parts = [(axis, text) for axis, text in self._label_parts() if text]
        chosen = [
            text for axis, text in parts if axis not in omit and (only is None or axis in only)
        ]
        return " ".join(chosen).replace(" / [", " [").strip(" /")

    def _label_parts(self) -> list[tuple[str, str]]:
        framework = NULL_LABEL if self.framework == "null" else self.framework
        batch = "default" if self.batch_size is None else str(self.batch_size)
        interop = self.interop_threads
        return [
            ("workload", self.workload),
            ("params", " ".join(f"{k}={v}" for k, v in self.params)),
            ("framework", f"/ {framework}"),
            ("compile", f"[{self.compile}]"),
            ("mode", self.mode),
            ("scenario", self.scenario or ""),
            ("precision", "" if self.precision == "fp32" else self.precision),
            ("batch_size", f"bs={batch}"),
            ("device", self.device),
            ("threads", f"t={self.threads}"),
            ("interop_threads", "" if interop in (None, self.threads) else f"interop={interop}"),
            ("transfer", "transfer=inside" if self.transfer == "inside" else ""),
            (
                "loadgen",
                "loadgen" if self.loadgen and self.scenario not in LOADGEN_SCENARIOS else "",
            ),
            ("target_qps", f"qps={self.target_qps:g}" if self.target_qps is not None else ""),
            ("find_peak", "find-peak" if self.find_peak else ""),
            ("latency_bound_ms", self._bound_label()),
            ("streams", f"streams={self.streams}" if self.streams is not None else ""),
            ("served_model", f"model={self.served_model}" if self.served_model else ""),
            ("api", "chat" if self.api != COMPLETIONS else ""),
            ("concurrency", f"users={self.concurrency}" if self.concurrency else ""),
            ("request_rate", f"rate={self.request_rate:g}/s" if self.request_rate else ""),
            ("burstiness", f"burstiness={self.burstiness:g}" if self.burstiness else ""),
            ("latency_clock", f"clock={self.latency_clock}" if self.latency_clock else ""),
            ("ttft_ms", self._slo_label()),
            (
                "tokenizer_digest",
                f"tokenizer={_short(self.tokenizer_digest)}" if self.tokenizer_digest else "",
            ),
            *_ddp_label_parts(self.ddp_launch),
            *_time_to_train_label_parts(self.time_to_train),
            *_user_model_label_parts(self.user_model),
            ("options", " ".join(f"{k}={v}" for k, v in self.options)),
        ]

    def _bound_label(self) -> str:
        if self.latency_bound_ms is None:
            return ""
        percentile = self.latency_percentile or DEFAULT_LATENCY_PERCENTILE
        return f"p{percentile:g}<={self.latency_bound_ms:g}ms"

    def _slo_label(self) -> str:
        named = (("ttft", self.ttft_ms), ("tpot", self.tpot_ms))
        bounds = [f"{name}<={value:g}ms" for name, value in named if value is not None]
        if not bounds:
            return ""
        percentile = self.slo_percentile or DEFAULT_SLO_PERCENTILE
        return f"p{percentile:g} " + ",".join(bounds)

    @classmethod
    def of(cls, **flat: Any) -> Case:  # noqa: ANN401  # each field's own type
        """The case of these fields by their flat names, as a case file, a suite entry and
        `dlbench run`'s options name them: a part's fields (model, inputs, ...) go into
        its record (spec.case_parts), made where one of them is given a value."""
        return cls(**_nested(flat))

    def replaced(self, **flat: Any) -> Case:  # noqa: ANN401  # each field's own type
        """This case with some fields, by their flat names, set (dataclasses.replace
        across the parts)."""
        values = {name: getattr(self, name) for name in _OWN_FIELDS}
        for part, kind in _PARTS.items():
            record = values.pop(part)
            if record is not None:
                values.update((f.name, getattr(record, f.name)) for f in fields(kind))
        return Case.of(**{**values, **flat})

    def to_dict(self) -> JSONObject:
        return record_dict.to_dict(self)

    @classmethod
    def from_dict(cls, data: JSONValue, where: str | None = None) -> Case:
        """The case a JSON object holds; ValueError (naming `where`) where it is not one."""
        if isinstance(data, dict) and "ddp" not in data:
            # written before the field: every multi-process case was DDP
            nproc = data.get("nproc", 1)
            data = {**data, "ddp": isinstance(nproc, int) and nproc > 1}
        return record_dict.from_dict(cls, data, where)


# Case's fields that hold a part (spec.case_parts), by name: their records' types
_PARTS: dict[str, type[UserModel | TimeToTrain | DdpLaunch]] = {
    "user_model": UserModel,
    "time_to_train": TimeToTrain,
    "ddp_launch": DdpLaunch,
}
_OWN_FIELDS = tuple(f.name for f in fields(Case))


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """Flat field values with each part's gathered into its record (None where none of
    its fields is given a value other than its default)."""
    values = dict(flat)
    for part, kind in _PARTS.items():
        own = {f.name: values.pop(f.name) for f in fields(kind) if f.name in values}
        given = any(
            value is not None and value != record_dict.field_default(f)
            for f in fields(kind)
            if (value := own.get(f.name)) is not None
        )
        if part not in values:
            values[part] = kind(**own) if given else None
    return values


# How the null backend's cases are named wherever they are shown.
NULL_LABEL = "null (harness)"
# Case fields kept as name -> value pairs (JSON objects in files): params, options, inputs
PAIR_FIELDS = record_dict.pair_fields(Case)


def _ddp_label_parts(launch: DdpLaunch | None) -> list[tuple[str, str]]:
    if launch is None:
        return []
    return [
        ("nproc", f"x{launch.nproc} procs" if launch.nproc > 1 else ""),
        ("ddp", "ddp" if launch.ddp else ""),
    ]


def _time_to_train_label_parts(part: TimeToTrain | None) -> list[tuple[str, str]]:
    if part is None:
        return []
    target, data = part.target_accuracy, part.data_digest
    return [
        ("target_accuracy", f"target={target:g}" if target else ""),
        ("data_digest", f"data={_short(data)}" if data else ""),
    ]


def _user_model_label_parts(user_model: UserModel | None) -> list[tuple[str, str]]:
    if user_model is None:
        return []
    model, data = user_model.model_digest, user_model.input_data_digest
    return [
        ("model_digest", f"model={_short(model)}" if model else ""),
        ("inputs", " ".join(f"{k}:{v}" for k, v in user_model.inputs)),
        ("input_data_digest", f"input-data={_short(data)}" if data else ""),
    ]


def _short(digest: str) -> str:
    """A hex digest's first 12 digits; an "unhashed:NAME" marker (older runs) whole."""
    return digest if ":" in digest else digest[:12]


def _in_key(f: Field[Any]) -> bool:
    return bool(f.metadata.get("key", True))


def suite_axes() -> tuple[str, ...]:
    """The Case fields a suite entry may set."""
    return tuple(name for name, f in record_dict.flat_fields(Case) if f.metadata.get("suite"))


@dataclass(frozen=True)
class Settings:
    """How every case of a run is measured (the stop rule and the guards)."""

    # its JSON holds every setting, as every stored run's does (spec.record_dict)
    WRITES_EVERY_FIELD: ClassVar[bool] = True

    # "cli": the `dlbench run` option that sets the field; a suite's settings
    # use the same names (min_time for --min-time; plan.build.SETTING_FIELDS)
    min_time_s: float = field(
        default=1.0,
        metadata=cli(
            "--min-time",
            parse=non_negative_float,
            group="measurement",
            help="seconds of measured time",
        ),
    )
    min_iters: int = field(
        default=10,
        metadata=cli(
            "--min-iters",
            parse=positive_int,
            group="measurement",
            help="measured iterations at least",
        ),
    )
    warmup_iters: int = field(
        default=3,
        metadata=cli(
            "--warmup",
            parse=integer,
            group="measurement",
            help="warm-up iterations after the first call",
        ),
    )
    timeout_s: float = field(
        default=600.0,
        metadata=cli(
            "--timeout",
            parse=non_negative_float,
            group="measurement",
            help="seconds per case (default 600)",
        ),
    )
    seed: int = field(
        default=0,
        metadata=cli(
            "--seed",
            parse=integer,
            group="measurement",
            help="seed for weights and inputs (default 0)",
        ),
    )
    # fresh worker processes per case, run round-robin (results.repeats merges them)
    repeat: int = field(
        default=1,
        metadata=cli(
            "--repeat",
            parse=positive_int,
            metavar="N",
            group="measurement",
            help="run each case in N fresh worker processes, round-robin over the cases; "
            "compare needs several per side for a verdict (default 1; suites may set it)",
        ),
    )
    # LoadGen cases: MLPerf's own minimum duration (OFFICIAL_MIN_TIME_S) and
    # query counts instead of short runs; still not a submission
    official: bool = field(
        default=False,
        metadata=cli(
            "--official",
            switch=True,
            group="serving",
            help=f"LoadGen cases: MLPerf's minimum duration ({OFFICIAL_MIN_TIME_S:g} s) "
            "instead of short runs",
        ),
    )
    # Seconds of continuous work before a ceiling case's sustained windows (option
    # ceiling=sustained, worker.ceiling_windows); None: 10 on a GPU, 0 on a CPU. Set by
    # `dlbench roofline --sustain`, whose option it is: no `run` option declares it.
    sustain_s: float | None = None
    # The user's name for the code measured (a commit, a version), which dlbench cannot
    # know: `dlbench history --order label` orders runs by it. It changes no number, so
    # a suite file cannot set it (plan.suites.SETTING_KEYS) and no case key holds it.
    label: str | None = field(
        default=None,
        metadata=cli(
            "--label",
            parse=run_label,
            metavar="TEXT",
            group="output",
            help="store this label with the run (a commit, a version); "
            "`dlbench history --order label` orders runs by it",
        ),
    )

    def to_dict(self) -> JSONObject:
        return record_dict.to_dict(self)

    @classmethod
    def from_dict(cls, data: JSONValue, where: str | None = None) -> Settings:
        """The settings a JSON object holds; ValueError (naming `where`) where they are not."""
        return record_dict.from_dict(cls, data, where)
