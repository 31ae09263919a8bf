"""Turn a suite and the command line into a validated list of cases.

Rules: with a suite (the default is `quick`), --workload/--framework/
--compile/--mode select among its cases, while --device, --batch-size and
--threads override them. With --workload and no suite, the cases are the
product of the options given (an ad-hoc matrix).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, TypeGuard, TypeVar  # noqa: TID251  # option values: their fields' types

from dlbench.errors import UserError
from dlbench.plan.endpoint_cases import endpoint_entry
from dlbench.plan.field_checks import require_known
from dlbench.plan.server_load_checks import (
    SERVER_FIELDS,
    refuse_server_options,
    server_options_given,
)
from dlbench.plan.suites import SuiteSpec, load_suite
from dlbench.plan.sweeps import (
    LOAD_SWEEPS,
    SWEEP_AXES,
    Sweep,
    entry_sweep,
    load_variants,
    param_variants,
)
from dlbench.plan.time_to_train_checks import TIME_TO_TRAIN_ONLY
from dlbench.plan.user_model_checks import MODEL_OPTIONS, require_model_file
from dlbench.plan.validate import hold_to_reader, made_case, validate_case, validate_settings
from dlbench.spec.case import (
    COMPILE_MODES,
    MODES,
    OFFICIAL_MIN_TIME_S,
    SCENARIOS,
    Case,
    Settings,
    available_cpus,
    default_threads,
)
from dlbench.spec.cli_options import cli_options, option_flag
from dlbench.spec.registry import ENDPOINT_FRAMEWORK, FRAMEWORKS, framework_info, precision_info
from dlbench.untyped import JSONObject, JSONValue
from dlbench.workloads import get_workload

T = TypeVar("T")

DEFAULT_SUITE = "quick"
# With --target-accuracy and no epoch count, train at most this many epochs
# (the pytorch/examples MNIST default).
TARGET_DEFAULT_EPOCHS = 14
# A suite's settings key (CliOption.setting_key) -> the Settings field
SETTING_FIELDS = {option.setting_key: name for name, option in cli_options(Settings)}


@dataclass(frozen=True)
class RunRequest:
    """What the user asked for; None or () means "not given".

    The options come from the Case and Settings fields' metadata
    (spec.cli_options; request_from_options reads them). A Case axis the
    planner has code of its own for (a filter, a sweep, DDP, a user model, the
    server's options) has a field here: the Case field's name, or the one
    metadata "axis" names (a repeatable option's values). Every other axis given
    lands in `axes` and overrides a suite entry's value as it is, so a new axis
    needs no line here. A field that no Case option sets names its own option
    in metadata "flag" where that is not its name.
    """

    suite: str | None = field(default=None, metadata={"flag": "SUITE"})
    workloads: tuple[str, ...] = field(default=(), metadata={"axis": "workload"})
    frameworks: tuple[str, ...] = field(default=(), metadata={"axis": "framework"})
    compiles: tuple[str, ...] = field(default=(), metadata={"axis": "compile"})
    modes: tuple[str, ...] = field(default=(), metadata={"axis": "mode"})
    scenarios: tuple[str, ...] = field(default=(), metadata={"axis": "scenario"})
    device: str | None = None
    batch_sizes: tuple[int, ...] = field(default=(), metadata={"axis": "batch_size"})
    threads: int | None = None
    interop_threads: int | None = None
    params: tuple[tuple[str, int], ...] = ()
    # --option KEY=VALUE: each one set, over a suite entry's options (not a product)
    options: tuple[tuple[str, str], ...] = ()
    # Case field -> value, for every other axis given (GENERIC_AXES)
    axes: tuple[tuple[str, object], ...] = ()
    # Settings field -> value, each from its own option
    settings: tuple[tuple[str, object], ...] = ()
    model: str | None = None
    endpoint: str | None = None  # --endpoint URL: its own case (plan.endpoint_cases)
    inputs: tuple[tuple[str, str], ...] = field(default=(), metadata={"flag": "--input"})
    input_data: str | None = None
    trust_model: bool = False
    precisions: tuple[str, ...] = field(default=(), metadata={"axis": "precision"})
    target_accuracy: float | None = None
    data_dir: str | None = None
    nproc: int | None = None  # None: no DDP; 1 or more: DDP under torchrun
    torchrun_args: tuple[str, ...] = ()
    # refuse what would only be flagged (threads beyond the CPUs available)
    strict: bool = False
    # serving (MLPerf LoadGen); the server's options reach server cases only
    loadgen: bool = False
    target_qps: float | None = None
    find_peak: bool = False
    latency_bound_ms: float | None = None
    latency_percentile: float | None = None
    streams: int | None = None
    samples_per_query: int | None = None
    # --sweep AXIS=V1,V2: several batch sizes or thread counts (plan.sweeps)
    sweeps: Sweep = field(default=(), metadata={"flag": "--sweep"})


# Case field -> the RunRequest field the planner reads it from
_REQUEST_FIELD = {f.metadata.get("axis", f.name): f.name for f in fields(RunRequest)}
# The Case fields with an option and no RunRequest field: `axes` carries them.
GENERIC_AXES = tuple(name for name, _ in cli_options(Case) if name not in _REQUEST_FIELD)


def request_from_options(
    given: Mapping[str, Any],  # argparse's values by field name (Any: each option's own type)
) -> RunRequest:
    """A RunRequest from option values by Case or Settings field name, as the fields'
    options (spec.cli_options) declare them; None, False and an empty list are "not
    given". The RunRequest fields no such option sets (suite, --sweep, ...) the caller
    adds with dataclasses.replace, whose keywords the type checker knows."""
    values: dict[str, Any] = {}  # Any: each RunRequest field's own type
    axes = []
    for name, option in cli_options(Case):
        value = given.get(name)
        if not _given(value):
            continue
        value = tuple(value) if option.repeat else value
        if name in _REQUEST_FIELD:
            values[_REQUEST_FIELD[name]] = value
        else:
            axes.append((name, value))
    settings = [(name, given[name]) for name, _ in cli_options(Settings) if _given(given.get(name))]
    return RunRequest(**values, axes=tuple(axes), settings=tuple(settings))


def _given(value: T | None) -> TypeGuard[T]:
    """An option's value was given: not None, not an unset switch, not an empty list
    (0 is a value: --seed 0)."""
    return value is not None and value is not False and value != []


def given_options(request: RunRequest) -> list[str]:
    """The options a request carries, by their command-line names (--resume refuses them)."""
    empty = RunRequest()
    given = [
        _request_flag(f)
        for f in fields(RunRequest)
        if f.name not in ("axes", "settings") and getattr(request, f.name) != getattr(empty, f.name)
    ]
    given += [option_flag(Case, name) for name, _ in request.axes]
    given += [option_flag(Settings, name) for name, _ in request.settings]
    return given


def _request_flag(request_field: Field[object]) -> str:
    """The option that sets a RunRequest field: its Case field's, else its own."""
    axis = request_field.metadata.get("axis", request_field.name)
    options = dict(cli_options(Case))
    if axis in options:
        return options[axis].long_flag
    return request_field.metadata.get("flag", "--" + request_field.name.replace("_", "-"))


@dataclass(frozen=True)
class Plan:
    suite: str
    settings: Settings
    cases: tuple[Case, ...]
    skipped: tuple[str, ...] = ()


def build_plan(request: RunRequest) -> Plan:
    """Validate everything; return the cases to run or raise UserError."""
    _check_filter_names(request)
    _check_serving_options(request)
    _check_sweeps(request)
    if request.model is None and (request.inputs or request.input_data or request.trust_model):
        raise UserError(MODEL_OPTIONS)
    endpoint = request.endpoint
    from_a_suite = False
    if request.model is not None:
        spec = _model_suite(request, request.model)
    elif endpoint is not None and request.suite is None:
        entry = endpoint_entry(request.workloads, request.frameworks)
        spec = SuiteSpec(f"endpoint:{endpoint}", f"requests to {endpoint}", {}, (entry,))
    elif request.suite is None and request.workloads:
        spec = SuiteSpec("adhoc", "from the command line", {}, (_adhoc_entry(request),))
    else:
        spec, from_a_suite = load_suite(request.suite or DEFAULT_SUITE), True
    settings = _settings(spec, request)
    cases = _validated(_expand(spec, request), from_a_suite)
    cases = list(dict.fromkeys(cases))  # drop duplicates, keep order
    _check_serving_used(request, settings, cases)
    if request.strict:
        _refuse_oversubscription(cases)
    _check_compiles_used(request, cases)
    if not cases:
        raise UserError(f"no case of suite {spec.name!r} matches the given filters")
    _check_cli_params(request, cases)
    _check_training_options(request, cases)
    explicit = (request.suite is None and bool(request.workloads)) or bool(request.frameworks)
    cases, skipped = _installed_only(cases, strict=explicit)
    if request.device is None:
        cases, gpu_notes = _gpu_cases_where_gpu(cases)
        skipped += gpu_notes
    if not cases:
        raise UserError("; ".join(skipped))
    return Plan(spec.name, settings, tuple(cases), tuple(skipped))


# A case as planning made it, and the load fields its kind had no place for
# (plan.validate.made_case), refused where validate_case refuses any other kind's field
Made = tuple[Case, dict[str, object]]


def _validated(expanded: list[tuple[str, Made]], from_a_suite: bool) -> list[Case]:
    """Each case (and a DDP case's 1-process twin) validated; a refusal of a suite's
    case names the entry it came from, as a refusal of the entry's own keys does."""
    cases = []
    for where, (case, strays) in expanded:
        for each in _with_single_process_baselines([case]):
            try:
                cases.append(validate_case(each, strays))
            except UserError as exc:
                if not from_a_suite:
                    raise
                raise UserError(f"{where}: {exc}") from None
    return cases


def _with_single_process_baselines(cases: list[Case]) -> list[Case]:
    """Each --nproc N case follows the same case in one plain process: T_N / (N x T_1)
    needs T_1 (with N = 1, the ratio is DDP's own cost)."""
    from dataclasses import replace

    out: list[Case] = []
    for case in cases:
        if case.is_ddp:
            out.append(replace(case, load=None))
        out.append(case)
    return out


def _check_sweeps(request: RunRequest) -> None:
    """A sweep is one way to give several values of an axis, not a second one."""
    axes = [axis for axis, _ in request.sweeps]
    for axis in set(axes):
        if axes.count(axis) > 1:
            raise UserError(f"--sweep {axis} given twice; list every value in one --sweep")
    if "batch" in axes and request.batch_sizes:
        raise UserError("--sweep batch and --batch-size both set the batch sizes; give one")
    if "threads" in axes and request.threads is not None:
        raise UserError("--sweep threads and --threads both set the threads; give one")
    given = dict(request.axes)
    for axis in set(axes) & set(LOAD_SWEEPS):
        flag = option_flag(Case, SWEEP_AXES[axis][0])
        if given.get(SWEEP_AXES[axis][0]) is not None:
            raise UserError(f"--sweep {axis} and {flag} both set the load; give one")


def _check_serving_options(request: RunRequest) -> None:
    """Server options need a server scenario; --samples-per-query is the multi-stream batch."""
    given = server_options_given(request, endpoint=request.endpoint is not None)
    if given and request.scenarios and "server" not in request.scenarios:
        refuse_server_options(given)
    if request.samples_per_query is None:
        return
    if request.scenarios and "multi-stream" not in request.scenarios:
        raise UserError(
            "--samples-per-query is the multi-stream query size: add --scenario multi-stream"
        )
    if request.batch_sizes:
        raise UserError(
            "--samples-per-query is the multi-stream batch: give it or --batch-size, not both"
        )


def _check_serving_used(request: RunRequest, settings: Settings, cases: list[Case]) -> None:
    """Options that only LoadGen cases take must reach one, or they would be ignored."""
    endpoint = any(c.framework == ENDPOINT_FRAMEWORK for c in cases)
    given = server_options_given(request, endpoint=endpoint)
    # an engine dlbench serves (vLLM) takes --find-peak and --streams too
    if given and not any(
        c.scenario == "server" or framework_info(c.framework).serves_openai for c in cases
    ):
        refuse_server_options(given, "; no case of this run is one")
    if request.samples_per_query is not None and not any(
        c.scenario == "multi-stream" for c in cases
    ):
        raise UserError("--samples-per-query goes with --scenario multi-stream; no case is one")
    if settings.official and not any(c.driven_by_loadgen for c in cases):
        raise UserError(
            "--official sets MLPerf's durations for LoadGen cases (--scenario server or "
            "multi-stream, or --loadgen); this run has none"
        )


def _refuse_oversubscription(cases: list[Case]) -> None:
    """--strict: more threads than CPUs is an error, not a flagged result."""
    cpus = available_cpus()
    for case in cases:
        if case.threads_in_use > cpus:
            ranks = case.threads_in_use // case.threads
            per_rank = f" in each of {ranks} processes" if ranks > 1 else ""
            raise UserError(
                f"--strict: {case.label()} asks for {case.threads} threads{per_rank}, but "
                f"{cpus} CPU(s) are available; use --threads {max(1, cpus // ranks)} or "
                "fewer (without --strict it runs, flagged oversubscribed)"
            )


def _check_filter_names(request: RunRequest) -> None:
    for name in request.workloads:
        get_workload(name)
    for name in request.frameworks:
        framework_info(name)
    for mode in request.compiles:
        if mode not in COMPILE_MODES:
            raise UserError(f"unknown compile mode {mode!r}; known: {', '.join(COMPILE_MODES)}")
    for mode in request.modes:
        require_known("mode", mode, MODES)
    for precision in request.precisions:
        precision_info(precision)
    for scenario in request.scenarios:
        require_known("scenario", scenario, SCENARIOS)


def _model_suite(request: RunRequest, model: str) -> SuiteSpec:
    """--model FILE (`model`): the file on every framework that can run it (or those
    asked for)."""
    from pathlib import Path

    from dlbench.workloads.user_model import frameworks_for

    if request.suite is not None or request.workloads:
        raise UserError("--model replaces the suite and --workload; give one or the other")
    require_model_file(model)
    path = Path(model).resolve()
    runs_on = frameworks_for(path)
    if not runs_on:
        from dlbench.workloads.model_format import FORMATS, model_format

        raise UserError(
            f"--model {model}: a {FORMATS[model_format(path)]}, which no framework "
            "dlbench drives loads (an AOTInductor package is built for one machine: give "
            "the torch.export program instead, with -c export)"
        )
    entry = {"workload": "user-model", "framework": list(request.frameworks or runs_on)}
    return SuiteSpec(f"model:{path.name}", f"user model {path}", {}, (entry,))


def _adhoc_entry(request: RunRequest) -> JSONObject:
    entry: JSONObject = {
        "workload": list(request.workloads),
        "framework": list(request.frameworks or ("torch",)),
    }
    if request.modes:
        entry["mode"] = list(request.modes)
    if request.scenarios:
        entry["scenario"] = list(request.scenarios)
    return entry


def _settings(spec: SuiteSpec, request: RunRequest) -> Settings:
    values: dict[str, Any] = {}  # Any: each Settings field's own type, for Settings(**values)
    options = dict(cli_options(Settings))
    for key, value in spec.settings.items():
        if key in SETTING_FIELDS:
            where, name = f"suite {spec.name}: settings.{key}", SETTING_FIELDS[key]
            hold_to_reader(_number(value, where), options[name], where)  # named where it is
            values[name] = value
    values.update(dict(request.settings))
    if values.get("official") and "min_time_s" not in dict(request.settings):
        values["min_time_s"] = OFFICIAL_MIN_TIME_S  # MLPerf's duration, over the suite's
    try:
        settings = Settings(**values)
    except TypeError as exc:
        raise UserError(f"suite {spec.name}: bad settings ({exc})") from None
    return validate_settings(settings)


def _number(value: JSONValue, where: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: expected a number, got {value!r}")
    return value


def _as_list(value: JSONValue, where: str) -> list[JSONValue]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise UserError(f"{where}: empty list")
    if any(v is None for v in values) and where.endswith(".framework"):
        raise UserError(f'{where}: empty value (for the null backend write "null" in quotes)')
    return values


def _expand(spec: SuiteSpec, request: RunRequest) -> list[tuple[str, Made]]:
    """Each entry's cases, with where the entry is (for the messages that refuse one)."""
    expanded: list[tuple[str, Made]] = []
    for index, entry in enumerate(spec.entries):
        where = f"suite {spec.name}: cases[{index}]"
        expanded.extend(
            (where, made) for made in _expand_entry(entry, spec.settings, request, where)
        )
    return expanded


def _expand_entry(
    entry: JSONObject, suite_settings: JSONObject, request: RunRequest, where: str
) -> list[Made]:
    """The cases of one suite entry: the product of its lists, filtered by the request."""
    sweep = {**entry_sweep(entry, where), **dict(request.sweeps)}  # the command line's win
    axes = itertools.product(
        _as_list(entry["workload"], f"{where}.workload"),
        _as_list(entry["framework"], f"{where}.framework"),
        _as_list(entry.get("mode"), f"{where}.mode"),
        list(request.batch_sizes)
        or list(sweep.get("batch", ()))
        or _as_list(entry.get("batch_size"), f"{where}.batch_size"),
        _threads(entry, suite_settings, request, sweep),
        _scenarios(entry, request, where),
        _precisions(entry, request, where),
        [request.device]
        if request.device is not None
        else _as_list(
            _first_given(entry.get("device"), suite_settings.get("device"), "auto"),
            f"{where}.device",
        ),
    )
    shared = _shared_fields(entry, suite_settings, request, where)
    entry_params = _mapping(entry.get("params"), f"{where}.params")
    cases = []
    for workload, framework, given_mode, batch, threads, scenario, precision, device in axes:
        mode = _default_mode(str(workload)) if given_mode is None else given_mode
        if not _selected(request, workload, framework, mode):
            continue
        base_params = {**entry_params, **_cli_params_for(str(workload), request)}
        if scenario == "multi-stream" and request.samples_per_query is not None:
            batch = request.samples_per_query
        accepted = get_workload(str(workload)).cpu_params
        variants = param_variants(base_params, sweep, accepted, str(workload))
        loads = load_variants(sweep, str(framework))
        for compile_mode, params, load in itertools.product(
            _compile_modes(entry, str(workload), str(framework), request, where), variants, loads
        ):
            cases.append(
                made_case(dict(
                    workload=workload,
                    framework=framework,
                    compile=compile_mode,
                    mode=mode,
                    batch_size=batch,
                    threads=threads,
                    scenario=scenario,
                    **_serving_fields(scenario, entry, request, framework),
                    precision=precision,
                    device=device,
                    **_training_fields(str(workload), params, request),
                    **_model_fields(request),
                    **{**shared, **load},
                ))
            )  # fmt: skip
    return cases


def _shared_fields(
    entry: JSONObject, suite_settings: JSONObject, request: RunRequest, where: str
) -> dict[str, object]:
    """The Case fields every case of one suite entry shares. A generic axis takes the
    command line's value, else the entry's, else the Case default."""
    given = dict(request.axes)
    # the command line's --option KEY=VALUE over the entry's options, key by key
    options = {**_mapping(entry.get("options"), f"{where}.options"), **dict(request.options)}
    generic = {name: _first_given(given.get(name), entry.get(name)) for name in GENERIC_AXES}
    return {
        **{name: value for name, value in generic.items() if value is not None},
        "nproc": request.nproc or 1,
        "ddp": request.nproc is not None,
        "torchrun_args": request.torchrun_args,
        "interop_threads": _first_given(
            request.interop_threads, suite_settings.get("interop_threads")
        ),
        "options": tuple(sorted((k, str(v)) for k, v in options.items())),
        **({"endpoint": request.endpoint} if request.endpoint is not None else {}),
    }


def _threads(
    entry: JSONObject,
    suite_settings: JSONObject,
    request: RunRequest,
    sweep: dict[str, tuple[int, ...]],
) -> list[JSONValue]:
    """--threads N, else a threads sweep, else the entry's or the suite's count, else
    every CPU available (shared out between the processes of a DDP case on a CPU)."""
    if request.threads is not None:
        return [request.threads]
    if "threads" in sweep:
        return list(sweep["threads"])
    default = max(1, default_threads() // (request.nproc or 1))
    return [_first_given(entry.get("threads"), suite_settings.get("threads"), default)]


def _serving_fields(scenario: JSONValue, entry: JSONObject, request: RunRequest,
                    framework: JSONValue) -> JSONObject:  # fmt: skip
    """--loadgen for every case; the server's options (from the command line, else
    the suite entry) for server cases only, so one entry may list several scenarios;
    --find-peak for an endpoint's case too (its own search), and all of them for an
    engine dlbench serves (its --streams and search; the others it refuses)."""
    fields = {"loadgen": request.loadgen or entry.get("loadgen", False)}
    if framework == ENDPOINT_FRAMEWORK:
        fields["find_peak"] = request.find_peak or entry.get("find_peak", False)
    served = isinstance(framework, str) and framework in FRAMEWORKS and (
        FRAMEWORKS[framework].serves_openai)  # fmt: skip
    if scenario == "server" or served:
        for name in SERVER_FIELDS:
            given = getattr(request, name)
            fields[name] = _first_given(None if given is False else given, entry.get(name))
        fields["find_peak"] = fields["find_peak"] or False
    return fields


def _precisions(entry: JSONObject, request: RunRequest, where: str) -> list[JSONValue]:
    """Like scenarios: --precision filters declared precisions, else sets them."""
    if "precision" not in entry:
        return list(request.precisions) or ["fp32"]
    declared = _as_list(entry["precision"], f"{where}.precision")
    if not request.precisions:
        return declared
    return [p for p in declared if p in request.precisions]


def _training_fields(workload: str, params: JSONObject, request: RunRequest) -> dict[str, object]:
    """--target-accuracy, --data-dir (and the epoch cap a target implies) for epoch workloads."""
    if not get_workload(workload).epoch_based:
        return {"params": tuple(sorted(params.items()))}
    if request.target_accuracy is not None and "epochs" not in params:
        params = {**params, "epochs": TARGET_DEFAULT_EPOCHS}
    return {
        "params": tuple(sorted(params.items())),
        "target_accuracy": request.target_accuracy,
        "data_dir": request.data_dir,
    }


def _compile_modes(
    entry: JSONObject, workload: str, framework: str, request: RunRequest, where: str
) -> list[JSONValue]:
    """The entry's compile modes (default: the framework's), narrowed by --compile.

    A --compile value applies to the frameworks that have that mode, so
    `-f torch -f onnxruntime -c script -c default` means torch[script] and
    onnxruntime[default].
    """
    info = framework_info(framework)
    if "compile" in entry:
        modes = _as_list(entry["compile"], f"{where}.compile")
        return [m for m in modes if not request.compiles or m in request.compiles]
    allowed = get_workload(workload).compile_modes_on(framework, info.compile_modes)
    if request.compiles:
        return [m for m in request.compiles if m in allowed]
    return [info.default_compile if info.default_compile in allowed else allowed[0]]


def _check_compiles_used(request: RunRequest, cases: list[Case]) -> None:
    used = {c.compile for c in cases}
    for mode in request.compiles:
        if mode not in used:
            pairs = sorted({(c.workload, c.framework) for c in cases}) or [
                (w, f) for w in request.workloads for f in request.frameworks
            ]
            allowed = "; ".join(
                f"{w} on {f}: "
                + ", ".join(get_workload(w).compile_modes_on(f, framework_info(f).compile_modes))
                for w, f in pairs
            )
            raise UserError(f"compile mode {mode!r} matches none of the cases ({allowed})")


def _cli_params_for(workload: str, request: RunRequest) -> dict[str, int]:
    """--param values go to the workloads that have that parameter (add, gemm: size)."""
    accepted = get_workload(workload).cpu_params
    return {key: value for key, value in request.params if key in accepted}


def _check_training_options(request: RunRequest, cases: list[Case]) -> None:
    if request.target_accuracy is None and request.data_dir is None:
        return
    if not any(get_workload(c.workload).epoch_based for c in cases):
        names = ", ".join(sorted({c.workload for c in cases}))
        raise UserError(f"{TIME_TO_TRAIN_ONLY}; this run has {names}")


def _check_cli_params(request: RunRequest, cases: list[Case]) -> None:
    for key, _ in request.params:
        if not any(key in get_workload(c.workload).cpu_params for c in cases):
            names = sorted({c.workload for c in cases})
            own = ", ".join(sorted({p for n in names for p in get_workload(n).cpu_params}))
            raise UserError(
                f"--param {key}: no workload of this run ({', '.join(names)}) has it; "
                f"their parameters: {own or 'none'}"
            )


def _scenarios(entry: JSONObject, request: RunRequest, where: str) -> list[JSONValue]:
    """An entry's declared scenarios, filtered by --scenario; undeclared ones take --scenario."""
    if "scenario" not in entry:
        return list(request.scenarios) or [None]
    declared = _as_list(entry["scenario"], f"{where}.scenario")
    if not request.scenarios:
        return declared
    return [s for s in declared if s in request.scenarios]


def _model_fields(request: RunRequest) -> dict[str, object]:
    if request.model is None:
        return {}
    from pathlib import Path

    return {
        "model": str(Path(request.model).resolve()),
        "inputs": request.inputs,
        "input_data": str(Path(request.input_data).resolve()) if request.input_data else None,
        "trust_model": request.trust_model,
    }


def _default_mode(workload: str) -> str:
    """Inference where the workload has it; time-to-train workloads only train."""
    modes = get_workload(workload).modes
    return "infer" if "infer" in modes else modes[0]


def _first_given(*values: T | None) -> T | None:
    """The first value that is not None (0 and "" are values, and get validated)."""
    return next((v for v in values if v is not None), None)


def _selected(request: RunRequest, workload: str, framework: str, mode: str) -> bool:
    return (
        (not request.workloads or workload in request.workloads)
        and (not request.frameworks or framework in request.frameworks)
        and (not request.modes or mode in request.modes)
    )


def _mapping(value: JSONValue, where: str) -> JSONObject:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a mapping, got {value!r}")
    return value


def _gpu_cases_where_gpu(cases: list[Case]) -> tuple[list[Case], list[str]]:
    """A suite's cuda cases run where a GPU exists and are skipped (with a note) elsewhere."""
    from dlbench.measure.devices import gpu_visible

    on_gpu = [c for c in cases if c.device.startswith("cuda")]
    if not on_gpu or gpu_visible():
        return cases, []
    note = f"no GPU visible here: {len(on_gpu)} case(s) the suite runs on cuda are left out"
    return [c for c in cases if not c.device.startswith("cuda")], [note]


def _installed_only(cases: list[Case], strict: bool) -> tuple[list[Case], list[str]]:
    """Drop cases of frameworks that are not installed; an explicit ask is an error."""
    missing = {
        c.framework for c in cases if framework_info(c.framework).installed_version() is None
    }
    notes = [
        f"framework {name!r} is not ready here: {', '.join(framework_info(name).missing())} "
        f"missing; install it with: {framework_info(name).install_hint}"
        for name in sorted(missing)
    ]
    if missing and strict:
        raise UserError(notes[0])
    return [c for c in cases if c.framework not in missing], notes
