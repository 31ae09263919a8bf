"""Validation of cases and settings, at the edge: before anything runs.

It has no side effects: it reads the registry tables and the workloads'
parameter rules (and, for --data-dir, checks the MNIST files once per
folder). Every error names the field, the bad value and what is allowed, and
is raised as UserError (exit code 2 in the CLI).
"""

from __future__ import annotations

import functools
import importlib.util
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from dlbench.errors import UserError
from dlbench.measure.timer import MAX_ITERS  # also the most --min-iters can ask
from dlbench.plan.endpoint_cases import option_value, validate_endpoint_case
from dlbench.plan.token_server_cases import validate_token_server
from dlbench.spec.case import (
    DEFAULT_LATENCY_PERCENTILE,
    DEVICE_HELP,
    DEVICE_PATTERN,
    LOADGEN_SCENARIOS,
    MAX_BATCH,
    MAX_MIN_TIME_S,
    MAX_NPROC,
    MAX_REPEAT,
    MAX_SEED,
    MAX_STREAMS,
    MAX_TARGET_QPS,
    MAX_THREADS,
    MAX_TIMEOUT_S,
    OFFICIAL_MIN_TIME_S,
    SCENARIOS,
    Case,
    Settings,
)
from dlbench.spec.case_parts import (
    DEFAULT_LATENCY_BOUND_MS,
    LOADGEN_PERCENTILES,
    LOADGEN_PERCENTILES_TEXT,
    TimeToTrain,
)
from dlbench.spec.cli_options import CliOption, option_flag
from dlbench.spec.digest import files_digest, path_digest
from dlbench.spec.record_dict import flat_fields
from dlbench.spec.registry import (
    ENDPOINT_FRAMEWORK,
    FRAMEWORKS,
    LLM_WORKLOADS,
    PRECISIONS,
    FrameworkInfo,
    framework_info,
    precision_info,
)
from dlbench.workloads import get_workload
from dlbench.workloads.base import Workload
from dlbench.workloads.loop_kinds import loop_kind
from dlbench.workloads.memory import check_case_memory, input_data_need, require_room

# Messages the plan builder gives too, for the same mistake seen in a request
TIME_TO_TRAIN_ONLY = (
    "--target-accuracy and --data-dir are for time-to-train workloads (mnist-train)"
)
MODEL_OPTIONS = "--input, --input-data and --trust-model go with --model FILE"

T = TypeVar("T")


def require_known(what: str, value: object, allowed: Sequence[str]) -> None:
    """A name from a fixed list (a scenario, a mode), or a UserError listing the list."""
    if value not in allowed:
        raise UserError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")


def require_model_file(model: str) -> None:
    if not Path(model).exists():
        raise UserError(f"--model {model}: no such file or directory")


def refuse_server_options(given: Sequence[str], why: str = "") -> NoReturn:
    """Server options given where no server case takes them; `why` says where."""
    raise UserError(f"{', '.join(given)} go with --scenario server{why}")


def validate_settings(settings: Settings) -> Settings:
    """Reject stop rules that could never finish, overflow, or make no sense."""
    _require_number("min-time", settings.min_time_s, 0, MAX_MIN_TIME_S)
    _require_int("min-iters", settings.min_iters, 1, MAX_ITERS)
    _require_int("warmup", settings.warmup_iters, 0, MAX_ITERS)
    _require_number("timeout", settings.timeout_s, 0, MAX_TIMEOUT_S)
    if settings.timeout_s == 0:
        raise UserError("invalid timeout 0; expected a number of seconds > 0")
    _require_int("seed", settings.seed, 0, MAX_SEED)
    _require_int("repeat", settings.repeat, 1, MAX_REPEAT)
    if settings.official and settings.min_time_s < OFFICIAL_MIN_TIME_S:
        raise UserError(
            f"--official runs last at least MLPerf's {OFFICIAL_MIN_TIME_S:g} s; "
            f"--min-time {settings.min_time_s:g} is shorter (drop it, or drop --official)"
        )
    return settings


