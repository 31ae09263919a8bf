"""Each case axis and setting declares its option once, on its field (spec.cli_options).

The run parser, the RunRequest, the options --resume refuses and a suite's
settings keys are all derived from that metadata, so a new axis is its field
with its option (spec/case.py), its check (plan/validate.py) and its use (the
worker or a backend): nothing in cli/ or the plan builder names it. An axis
only some frameworks implement (its option marked by_framework) has no check
of its own either: plan.validate checks it against each framework's registry
entry, so it is its field, that entry (spec/registry.py) and its use.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import fields, replace
from pathlib import Path

import pytest
from factories import make_case

import dlbench
from dlbench.cli.parser import build_parser
from dlbench.cli.run_commands import request_from_args
from dlbench.errors import UserError
from dlbench.plan.build import GENERIC_AXES, SETTING_FIELDS, RunRequest, given_options
from dlbench.plan.validate import validate_case
from dlbench.spec import registry
from dlbench.spec.case import Case, Settings
from dlbench.spec.cli_options import CliOption, cli_options
from dlbench.spec.record_dict import flat_fields
from dlbench.spec.registry import FRAMEWORKS, AxisValues

# Case fields whose values other than the default only some frameworks implement
FRAMEWORK_AXES = [
    (name, f.default, f.metadata["cli"])
    for name, f in flat_fields(Case)
    if "cli" in f.metadata and f.metadata["cli"].by_framework
]
# each such axis's values other than its default, on each framework
FRAMEWORK_AXIS_VALUES = [
    (name, value, framework)
    for name, default, option in FRAMEWORK_AXES
    for value in option.vocabulary
    if value != default
    for framework in FRAMEWORKS
]
FIELD_OPTIONS = [
    *(("Case", name, option) for name, option in cli_options(Case)),
    *(("Settings", name, option) for name, option in cli_options(Settings)),
]


def run_parser() -> argparse.ArgumentParser:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices["run"]


def run_actions() -> dict[str, argparse.Action]:
    return {action.dest: action for action in run_parser()._actions}


def sample_text(option: CliOption) -> str:
    """A value the option accepts: its vocabulary's first name, else the first of a
    few texts that its reader takes (no table of fields: a new axis is covered too)."""
    if option.vocabulary is not None:
        return next(iter(option.vocabulary))
    for text in ("1", "99", "size=1", "x", "http://localhost:8000"):
        try:
            option.parse(text) if option.parse is not None else text
        except ValueError:
            continue
        return text
    raise AssertionError(f"no sample value for {option.long_flag}")


@pytest.mark.parametrize(("record", "name", "option"), FIELD_OPTIONS)
def test_every_field_option_is_in_the_run_parser_as_its_metadata_declares(record, name, option):
    action = run_actions()[name]  # its value lands in args.<field name>
    assert tuple(action.option_strings) == option.flags
    assert option.long_flag.startswith("--")
    assert action.help.startswith(option.help)
    assert isinstance(action, argparse._AppendAction) == option.repeat
    assert isinstance(action, argparse._StoreTrueAction) == option.switch
    vocabulary = None if option.vocabulary is None else tuple(option.vocabulary)
    assert action.choices == vocabulary


def test_an_option_outside_its_vocabulary_is_refused_naming_the_option_and_the_names():
    for _, name, option in FIELD_OPTIONS:
        if option.vocabulary is None:
            continue
        noun = option.noun or name.replace("_", " ")
        with pytest.raises(UserError) as refused:
            run_parser().parse_args([option.long_flag, "no-such-name"])
        message = str(refused.value)
        assert option.long_flag in message and f"unknown {noun} 'no-such-name'" in message
        assert ", ".join(option.vocabulary) in message


def test_every_option_reaches_the_run_request_and_what_resume_refuses():
    argv: list[str] = []
    for _, _, option in FIELD_OPTIONS:
        argv += [option.long_flag] if option.switch else [option.long_flag, sample_text(option)]
    args = run_parser().parse_args(argv)
    request = request_from_args(args)
    request_fields = {f.metadata.get("axis", f.name): f.name for f in fields(RunRequest)}
    for name, option in cli_options(Case):
        value = getattr(args, name)
        expected = tuple(value) if option.repeat else value
        if name in GENERIC_AXES:
            assert dict(request.axes)[name] == expected
        else:
            assert getattr(request, request_fields[name]) == expected
    settings = cli_options(Settings)
    assert request.settings == tuple((name, getattr(args, name)) for name, _ in settings)
    assert set(given_options(request)) >= {option.long_flag for _, _, option in FIELD_OPTIONS}


def test_an_axis_without_planner_code_is_generic_and_takes_one_value():
    """A repeatable option is a filter or a product of cases: that needs the plan
    builder's own code (and a RunRequest field); any other axis needs none."""
    own = {f.metadata.get("axis", f.name) for f in fields(RunRequest)}
    for name, option in cli_options(Case):
        assert (name in own) != (name in GENERIC_AXES)
        if name in GENERIC_AXES:
            assert not option.repeat, f"{name}: a repeatable axis needs a RunRequest field"
    assert "transfer" in GENERIC_AXES


def test_a_suites_settings_keys_are_the_settings_option_names():
    # derived from the flags, so renaming a flag renames a suite key: suite files
    # written for these names must keep working
    assert SETTING_FIELDS == {
        "min_time": "min_time_s",
        "min_iters": "min_iters",
        "warmup": "warmup_iters",
        "timeout": "timeout_s",
        "seed": "seed",
        "repeat": "repeat",
        "official": "official",
        # in the map as every setting is, though no suite file may set it (SETTING_KEYS)
        "label": "label",
    }


