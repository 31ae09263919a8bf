"""The loop kinds' table: each case's kind, and every runner and check it names."""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import replace

import pytest

from dlbench.spec import record_dict
from dlbench.spec.case import Case
from dlbench.spec.case_parts import DdpLaunch, TimeToTrain
from dlbench.spec.loads import (
    KIND_LOADS,
    FieldsNotTaken,
    ForeignServerLoad,
    GenerationServerLoad,
    LoadGenLoad,
    PeakSearch,
    ServedEngineLoad,
    SloBounds,
)
from dlbench.spec.loop_kinds import (
    LOOP_KINDS,
    TORCHRUN,
    case_load,
    load_part,
    loop_kind,
    searches_peak,
)
from dlbench.spec.registry import KIND_OPTIONS


@pytest.mark.parametrize("kind", LOOP_KINDS, ids=lambda kind: kind.name)
def test_every_kind_names_a_runner_and_checks_of_the_shapes_their_callers_use(kind):
    runner = inspect.signature(kind.runner_function())
    assert list(runner.parameters)[:3] == ["backend", "job", "settings"], kind.runner
    assert all(p.default is not p.empty for p in list(runner.parameters.values())[3:])
    checks = inspect.signature(kind.checks_function())
    assert list(checks.parameters) == ["case", "info"], kind.checks
    assert kind.measures


def planned(**fields: object) -> Case:
    """A case made and checked as planning does (plan.build): a load's field its kind
    has no place for is kept apart where the case is made, and refused by validate_case
    where it refuses any other kind's field."""
    from dlbench.plan.validate import made_case, validate_case

    return validate_case(*made_case(fields))


def kind_of(workload: str, framework: str, **fields: object) -> str:
    compile_mode = "default" if framework != "torch" else "eager"
    case = Case.of(workload=workload, framework=framework, compile=compile_mode, **fields)
    return loop_kind(case).name


def test_each_case_runs_the_first_kind_that_selects_it():
    # a DDP case's ranks run their own loop, in processes torchrun starts
    assert kind_of("mlp", "torch", mode="train", nproc=2, ddp=True) == "ddp"
    assert kind_of("mnist-train", "torch", mode="train", nproc=2, ddp=True) == "ddp"
    assert [kind.name for kind in LOOP_KINDS if kind.launcher == TORCHRUN] == ["ddp"]
    assert kind_of("mnist-train", "torch", mode="train") == "time-to-train"
    assert kind_of("llm-requests", "endpoint", endpoint="http://127.0.0.1:1") == "endpoint"
    # vLLM serves a decoder workload: its own server, not a generation loop
    assert kind_of("llm-tiny", "vllm") == "served-engine"
    assert kind_of("llm-tiny", "torch", scenario="server") == "generation-server"
    assert kind_of("llm-tiny", "onnxruntime-genai") == "generation"
    assert kind_of("gemm", "torch", options=(("ceiling", "burst"),)) == "ceiling"
    # LoadGen's scenarios run around the prepared step: a kind of their own
    assert kind_of("mlp", "onnxruntime", scenario="server") == "loadgen"
    assert kind_of("mlp", "onnxruntime", scenario="single-stream", loadgen=True) == "loadgen"
    assert kind_of("mlp", "onnxruntime", scenario="single-stream") == "steps"
    assert kind_of("mlp", "torch") == "steps"
    assert len({kind.name for kind in LOOP_KINDS}) == len(LOOP_KINDS)
    # every name a rule gives, a record names and an option selects has its entry
    assert set(KIND_LOADS) | set(KIND_OPTIONS.values()) < {kind.name for kind in LOOP_KINDS}


def test_every_field_of_a_part_is_taken_by_some_kind_and_named_by_its_how():
    from dlbench.plan.validate import PART_FIELDS

    taken = set().union(*(kind.takes for kind in LOOP_KINDS))
    assert {name for name, _ in PART_FIELDS} <= taken
    # a kind takes only fields of parts: the ones every case has are every kind's
    assert taken <= {name for name, _ in PART_FIELDS}
    assert all(kind.how for kind in LOOP_KINDS)