def validate_case(case: Case) -> Case:
    """Check every field against the registry; return the case with its files' digests."""
    info = framework_info(case.framework)
    workload = get_workload(case.workload)
    _validate_compile(case, info, workload)
    if case.mode not in workload.modes:
        raise UserError(
            f"workload {case.workload!r} does not support mode {case.mode!r}; "
            f"allowed: {', '.join(workload.modes)}"
        )
    if not info.supports(case.workload, case.mode):
        where = [n for n, fw in FRAMEWORKS.items() if fw.supports(case.workload, case.mode)]
        raise UserError(
            f"workload {case.workload!r} in mode {case.mode!r} is not supported on "
            f"{case.framework!r}; supported on: {', '.join(where)} (see dlbench list)"
        )
    _validate_scenario(case)
    if not isinstance(case.device, str) or not DEVICE_PATTERN.fullmatch(case.device):
        raise UserError(f"unknown device {case.device!r}; allowed: {DEVICE_HELP}")
    if case.batch_size is not None:
        _require_int("batch size", case.batch_size, 1, MAX_BATCH)
        if info.max_batch is not None and case.batch_size > info.max_batch:
            raise UserError(
                f"batch size {case.batch_size} on {case.framework!r}: it runs at most "
                f"{info.max_batch} at once; allowed: up to {info.max_batch}"
            )
    if precision_info(case.precision).quantized:
        _validate_quantized(case, info)
    if case.precision not in info.precisions:
        raise UserError(
            f"precision {case.precision!r} is not available on {case.framework!r}; "
            f"allowed there: {', '.join(info.precisions)}"
        )
    _validate_precision_scope(case.precision, workload, info)
    _require_int("threads", case.threads, 1, MAX_THREADS)
    if case.interop_threads is not None:
        _require_int("interop threads", case.interop_threads, 1, MAX_THREADS)
    workload.validate_params(dict(case.params))
    _validate_options(case, info)
    _validate_model(case, info)
    _refuse_time_to_train_options(case, workload.epoch_based)
    _validate_distributed(case, workload.epoch_based, info.ddp_compiles)
    _validate_framework_axes(case, info, workload)
    return loop_kind(case, workload, info).checks_function()(case, info)


def checked_load(case: Case, info: FrameworkInfo) -> Case:
    """The checks of the loop kinds that take the step loop's load, LoadGen's scenarios
    or an endpoint's (workloads.loop_kinds)."""
    return _checked_serving(case, None)


def checked_generation_server(case: Case, info: FrameworkInfo) -> Case:
    """A generation engine as a server under LoadGen (plan.token_server_cases): the
    endpoint's options refused but its SLO's, which bound its tokens."""
    return _checked_serving(case, info)


def _checked_serving(case: Case, token_server: FrameworkInfo | None) -> Case:
    """The options of the other kinds refused, the case's memory, its serving defaults
    and its files' digests (what it measured is their content, not their path)."""
    case = validate_endpoint_case(case, slo_taken=token_server is not None)
    check_case_memory(case)  # sizes from --param, -b, --input and --input-data
    case = _validate_serving(case, token_server)
    user = case.user_model
    if user is not None:
        data = user.input_data
        user = replace(
            user,
            model_digest=_digest(user.model),
            input_data_digest=_digest(data) if data is not None else None,
        )
    train = case.time_to_train
    if train is not None:
        folder = train.data_dir
        train = replace(train, data_digest=_mnist_digest(folder) if folder is not None else None)
    return replace(case, user_model=user, time_to_train=train)