def test_a_generic_axis_is_named_only_by_its_field_its_check_and_its_use():
    """--transfer is such an axis: the parser, RunRequest and the plan builder get it
    from Case's metadata, so no module of cli/ or plan/ but the validation names it."""
    source = Path(dlbench.__file__).parent
    for name in GENERIC_AXES:
        flag = dict(cli_options(Case))[name].long_flag
        pattern = re.compile(rf"\b{name}\b|{re.escape(flag)}\b")
        named = sorted(
            path.relative_to(source).as_posix()
            for room in ("cli", "plan")
            for path in (source / room).rglob("*.py")
            if pattern.search(path.read_text(encoding="utf-8"))
        )
        # the validation of a case, of an endpoint's (plan.endpoint_cases) and of a
        # generation server's (plan.token_server_cases: its SLO bounds), of an engine
        # dlbench serves (plan.served_engine_cases: the endpoint's options it refuses);
        # and the sweeps, which name the axes --sweep takes (an endpoint's users and rate)
        checks = {"plan/validate.py", "plan/endpoint_cases.py", "plan/token_server_cases.py",
                  "plan/served_engine_cases.py", "plan/sweeps.py"}  # fmt: skip
        assert set(named) <= checks, f"{name} is spelled in {named}"


def test_transfer_is_a_per_framework_axis():
    assert "transfer" in [name for name, _, _ in FRAMEWORK_AXES]


def plain_case(framework: str, **values: object) -> Case:
    """mlp (the LLM engines: their first workload) in the framework's default compile mode."""
    info = FRAMEWORKS[framework]
    workload = "mlp" if info.supports("mlp", "infer") else info.supported_workloads()[0]
    if info.max_batch is not None:  # llama-cpp: one sequence
        values.setdefault("batch_size", info.max_batch)
    if framework == registry.ENDPOINT_FRAMEWORK:  # the client needs its server
        values.setdefault("endpoint", "http://localhost:8000")
        values.setdefault("device", "auto")
    return make_case(framework=framework, workload=workload, compile=info.default_compile,
                     **values)  # fmt: skip


@pytest.mark.parametrize(("name", "value", "framework"), FRAMEWORK_AXIS_VALUES)
def test_a_per_framework_axis_value_runs_where_the_registry_lists_it(name, value, framework):
    """The one rule for every axis marked by_framework: a value other than the default
    passes on a framework whose entry lists it, and elsewhere is refused naming the
    option, the value and the frameworks that have it."""
    validate_case(plain_case(framework))  # the default runs everywhere
    listed = FRAMEWORKS[framework].axes.get(name)
    case = plain_case(framework, **{name: value})
    if listed is not None and value in listed.values:
        validate_case(case)
        return
    with pytest.raises(UserError) as refused:
        validate_case(case)
    message = str(refused.value)
    option = dict(cli_options(Case))[name]
    assert message.startswith(f"{option.long_flag} {value} ({option.vocabulary[value]})")
    having = [
        n for n, info in FRAMEWORKS.items() if value in getattr(info.axes.get(name), "values", ())
    ]
    assert all(n in message for n in having)
    assert message.endswith(f"not {case.workload} on {framework}")


@pytest.mark.parametrize(("name", "value", "framework"), FRAMEWORK_AXIS_VALUES)
def test_listing_a_value_in_a_frameworks_entry_is_all_it_takes(monkeypatch, name, value, framework):
    info = FRAMEWORKS[framework]
    monkeypatch.setitem(
        registry.FRAMEWORKS, framework, replace(info, axes={name: AxisValues((value,))})
    )
    case = plain_case(framework, **{name: value})
    validate_case(case)
    monkeypatch.setitem(
        registry.FRAMEWORKS,
        framework,
        replace(info, axes={name: AxisValues((value,), not_for=(case.workload,))}),
    )
    with pytest.raises(UserError) as refused:
        validate_case(case)
    message = str(refused.value)
    assert f"{framework} except {case.workload}" in message
    assert message.endswith(f"not {case.workload} on {framework}")


def test_each_frameworks_axes_are_per_framework_fields_and_their_values():
    options = {name: (default, option) for name, default, option in FRAMEWORK_AXES}
    for framework, info in FRAMEWORKS.items():
        for name, listed in info.axes.items():
            assert name in options, f"{framework}: {name} is no by_framework Case field"
            default, option = options[name]
            assert listed.values and set(listed.values) <= set(option.vocabulary) - {default}
            assert set(listed.not_for) <= set(registry.WORKLOADS), framework


def test_a_per_framework_axis_is_named_by_no_module_of_cli_or_plan():
    """Its check is the generic rule: plan.validate reads it from the field and the registry."""
    source = Path(dlbench.__file__).parent
    for name, _, option in FRAMEWORK_AXES:
        pattern = re.compile(rf"\b{name}\b|{re.escape(option.long_flag)}\b")
        named = [
            path.relative_to(source).as_posix()
            for room in ("cli", "plan")
            for path in (source / room).rglob("*.py")
            if pattern.search(path.read_text(encoding="utf-8"))
        ]
        assert named == [], f"{name} is spelled in {named}"


def test_a_per_framework_option_says_what_each_value_means():
    """The error that refuses a value quotes its meaning: an option without them is
    refused when Case is defined, not when a user first meets that error."""
    with pytest.raises(ValueError, match="--x: a by_framework option maps values to meanings"):
        CliOption(("--x",), "help", vocabulary=("a", "b"), by_framework=True)
    CliOption(("--x",), "help", vocabulary={"a": "one", "b": "two"}, by_framework=True)