@pytest.mark.parametrize(
    ("workload", "framework", "fields", "refused"),
    [
        ("llm-tiny", "torch", {"target_accuracy": 0.9}, "--target-accuracy goes with a time-to"),
        ("mlp", "onnxruntime", {"ttft_ms": 50.0}, "--ttft-ms goes with --endpoint URL"),
        ("mnist-train", "torch", {"mode": "train", "streams": 2}, "--streams goes with"),
        ("gemm", "torch", {"options": (("ceiling", "burst"),), "find_peak": True}, "--find-peak"),
        ("llm-tiny", "torch", {"concurrency": 2}, "--concurrency goes with --endpoint URL"),
    ],
)
def test_a_field_no_part_of_the_cases_kind_is_refused_naming_the_kinds_that_take_it(
    workload, framework, fields, refused
):
    from dlbench.errors import UserError

    compile_mode = "eager" if framework == "torch" else "default"
    core = {"workload": workload, "framework": framework, "compile": compile_mode}
    core.update((k, v) for k, v in fields.items() if k in ("mode", "options"))
    kind = loop_kind(Case.of(**core))
    with pytest.raises(FieldsNotTaken):  # no record of its kind holds it
        Case.of(**{**core, **fields})
    with pytest.raises(UserError, match=refused) as error:
        planned(**{**core, **fields})
    assert str(error.value).endswith(f"runs the {kind.name} loop ({kind.measures})")


def test_the_fields_a_kind_takes_pass_the_refusal_to_its_own_checks():
    from dlbench.plan.validate import validate_case

    # a generation server's SLO is the endpoint's option, and its kind takes it
    case = Case.of(workload="llm-tiny", framework="torch", compile="eager", scenario="server",
                   target_qps=1.0, ttft_ms=500.0)  # fmt: skip
    assert kind_of("llm-tiny", "torch", scenario="server") == "generation-server"
    assert case_load(validate_case(case), GenerationServerLoad).ttft_ms == 500.0


@pytest.mark.parametrize(
    ("fields", "record", "values"),
    [
        ({"workload": "mlp", "framework": "onnxruntime", "scenario": "server",
          "target_qps": 5.0, "latency_bound_ms": 50.0},
         LoadGenLoad, {"target_qps": 5.0, "latency_bound_ms": 50.0, "find_peak": False}),
        ({"workload": "llm-tiny", "scenario": "server", "find_peak": True, "ttft_ms": 500.0,
          "streams": 2},
         GenerationServerLoad, {"find_peak": True, "ttft_ms": 500.0, "streams": 2}),
        ({"workload": "llm-requests", "framework": "endpoint", "endpoint": "http://h:1",
          "concurrency": 4, "tpot_ms": 20.0},
         ForeignServerLoad, {"endpoint": "http://h:1", "concurrency": 4, "tpot_ms": 20.0}),
        ({"workload": "llm-tiny", "framework": "vllm", "request_rate": 2.0, "streams": 8},
         ServedEngineLoad, {"request_rate": 2.0, "streams": 8, "api": "completions"}),
        ({"workload": "mnist-train", "mode": "train", "target_accuracy": 0.9},
         TimeToTrain, {"target_accuracy": 0.9}),
        ({"workload": "mlp", "mode": "train", "nproc": 2, "ddp": True},
         DdpLaunch, {"nproc": 2, "ddp": True}),
    ],
)  # fmt: skip
def test_a_cases_load_is_read_as_its_kinds_own_record_and_as_no_other(fields, record, values):
    case = Case.of(**{"framework": "torch", "compile": "default", **fields})
    kind = loop_kind(case)
    load = case_load(case, record)
    assert kind.load is record and type(load) is record
    assert {name: getattr(load, name) for name in values} == values
    assert kind.takes >= {f.name for f in dataclasses.fields(record)}
    # the groups it shares are read from any kind that has them, and none other's
    assert load_part(case, SloBounds) == (load if isinstance(load, SloBounds) else None)
    assert searches_peak(case) is bool(values.get("find_peak"))
    others = [r for r in (LoadGenLoad, GenerationServerLoad, ForeignServerLoad,
                          ServedEngineLoad, TimeToTrain, DdpLaunch) if r is not record]  # fmt: skip
    for other in others:
        assert load_part(case, other) is None
        with pytest.raises(TypeError, match=f"a {kind.name} case's load is no {other.__name__}"):
            case_load(case, other)