def _validate_precision_scope(precision: str, workload: Workload, info: FrameworkInfo) -> None:
    """Text generation holds its whole model in one dtype (autocast is no LLM engine's
    way), and only text generation runs with its model cast whole."""
    held = precision_info(precision)
    if held.quantized:
        return  # refused or allowed by its quantization path (_validate_quantized)
    if workload.generative and held.generation_dtype is None:
        allowed = [name for name in info.float_precisions if PRECISIONS[name].generation_dtype]
        raise UserError(
            f"precision {precision} is autocast; text generation ({workload.name}) holds its "
            f"whole model in one type, as LLM engines do; allowed: {', '.join(allowed)}"
        )
    if held.generation_only and not workload.generative:
        autocast = f"amp-{precision}"
        instead = f"; for {workload.name}, {autocast} autocasts" if autocast in PRECISIONS else ""
        raise UserError(
            f"precision {precision} (the whole model in {held.generation_dtype}) is for text "
            f"generation: {', '.join(LLM_WORKLOADS)}{instead}"
        )


def _validate_compile(case: Case, info: FrameworkInfo, workload: Workload) -> None:
    """A compile mode of the framework that the workload runs in (export: model inference)."""
    if case.compile not in info.compile_modes:
        raise UserError(
            f"framework {case.framework!r} has no compile mode {case.compile!r}; "
            f"allowed: {', '.join(info.compile_modes)}"
        )
    allowed_compiles = workload.compile_modes_on(case.framework, info.compile_modes)
    if case.compile not in allowed_compiles:
        raise UserError(
            f"workload {case.workload!r} on {case.framework!r} runs in compile modes "
            f"{', '.join(allowed_compiles)}, not {case.compile!r}"
        )
    limit = info.inference_compiles.get(case.compile)
    if limit is not None and (
        case.mode != "infer" or workload.is_kernel or case.precision not in limit.precisions
    ):
        raise UserError(
            f"compile mode {case.compile} ({limit.what}) runs model inference at "
            f"{' or '.join(limit.precisions)}; not {case.workload} {case.mode} at {case.precision}"
        )


# The Case fields only some frameworks implement the values of (beside the default),
# with their options: read from the fields, so a new such axis needs no line here.
FRAMEWORK_AXES = tuple(
    (name, f, f.metadata["cli"])
    for name, f in flat_fields(Case)
    if "cli" in f.metadata and f.metadata["cli"].by_framework
)


def _validate_framework_axes(case: Case, info: FrameworkInfo, workload: Workload) -> None:
    """Each per-framework axis: a value of its vocabulary, and one other than its
    default only where the framework's entry lists it for this workload."""
    for name, f, option in FRAMEWORK_AXES:
        value = case.value_of(name)
        require_known(option.noun_for(name), value, tuple(option.vocabulary or ()))
        values = info.axes.get(name)
        if value == f.default or (
            values is not None
            and values.covers(value, case.workload, workload.epoch_based or workload.generative)
        ):
            continue
        raise UserError(
            f"{option.long_flag} {value} ({_meaning(option, value)}) is implemented for "
            f"{_implementing(name, value)}, not {case.workload} on {case.framework}"
        )


def _meaning(option: CliOption, value: str) -> str:
    """What a value of a by_framework option means (its vocabulary maps it)."""
    meanings = option.vocabulary
    return str(meanings[value]) if isinstance(meanings, Mapping) else value


def _implementing(axis: str, value: str) -> str:
    """The frameworks whose entry lists `value` of the axis, each with the workloads
    it covers ("torch step workloads except h2d and user-model")."""
    having = [
        " ".join(filter(None, (name, info.axes[axis].scope())))
        for name, info in FRAMEWORKS.items()
        if axis in info.axes and value in info.axes[axis].values
    ]
    return "; ".join(having) or "no framework"


