"""The parts of a case that only some cases have, each one record: a Case holds it, or
None. Their fields are written beside the case's own, under the names case files have
always used (spec.record_dict: FLATTENED), so a case's JSON and its key are what they
were; planning builds a case from those flat names (Case.of). A time-to-train target
and a DDP launch are their loop kinds' own records; LoadGen's load (ServerLoad) and a
served LLM's (LlmServing) are where the four serving kinds' fields are kept, and each
of those kinds reads its own as one record of spec.loads (spec.loop_kinds.case_load).

Also the field metadata every part of a case uses: whether a field is part of the
key, and whether a suite entry may set it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlbench.measure.load_profile import LATENCY_CLOCKS
from dlbench.measure.openai_api import APIS, COMPLETIONS
from dlbench.spec import record_dict
from dlbench.spec.cli_options import (
    NumberReader,
    cli,
    endpoint_url,
    fraction,
    integer_in,
    percentile_value,
    positive_at_most,
    positive_float,
    positive_int,
    resolved_path,
    shell_words,
)

# Field metadata. "key": False leaves a field out of Case.key() (how it was
# launched, or a path whose content digest is the identity instead); "suite":
# True lets a suite entry set it (plan.suites reads this).
LAUNCH_DETAIL = {"key": False}
SUITE_AXIS = {"suite": True}
# "required": a stored result must carry it: its default would change with
# the reader (threads: the reading machine's CPUs) or silently pick a case.
RECORDED_AXIS = {"suite": True, record_dict.REQUIRED: True}
# A field that changes a built-in workload's inputs: spec.case_inputs carries its value
# to every place that makes them (workloads.inputs.case_arrays) and into the
# reference's cache key, e.g. `metadata=SUITE_AXIS | INPUT_AXIS | cli(...)`.
INPUTS_KEY = "inputs"
INPUT_AXIS = {INPUTS_KEY: True}
# "cli" (spec.cli_options.cli): the `dlbench run` option that sets the field;
# the parser and the plan's RunRequest are built from it.

# Bounds that keep values sane and below what the OS and frameworks accept, each the
# range of its fields' option readers (spec.cli_options), which planning holds every
# value to: the settings' (spec.case.Settings), then a case's and its parts'
MAX_MIN_TIME_S = 86_400.0
MAX_TIMEOUT_S = 7 * 86_400.0
MAX_SEED = 2**32 - 1
MAX_THREADS = 1024
MAX_BATCH = 2**31 - 1
# processes per case: more is a different experiment, not a benchmark run
MAX_REPEAT = 100
MAX_NPROC = 1024
MAX_STREAMS = 1024
MAX_TARGET_QPS = 1e7
MAX_LATENCY_BOUND_MS = MAX_MIN_TIME_S * 1000.0
# the most users, and requests a second, an endpoint's load may ask for
MAX_USERS = 1 << 16
MAX_RATE = float(1 << 20)
# The server scenario's latency bound where none is given: MLPerf's default
# (mlperf.conf: *.Server.target_latency = 10) at its 99th percentile.
DEFAULT_LATENCY_BOUND_MS = 10.0
DEFAULT_LATENCY_PERCENTILE = 99.0
# The percentiles LoadGen's detail log reports (results.cc): a bound held at any
# other percentile could not be shown beside the verdict.
LOADGEN_PERCENTILES = (50.0, 90.0, 95.0, 97.0, 99.0, 99.9)
LOADGEN_PERCENTILES_TEXT = ", ".join(f"{p:g}" for p in LOADGEN_PERCENTILES)
loadgen_percentile = NumberReader(
    float,
    lambda v: v in LOADGEN_PERCENTILES,
    f"one of the percentiles LoadGen reports: {LOADGEN_PERCENTILES_TEXT}",
)
# The percentile an endpoint's SLO bounds hold at, where none is given (MLPerf's LLM
# benchmarks hold TTFT and TPOT at their 99th)
DEFAULT_SLO_PERCENTILE = 99.0


@dataclass(frozen=True)
class UserModel:
    """A user's model file under benchmark (`dlbench run --model`): the file (its
    content digest is the identity), the --input specs (name -> "8x3x32x32:dtype"),
    the trust to unpickle it, and the arrays fed to it (--input-data: an .npz by input
    name, or an .npy, identified by their content digest)."""

    model: str = field(
        metadata=LAUNCH_DETAIL
        | cli(
            "--model",
            group="model",
            help="benchmark a model file on every framework that can run it: ONNX, "
            "TorchScript, torch.export .pt2, Keras .keras/.h5, a SavedModel dir, OpenVINO IR "
            ".xml, TFLite (the format is read from the content, not the extension)",
        ),
    )
    model_digest: str | None = None
    # --input's reader lives with the user-model workload (above this room), so
    # cli.parser declares that option itself
    inputs: tuple[tuple[str, str], ...] = ()
    trust_model: bool = field(
        default=False,
        metadata=LAUNCH_DETAIL
        | cli(
            "--trust-model",
            switch=True,
            group="model",
            help="allow loading a model file that needs unpickling (runs code from the file)",
        ),
    )
    input_data: str | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--input-data",
            metavar="FILE",
            group="model",
            help="the model's input values: an .npz of arrays by input name (a 0-d array for "
            "a scalar), or an .npy for a single-input model; every framework gets the same "
            "values",
        ),
    )
    input_data_digest: str | None = None


@dataclass(frozen=True)
class TimeToTrain:
    """A time-to-train case's (an epoch workload's) stop and data: stop early at this
    test accuracy, and read MNIST's IDX files from this folder (identified by the
    files' digest) instead of the synthetic set (data_digest None)."""

    target_accuracy: float | None = field(
        default=None,
        metadata=cli(
            "--target-accuracy",
            parse=fraction,
            group="training",
            help="stop at this test accuracy (0-1, e.g. 0.98) and report the time",
        ),
    )
    data_dir: str | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--data-dir",
            parse=resolved_path,
            group="training",
            help="folder with MNIST's four IDX files (.gz or not); default: a learnable "
            "synthetic set, labelled as such",
        ),
    )
    data_digest: str | None = None


