"""The loop kinds' table: each case's kind, and every runner and check it names."""

from __future__ import annotations

import inspect

import pytest

from dlbench.spec.case import Case
from dlbench.spec.registry import framework_info
from dlbench.workloads import get_workload
from dlbench.workloads.loop_kinds import LOOP_KINDS, loop_kind


@pytest.mark.parametrize("kind", LOOP_KINDS, ids=lambda kind: kind.name)
def test_every_kind_names_a_runner_and_checks_of_the_shapes_their_callers_use(kind):
    runner = inspect.signature(kind.runner_function())
    assert list(runner.parameters)[:3] == ["backend", "job", "settings"], kind.runner
    assert all(p.default is not p.empty for p in list(runner.parameters.values())[3:])
    checks = inspect.signature(kind.checks_function())
    assert list(checks.parameters) == ["case", "info"], kind.checks
    assert kind.measures


def kind_of(workload: str, framework: str, **fields: object) -> str:
    compile_mode = "default" if framework != "torch" else "eager"
    case = Case.of(workload=workload, framework=framework, compile=compile_mode, **fields)
    return loop_kind(case, get_workload(workload), framework_info(framework)).name


def test_each_case_runs_the_first_kind_that_selects_it():
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
    assert [kind.name for kind in LOOP_KINDS][-1] == "steps"  # it takes any case
    assert len({kind.name for kind in LOOP_KINDS}) == len(LOOP_KINDS)