def _validate_quantized(case: Case, info: FrameworkInfo) -> None:
    """int8: inference on a CPU, on a framework and workload with a quantization path."""
    precision = case.precision
    if case.mode != "infer":
        raise UserError(
            f"precision {precision} is post-training quantization for inference; "
            f"{case.workload} in mode {case.mode} trains"
        )
    paths = {
        name: framework.quantized[precision].workloads
        for name, framework in FRAMEWORKS.items()
        if precision in framework.quantized
    }
    if case.workload not in paths.get(case.framework, ()):
        where = "; ".join(f"{name}: {', '.join(workloads)}" for name, workloads in paths.items())
        raise UserError(
            f"precision {precision} has no quantization path for {case.workload} on "
            f"{case.framework}; it has: {where}"
        )
    if case.device not in ("cpu", "auto"):
        raise UserError(
            f"precision {precision} is quantized for the CPU; not --device {case.device}"
        )
    quantizer = info.quantizer_package
    if quantizer is not None and importlib.util.find_spec(quantizer) is None:
        raise UserError(
            f"{precision} on {case.framework} needs {quantizer}, which is not installed; "
            "install it with: pip install 'dlbench[quantization]'"
        )
    path = info.quantized[precision]
    if path.compiles is not None and case.compile not in path.compiles:
        why = f" ({path.why})" if path.why else ""
        raise UserError(
            f"{case.framework} {precision}{why} runs in compile mode "
            f"{' or '.join(path.compiles)}: use {' or '.join('-c ' + m for m in path.compiles)}, "
            f"not {case.compile}"
        )


def _having(capability: str) -> str:
    """The frameworks whose registry entry has `capability` (for error messages)."""
    return ", ".join(name for name, info in FRAMEWORKS.items() if getattr(info, capability))


def _validate_distributed(case: Case, epoch_based: bool, ddp_compiles: tuple[str, ...]) -> None:
    """--nproc N: training steps under DistributedDataParallel, launched by torchrun, on a
    framework whose entry lists the compile modes it runs them in (ddp_compiles)."""
    launch = case.ddp_launch
    if launch is None:
        return
    nproc = launch.nproc
    _require_int("nproc", nproc, 1, MAX_NPROC)
    if not all(isinstance(arg, str) for arg in launch.torchrun_args):
        raise UserError("torchrun arguments must be strings")
    if nproc > 1 and not launch.ddp:
        raise UserError(f"nproc {nproc} runs under DistributedDataParallel: set ddp")
    if not launch.ddp:
        if launch.torchrun_args:
            raise UserError("--torchrun options go with --nproc N")
        return
    if any(arg.replace("_", "-").startswith("--nproc-per-node") for arg in launch.torchrun_args):
        raise UserError(
            "--torchrun must not set --nproc-per-node: --nproc is the processes per node"
        )
    if not ddp_compiles or case.mode != "train" or epoch_based:
        raise UserError(
            f"--nproc {nproc} runs {_having('ddp_compiles')} training steps under "
            "DistributedDataParallel; "
            f"not {case.workload} {case.mode} on {case.framework}"
        )
    if case.compile not in ddp_compiles:
        raise UserError(
            f"--nproc: DistributedDataParallel runs {' or '.join(ddp_compiles)}, not {case.compile}"
        )
    if case.device not in ("cpu", "auto", "cuda"):
        raise UserError(
            f"--nproc {nproc} places one process per GPU (cuda:LOCAL_RANK) or on the CPU; "
            f"give --device cuda, cpu or auto, not {case.device}"
        )


def _refuse_time_to_train_options(case: Case, epoch_based: bool) -> None:
    """--target-accuracy and --data-dir belong to time-to-train workloads only."""
    if not epoch_based and case.time_to_train is not None:
        raise UserError(f"{TIME_TO_TRAIN_ONLY}, not {case.workload!r}")


def checked_time_to_train(case: Case, info: FrameworkInfo) -> Case:
    """The time-to-train kind's own options (the target a fraction in (0, 1], the MNIST
    folder whole), then what every case with a load is checked for."""
    part = case.time_to_train or TimeToTrain()
    if part.target_accuracy is not None:
        _require_number("target accuracy", part.target_accuracy, 0.0, 1.0)
        if part.target_accuracy == 0:
            raise UserError("invalid target accuracy 0; expected a fraction in (0, 1], e.g. 0.98")
    if part.data_dir is not None:
        problem = _mnist_dir_problem(part.data_dir)
        if problem:
            raise UserError(f"--data-dir: {problem}")
    return checked_load(case, info)


