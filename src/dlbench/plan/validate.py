"""Validation of cases and settings, at the edge: before anything runs.

It has no side effects: it reads the registry tables and the workloads'
parameter rules. Every error names the field, the bad value and what is allowed,
and is raised as UserError (exit code 2 in the CLI).

Here are the checks every case has, the one refusal of a part's fields that the case's
loop kind does not take (spec.loop_kinds: each kind's `takes`), and the entry
points of the loop kinds' checks (spec.loop_kinds names them). The values of a
case's part are checked in its own module, beside its fields' meaning: the user model
(plan.user_model_checks), time-to-train (time_to_train_checks), the DDP launch
(ddp_checks), LoadGen's load and scenario (server_load_checks), an endpoint's load and
SLOs (endpoint_cases), a served engine (served_engine_cases) and a generation server
(token_server_cases).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import fields

from dlbench.errors import UserError
from dlbench.plan.ddp_checks import validate_ddp_launch
from dlbench.plan.endpoint_cases import validate_endpoint_case
from dlbench.plan.field_checks import options_go, require_known
from dlbench.plan.server_load_checks import validate_scenario, validate_serving
from dlbench.plan.time_to_train_checks import validate_time_to_train, with_data_digest
from dlbench.plan.token_server_cases import refuse_other_scenarios, require_offline_batch
from dlbench.plan.user_model_checks import validate_user_model, with_user_model_digests
from dlbench.spec.case import (
    DEVICE_HELP,
    DEVICE_PATTERN,
    OFFICIAL_MIN_TIME_S,
    Case,
    Settings,
)
from dlbench.spec.cli_options import CliOption, NumberReader, cli_options
from dlbench.spec.loads import FieldsNotTaken
from dlbench.spec.loop_kinds import (
    LOOP_KINDS,
    WINDOWED_WORKLOADS,
    LoopKind,
    loop_kind,
)
from dlbench.spec.record_dict import field_default, flat_fields, holds_default
from dlbench.spec.registry import (
    CEILING_OPTION,
    FRAMEWORKS,
    LLM_WORKLOADS,
    PRECISIONS,
    FrameworkInfo,
    framework_info,
    frameworks_having,
    precision_info,
)
from dlbench.workloads import get_workload
from dlbench.workloads.base import Workload
from dlbench.workloads.memory import check_case_memory


def validate_settings(settings: Settings) -> Settings:
    """Reject stop rules that could never finish, overflow, or make no sense: each
    setting held to its option's reader, and --official to MLPerf's duration."""
    _hold_numbers_to_their_readers(settings)
    if settings.official and settings.min_time_s < OFFICIAL_MIN_TIME_S:
        raise UserError(
            f"--official runs last at least MLPerf's {OFFICIAL_MIN_TIME_S:g} s; "
            f"--min-time {settings.min_time_s:g} is shorter (drop it, or drop --official)"
        )
    return settings


def made_case(flat: Mapping[str, object]) -> tuple[Case, dict[str, object]]:
    """The case of these flat fields, as planning makes it: without the load fields its
    kind's record has no place for, which come back beside it (name -> value) for
    validate_case to refuse where it refuses any other kind's field."""
    try:
        return Case.of(**flat), {}
    except FieldsNotTaken as exc:
        case = Case.of(**{name: value for name, value in flat.items() if name not in exc.given})
        return case, exc.given


def validate_case(case: Case, strays: Mapping[str, object] | None = None) -> Case:
    """Check every field against the registry; return the case with its files' digests.
    `strays`: the load fields its kind has no place for (made_case), refused after the
    checks every case has, as a user model's field on a kind that runs none is."""
    strays = strays or {}
    info = framework_info(case.framework)
    workload = get_workload(case.workload)
    _hold_numbers_to_their_readers(case, strays)  # every check below may count with them
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
    validate_scenario(case)
    if not isinstance(case.device, str) or not DEVICE_PATTERN.fullmatch(case.device):
        raise UserError(f"unknown device {case.device!r}; allowed: {DEVICE_HELP}")
    if (
        case.batch_size is not None
        and info.max_batch is not None
        and case.batch_size > info.max_batch
    ):
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
    workload.validate_params(dict(case.params))
    _validate_options(case, info)
    # the parts whose checks come before the refusal of other kinds' fields: a user's
    # model, which the user-model workload needs (plan.user_model_checks), and a DDP
    # launch, which says what it runs before any field of another load (ddp_checks)
    validate_user_model(case, info)
    validate_ddp_launch(case, workload.epoch_based, info.ddp_compiles)
    _validate_framework_axes(case, info, workload)
    kind = loop_kind(case)
    _refuse_fields_not_taken(case, kind, strays)
    _refuse_options_of_other_kinds(case, kind)
    return kind.checks_function()(case, info)


def _hold_numbers_to_their_readers(
    record: Case | Settings, strays: Mapping[str, object] | None = None
) -> None:
    """A number a suite entry or a case file gives, held to its option's reader as the
    command line's text is (--ttft-ms: a number > 0), so no value skips the option's
    rule by coming from a file; a case's `strays` (load fields its kind has no place
    for, refused later) too, each in its place: out of range says so first."""
    for name, option in cli_options(type(record)):
        if isinstance(record, Case):
            given = strays or {}
            hold_to_reader(given[name] if name in given else record.value_of(name), option, name)
        else:  # a setting, by its key in a suite
            hold_to_reader(getattr(record, name), option, option.setting_key)


def hold_to_reader(value: object, option: CliOption, key: str) -> None:
    """A UserError naming `key`, the value and the option, where the option reads
    numbers and refuses this one (None: not given)."""
    if value is None or not isinstance(option.parse, NumberReader):
        return
    try:
        option.parse.check(value)
    except ValueError as exc:
        raise UserError(f"{key} {value!r} ({option.long_flag}): {exc}") from None