def test_a_cases_keys_are_every_kinds_fields_in_the_order_stored_runs_have_them():
    """Every kind's record writes its fields flat, each key once (a field several kinds
    share is one key), whatever the case's kind, in the order files have always had."""
    import json
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "schema-3-runs" / "mixed-run.json"
    stored = list(json.loads(fixture.read_text())["results"][0]["case"])
    assert [name for name, _ in record_dict.flat_fields(Case)] == stored
    for kind in LOOP_KINDS:
        record = kind.load
        names = {f.name for f in dataclasses.fields(record)} if record is not None else set()
        assert names <= set(stored) and names <= kind.takes, kind.name
    steps = Case.of(workload="mlp", framework="torch", compile="eager")
    assert list(steps.to_dict()) == stored  # a case with no load writes them too


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ({"workload": "gemm", "options": (("ceiling", "burst"),), "scenario": "server"},
         "--scenario server runs a case under MLPerf LoadGen; gemm on torch runs the ceiling"),
        ({"workload": "gemm", "options": (("ceiling", "burst"),), "scenario": "multi-stream"},
         "--scenario multi-stream runs a case under MLPerf LoadGen; gemm on torch runs the"),
        # an endpoint's workload goes to a server: no framework here runs it
        ({"workload": "llm-requests", "scenario": "server", "find_peak": True},
         "'llm-requests' in mode 'infer' is not supported on 'torch'; supported on: endpoint"),
    ],
)  # fmt: skip
def test_loadgens_scenarios_on_a_kind_that_runs_no_loadgen_are_refused(fields, refused):
    from dlbench.errors import UserError
    from dlbench.plan.validate import validate_case

    case = Case.of(**{"framework": "torch", "compile": "eager", **fields})
    with pytest.raises(UserError, match=re.escape(refused)):
        validate_case(case)


def test_a_kind_with_no_load_of_its_own_has_no_record():
    steps = Case.of(workload="mlp", framework="torch", compile="eager")
    assert steps.load is None and loop_kind(steps).load is None
    assert load_part(steps, PeakSearch) is None and not searches_peak(steps)


@pytest.mark.parametrize(
    ("workload", "mode", "refused"),
    [
        # another kind's rule comes first: the option would be in the label and do nothing
        ("llm-tiny", "infer", "selects the ceiling loop .*; llm-tiny on torch runs the generation"),
        ("mnist-train", "train", "mnist-train on torch runs the time-to-train loop"),
        # the ceiling kind's own check, at planning rather than in the worker
        ("mlp", "infer", "option ceiling is for the gemm, copy, add workloads, not 'mlp'"),
    ],
)
def test_an_option_that_selects_a_kind_is_refused_where_it_would_measure_nothing(
    workload, mode, refused
):
    from dlbench.errors import UserError
    from dlbench.plan.validate import validate_case

    case = Case.of(workload=workload, framework="torch", compile="eager", mode=mode,
                   options=(("ceiling", "burst"),))  # fmt: skip
    with pytest.raises(UserError, match=refused):
        validate_case(case)
    gemm = Case.of(workload="gemm", framework="torch", compile="eager",
                   options=(("ceiling", "burst"),))  # fmt: skip
    assert validate_case(gemm).options == (("ceiling", "burst"),)


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        # a DDP launch says what it runs before any field of another kind's load is judged
        ({"workload": "llm-tiny", "concurrency": 2}, "--nproc 2 runs torch training steps"),
        ({"workload": "mnist-train", "mode": "train", "target_accuracy": 0.9},
         "--nproc 2 runs torch training steps"),
        # on a workload it trains, the field's refusal names the ddp loop
        ({"workload": "mlp", "mode": "train", "concurrency": 2},
         "--concurrency goes with .*; mlp on torch runs the ddp loop"),
    ],
)  # fmt: skip
def test_a_ddp_cases_own_check_speaks_before_another_kinds_fields(fields, refused):
    from dlbench.errors import UserError

    with pytest.raises(UserError, match=refused):
        planned(framework="torch", compile="eager", nproc=2, ddp=True, **fields)