@dataclass(frozen=True)
class DdpLaunch:
    """DistributedDataParallel training: processes launched by torchrun (one per GPU;
    gloo processes on a CPU), and torchrun options for multi-node runs. `ddp` is True
    for every torchrun case; --nproc 1 makes one with one rank (DDP's own cost, and
    NCCL on a single GPU) beside the plain process, which has no such part."""

    nproc: int = field(
        default=1,
        metadata=cli(
            "--nproc",
            "--gpus",
            parse=integer_in(1, MAX_NPROC),
            metavar="N",
            group="ddp",
            help="train with DistributedDataParallel in N processes launched by torchrun "
            "(one per GPU; gloo on a CPU), beside the same case in 1 process for scaling",
        ),
    )
    ddp: bool = False
    torchrun_args: tuple[str, ...] = field(
        default=(),
        metadata=LAUNCH_DETAIL
        | cli(
            "--torchrun",
            parse=shell_words,
            metavar="ARGS",
            group="ddp",
            help='torchrun options for multi-node runs, e.g. "--nnodes 2 --rdzv-backend c10d '
            '--rdzv-endpoint host:29400" (default: --standalone)',
        ),
    )


@dataclass(frozen=True)
class LlmServing:
    """A served LLM's load: an OpenAI-compatible server (worker.endpoint_run) sent the
    llm-requests workload at `endpoint` (a launch detail: the same server at another
    address is the same case; None for a served engine's case, which starts its own)
    for `served_model`, under a load profile (measure.load_profile), its latencies held
    to the SLO bounds at slo_percentile (a generation server's are too)."""

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


@dataclass(frozen=True)
class ServerLoad:
    """How a server case is loaded. Serving measured by MLPerf LoadGen: `loadgen`
    drives the case with LoadGen instead of dlbench's step loop (always in the
    multi-stream and server scenarios). A server case has a Poisson arrival rate
    (target_qps) or searches for the highest rate that keeps its bound (find_peak);
    the bound is the latency_percentile-th percentile at most latency_bound_ms;
    `streams` queries are served at once (plan.server_load_checks fills the defaults in). An
    endpoint's case searches too (find_peak, for the load its SLOs hold at), and a
    served engine's serves `streams` sequences at once."""

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