@functools.lru_cache(maxsize=8)
def _digest(path: str) -> str:
    """A model or data file's digest, read once per file (every framework's case names it).

    An OpenVINO IR's weights live in the .bin beside its .xml: both count.
    """
    weights = Path(path).with_suffix(".bin")
    if Path(path).suffix.lower() == ".xml" and weights.is_file():
        return files_digest([(Path(path).name, Path(path)), (weights.name, weights)])
    return path_digest(Path(path))


@functools.lru_cache(maxsize=8)
def _mnist_digest(data_dir: str) -> str:
    """The digest of the four MNIST files in the folder (checked before this is asked)."""
    from dlbench.data.mnist import find_mnist_files

    return files_digest(sorted(find_mnist_files(Path(data_dir)).items()))


@functools.lru_cache(maxsize=8)
def _mnist_dir_problem(data_dir: str) -> str | None:
    """What is wrong with an MNIST folder, read once per folder (every case of a
    suite names the same one, and checking means decompressing all four files)."""
    from dlbench.data.mnist import check_mnist_dir
    from dlbench.errors import MnistFileError

    try:
        check_mnist_dir(Path(data_dir))
    except MnistFileError as exc:
        return str(exc)
    return None


def _validate_model(case: Case, info: FrameworkInfo) -> None:
    user = case.user_model
    if (case.workload == "user-model") != (user is not None):
        raise UserError("workload user-model goes with --model FILE, and --model only with it")
    if user is None:
        return
    from dlbench.workloads.model_format import FORMATS, model_format, require_trusted
    from dlbench.workloads.user_model import frameworks_for

    require_model_file(user.model)
    path = Path(user.model)
    allowed = frameworks_for(path)
    if case.framework not in allowed:
        raise UserError(
            f"--model {path.name} ({FORMATS[model_format(path)]}) runs on "
            f"{', '.join(allowed) or 'no framework dlbench has'}, not {case.framework!r}"
        )
    kind = model_format(path)
    require_trusted(path, kind, user.trust_model)  # before any worker unpickles it
    compiles = info.format_compiles.get(kind)
    if compiles is not None and case.compile not in compiles:
        raise UserError(
            f"--model {path.name} is a {FORMATS[kind]}; {case.framework} runs it in compile "
            f"modes {', '.join(compiles)}, not {case.compile!r}"
        )
    if user.input_data is not None:
        _check_input_data(user.input_data)


@functools.lru_cache(maxsize=8)
def _check_input_data(input_data: str) -> None:
    """A readable .npz/.npy without pickles (raises UserError); the model's own check
    of names, shapes and dtypes happens where the model is loaded."""
    from dlbench.workloads.user_model import load_input_data

    path = Path(input_data)
    if not path.is_file():
        raise UserError(f"--input-data {input_data}: no such file")
    require_room(input_data_need(path))  # its headers may claim more than memory holds
    load_input_data(path)


def _validate_scenario(case: Case) -> None:
    if case.scenario is None:
        return
    require_known("scenario", case.scenario, SCENARIOS)
    if case.scenario == "single-stream" and case.batch_size not in (None, 1):
        raise UserError(
            f"scenario single-stream sends one sample per request; batch size "
            f"{case.batch_size} belongs to the offline scenario"
        )


# The Case fields that belong to the server scenario, by the option that sets them
# (its flag, from the field's metadata).
SERVER_FIELDS = {
    name: option_flag(Case, name)
    for name in ("target_qps", "find_peak", "latency_bound_ms", "latency_percentile", "streams")
}


def server_options_given(source: object, endpoint: bool = False) -> list[str]:
    """The server options a Case or a RunRequest sets, by their command-line names;
    for an endpoint's, without --find-peak (its own search, plan.endpoint_cases)."""
    return [
        flag
        for name, flag in SERVER_FIELDS.items()
        if option_value(source, name) not in (None, False)
        and not (endpoint and name == "find_peak")
    ]