def _refuse_options_of_other_kinds(case: Case, kind: LoopKind) -> None:
    """A framework option that selects a loop kind (spec.loop_kinds: `option`), on a
    case another kind runs, whose rule comes first (spec.loads.kind_name): it would be
    in the case's label and key, and measure nothing."""
    options = dict(case.options)
    for other in LOOP_KINDS:
        if other is not kind and other.option is not None and other.option in options:
            raise UserError(
                f"--option {other.option}={options[other.option]} selects the {other.name} "
                f"loop ({other.measures}); {case.workload} on {case.framework} runs the "
                f"{kind.name} loop ({kind.measures})"
            )


def _refuse_fields_not_taken(case: Case, kind: LoopKind, strays: Mapping[str, object]) -> None:
    """The fields given where the case's kind of loop takes none of them (spec.loop_kinds:
    `takes`): a user model's on a kind that runs none, and the load fields its kind's
    record had no place for (`strays`), named with the kinds that do (the first field's
    kinds, and every other given field that goes with them)."""
    given = [
        name
        for name, f in PART_FIELDS
        if name in strays
        or (name not in kind.takes and not holds_default(case.value_of(name), field_default(f)))
    ]
    if not given:
        return
    hows = _kinds_taking(given[0])
    named = [_flag(name) for name in given if _kinds_taking(name) == hows]
    where = " or ".join(filter(None, (", ".join(hows[:-1]), hows[-1])))
    load = f"; its load: {kind.load_how}" if kind.load_how else ""
    raise UserError(
        f"{options_go(named)} with {where}; {case.workload} on {case.framework} runs the "
        f"{kind.name} loop ({kind.measures}){load}"
    )


def _kinds_taking(name: str) -> list[str]:
    return [kind.how for kind in LOOP_KINDS if name in kind.takes]


def _flag(name: str) -> str:
    """A field's option (--target-qps), or its name where no option sets it (a digest
    planning fills in, seen in a case file)."""
    option = PART_OPTIONS.get(name)
    return option.long_flag if option is not None else PART_FLAGS.get(name, name)


# The fields of the case's parts (spec.case_parts) by flat name, and their options
_CASE_OWN = frozenset(f.name for f in fields(Case))
PART_FIELDS = tuple((name, f) for name, f in flat_fields(Case) if name not in _CASE_OWN)
PART_OPTIONS = {name: option for name, option in cli_options(Case) if name not in _CASE_OWN}
# a part's field whose option cli.parser declares itself (spec.case_parts says why)
PART_FLAGS = {"inputs": "--input"}


def checked_load(case: Case, info: FrameworkInfo) -> Case:
    """The checks of the loop kinds that take the step loop's load, LoadGen's scenarios
    or an endpoint's (spec.loop_kinds)."""
    return _checked_serving(case, None)


def checked_generation(case: Case, info: FrameworkInfo) -> Case:
    """Whole generations timed: no LoadGen scenario (a generation under LoadGen is the
    generation server's kind, selected by --scenario server or --loadgen), then what
    every case with a load is checked for."""
    refuse_other_scenarios(case)
    require_offline_batch(case)
    return checked_load(case, info)


def checked_generation_server(case: Case, info: FrameworkInfo) -> Case:
    """A generation engine as a server under LoadGen (plan.token_server_cases): the
    endpoint's options refused but its SLO's, which bound its tokens."""
    return _checked_serving(case, info)


def _checked_serving(case: Case, token_server: FrameworkInfo | None) -> Case:
    """The options of the other kinds refused, the case's memory, its serving defaults
    and its files' digests (what it measured is their content, not their path)."""
    case = validate_endpoint_case(case)
    check_case_memory(case)  # sizes from --param, -b, --input and --input-data
    case = validate_serving(case, token_server)
    return with_data_digest(with_user_model_digests(case))


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
        vocabulary = tuple(option.vocabulary or ())
        value = require_known(option.noun_for(name), case.value_of(name), vocabulary)
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


def checked_ceiling(case: Case, info: FrameworkInfo) -> Case:
    """A kernel timed in windows (`dlbench roofline`'s option), then what every case
    with a load is checked for."""
    if case.workload not in WINDOWED_WORKLOADS:
        raise UserError(
            f"option {CEILING_OPTION} is for the {', '.join(WINDOWED_WORKLOADS)} workloads, "
            f"not {case.workload!r}"
        )
    return checked_load(case, info)


def checked_time_to_train(case: Case, info: FrameworkInfo) -> Case:
    """The time-to-train kind's own options (plan.time_to_train_checks), then what every
    case with a load is checked for."""
    validate_time_to_train(case)
    return checked_load(case, info)


def _validate_options(case: Case, info: FrameworkInfo) -> None:
    """Options belong to the backend whose entry lists them (the null backend's faults)."""
    if case.options and not info.options:
        raise UserError(
            f"options {dict(case.options)}: {case.framework!r} takes none; frameworks "
            f"with options of their own (--option KEY=VALUE): {frameworks_having('options')}"
        )
    for key, value in case.options:
        require_known(f"{case.framework}-backend option", key, tuple(info.options))
        allowed = info.options[key]
        if isinstance(allowed, tuple):
            if value not in allowed:
                raise UserError(
                    f"{case.framework} option {key}={value!r}; allowed: {', '.join(allowed)}"
                )
            continue
        try:
            allowed(value)
        except ValueError as exc:
            raise UserError(f"{case.framework} option {key}={value!r}: {exc}") from None