def test_a_refusal_says_the_load_the_cases_own_kind_takes():
    from dlbench.errors import UserError

    with pytest.raises(UserError, match="its load: --concurrency N or --request-rate R"):
        planned(workload="llm-135m", framework="vllm", compile="default", target_qps=5.0)


# A case of each kind, by its flat fields (the framework's compile mode added)
PLANNED = {
    "steps": {"workload": "mlp", "framework": "torch"},
    "steps at a batch": {"workload": "mlp", "framework": "onnxruntime", "batch_size": 8},
    "loadgen server": {"workload": "mlp", "framework": "onnxruntime", "scenario": "server",
                       "target_qps": 5.0},
    "loadgen single-stream": {"workload": "mlp", "framework": "onnxruntime",
                              "scenario": "single-stream", "loadgen": True},
    "generation": {"workload": "llm-tiny", "framework": "torch"},
    "generation at a batch": {"workload": "llm-tiny", "framework": "torch", "batch_size": 4},
    "generation single-stream": {"workload": "llm-tiny", "framework": "onnxruntime-genai",
                                 "scenario": "single-stream"},
    "generation offline": {"workload": "llm-tiny", "framework": "torch", "scenario": "offline",
                           "batch_size": 4},
    "generation-server": {"workload": "llm-tiny", "framework": "torch", "scenario": "server",
                          "target_qps": 1.0},
    "time-to-train": {"workload": "mnist-train", "framework": "torch", "mode": "train"},
    "endpoint": {"workload": "llm-requests", "framework": "endpoint",
                 "endpoint": "http://127.0.0.1:1", "batch_size": 1},
    "ceiling": {"workload": "gemm", "framework": "torch", "options": (("ceiling", "burst"),)},
    "ddp": {"workload": "mlp", "framework": "torch", "mode": "train", "nproc": 2, "ddp": True},
}  # fmt: skip


@pytest.mark.parametrize("fields", PLANNED.values(), ids=PLANNED)
def test_a_results_case_plans_again_as_the_case_that_ran(fields):
    """The worker records the batch it ran and the scenario its kind says
    (LoopKind.recorded_scenario: the one the batch implies where none was given): that
    case plans again as the same kind and the same case (`dlbench rerun`)."""
    from dlbench.plan.validate import validate_case

    compile_mode = "eager" if fields["framework"] == "torch" else "default"
    planned = validate_case(Case.of(compile=compile_mode, threads=1, **fields))
    kind = loop_kind(planned)
    batch = planned.effective_batch_size(2)
    ran = replace(planned, batch_size=batch, scenario=kind.recorded_scenario(planned, batch))
    again = validate_case(ran)
    assert loop_kind(again) is kind
    assert again.key() == ran.key()


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ({"scenario": "offline"}, "scenario offline on llm-tiny generates a batch"),
        ({"scenario": "offline", "batch_size": 1}, "batch size 1 is one sequence: give -b N"),
        ({"scenario": "multi-stream"}, "in the server scenario only"),
    ],
)
def test_a_generation_takes_the_scenarios_that_describe_it(fields, refused):
    from dlbench.errors import UserError
    from dlbench.plan.validate import validate_case

    with pytest.raises(UserError, match=refused):
        validate_case(Case.of(workload="llm-tiny", framework="torch", compile="eager", **fields))