def _validate_serving(case: Case, token_server: FrameworkInfo | None = None) -> Case:
    """LoadGen cases: inference only, LoadGen installed, the server's options
    complete and in range; returns the case with the server's defaults filled in.
    `token_server`: a generation workload's framework (plan.token_server_cases)."""
    loadgen = case.server.loadgen or case.scenario in LOADGEN_SCENARIOS
    for name in ("loadgen", "find_peak"):
        if not isinstance(case.value_of(name), bool):
            raise UserError(f"invalid {name} {case.value_of(name)!r}; expected true or false")
    if token_server is not None:
        _require_loadgen()
        if case.scenario == "server":  # any other scenario is refused as such below
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
    _require_loadgen()
    if case.scenario != "server":
        return case.replaced(loadgen=True)
    return case.replaced(loadgen=True, **_server_settings(case))


def _server_settings(case: Case) -> dict[str, Any]:
    if case.batch_size not in (None, 1):
        raise UserError(
            f"a server query is one sample; batch size {case.batch_size} belongs to the "
            "offline or multi-stream scenario"
        )
    _require_rate(case, "the latency bound")
    bound = _first(case.server.latency_bound_ms, DEFAULT_LATENCY_BOUND_MS)
    _require_positive("latency bound (ms)", bound, MAX_MIN_TIME_S * 1000.0)
    percentile = _first(case.server.latency_percentile, DEFAULT_LATENCY_PERCENTILE)
    _require_number("latency percentile", percentile, 0.0, 100.0)
    if percentile not in LOADGEN_PERCENTILES:
        raise UserError(
            f"invalid latency percentile {percentile!r}; LoadGen reports {LOADGEN_PERCENTILES_TEXT}"
        )
    streams = case.server.streams if case.server.streams is not None else default_streams(case)
    _require_int("streams", streams, 1, MAX_STREAMS)
    return {"latency_bound_ms": float(bound), "latency_percentile": float(percentile),
            "streams": streams}  # fmt: skip


def _require_rate(case: Case, kept: str) -> None:
    """A server case's arrival rate: --target-qps in range, or --find-peak (the highest
    rate that keeps `kept`), one of the two."""
    if case.server.target_qps is None and not case.server.find_peak:
        raise UserError(
            "scenario server needs --target-qps Q (queries per second) or --find-peak "
            f"(the highest rate that keeps {kept})"
        )
    if case.server.target_qps is not None and case.server.find_peak:
        raise UserError("--find-peak searches for the rate itself; drop --target-qps")
    if case.server.target_qps is not None:
        _require_positive("target QPS", case.server.target_qps, MAX_TARGET_QPS)


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


def _require_positive(what: str, value: object, high: float) -> None:
    _require_number(what, value, 0.0, high)
    if value == 0:
        raise UserError(f"invalid {what} 0; expected a number > 0 (up to {high:g})")


def _validate_options(case: Case, info: FrameworkInfo) -> None:
    """Options belong to the backend whose entry lists them (the null backend's faults)."""
    if case.options and not info.options:
        raise UserError(
            f"options {dict(case.options)}: {case.framework!r} takes none; frameworks "
            f"with options of their own (--option KEY=VALUE): {_having('options')}"
        )
    for key, value in case.options:
        require_known(f"{case.framework}-backend option", key, tuple(info.options))
        allowed = info.options[key]
        if allowed is not None and value not in allowed:
            raise UserError(
                f"{case.framework} option {key}={value!r}; allowed: {', '.join(allowed)}"
            )
        if allowed is None and not _is_non_negative_number(value):
            raise UserError(f"{case.framework} option {key}={value!r}; expected a number >= 0")


def _is_non_negative_number(value: str) -> bool:
    try:
        return float(value) >= 0
    except ValueError:
        return False


def _require_int(what: str, value: object, low: int, high: int) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    _require(ok, what, value, f"an integer from {low} to {high}")


def _require_number(what: str, value: object, low: float, high: float) -> None:
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )
    _require(ok, what, value, f"a number from {low:g} to {high:g}")


def _require(ok: bool, what: str, value: object, allowed: str) -> None:
    if not ok:
        raise UserError(f"invalid {what} {value!r}; expected {allowed}")
