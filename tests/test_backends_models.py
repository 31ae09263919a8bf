"""ResNet-50, MobileNet-V2, BERT-base and DistilBERT: torch, ONNX Runtime, OpenVINO."""

from __future__ import annotations

import pytest
from conftest import FAST, installed

from dlbench.launch.runner import run_case
from dlbench.plan.validate import validate_case
from dlbench.spec.case import Case
from dlbench.workloads.bert import SHAPES, encoder_flops
from dlbench.workloads.vision import mobilenet_v2_macs, resnet50_macs

SMALL = {
    "resnet50": ("image", 64),
    "mobilenet-v2": ("image", 64),
    "bert-base": ("seq", 16),
    "distilbert": ("seq", 16),
}
PAIRS = [
    ("torch", "eager"),
    ("torch", "script"),
    ("torch", "compile"),
    ("onnxruntime", "default"),
    ("openvino", "default"),
]


# Each builder in eager and on each runtime that runs it. torch.compile wraps every
# module alike, at 30-50 s of Inductor each for these: a transformers model
# compiles in tests/test_worker_generation.py (its tokens held to the reference's),
# dense and convolutional graphs in test_backends_torch and test_worker_training.
# BERT-base beside DistilBERT adds its own builder, checked in eager against the
# reference: the ONNX export, TorchScript trace, ONNX Runtime and OpenVINO paths
# are DistilBERT's, the same code.
SKIPPED_PAIRS = {
    ("distilbert", "torch", "compile"),
    ("resnet50", "torch", "compile"),
    ("mobilenet-v2", "torch", "compile"),
    ("bert-base", "torch", "compile"),
    ("bert-base", "torch", "script"),
    ("bert-base", "onnxruntime", "default"),
    ("bert-base", "openvino", "default"),
}
MATRIX = [
    (workload, framework, compile_mode)
    for workload in SMALL
    for framework, compile_mode in PAIRS
    if (workload, framework, compile_mode) not in SKIPPED_PAIRS
]


@installed("transformers")
@pytest.mark.slow
@pytest.mark.parametrize(("workload", "framework", "compile_mode"), MATRIX)
def test_model_runs_and_matches_the_reference(workload, framework, compile_mode):
    case = Case(
        workload,
        framework,
        compile_mode,
        device="cpu",
        batch_size=2,
        threads=2,
        params=(SMALL[workload],),
    )
    result = run_case(validate_case(case), FAST)
    assert result.ok, f"{result.error}\n{result.error_detail}"
    assert result.max_abs_diff is not None
    assert result.max_abs_diff <= result.details.check.tolerance
    assert result.details.frameworks_in_process == (framework,)
    assert result.gflops > 0
    if workload.startswith(("bert", "distil")) and compile_mode == "script":
        assert result.details.extra["script"] == "traced"


def test_published_flop_counts():
    assert resnet50_macs(224) == pytest.approx(4.09e9, rel=0.01)  # ResNet-50: 4.1 GMACs
    assert mobilenet_v2_macs(224) == pytest.approx(300e6, rel=0.01)  # MobileNet-V2: 300M
    # BERT-base at 128 tokens: about 22 GFLOPs per sequence
    assert encoder_flops(SHAPES["bert-base"], 128) == pytest.approx(22.3e9, rel=0.01)


@pytest.mark.integration
def test_model_parameter_counts():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from dlbench.backends.torch.models import reference_module

    def count(workload: str, params: dict[str, int]) -> int:
        return sum(p.numel() for p in reference_module(workload, params, 0).parameters())

    assert count("resnet50", {"image": 32}) == 25_557_032
    assert count("mobilenet-v2", {"image": 32}) == 3_504_872
    assert count("bert-base", {"seq": 8}) == pytest.approx(108e6, rel=0.02)
    assert count("distilbert", {"seq": 8}) == pytest.approx(66e6, rel=0.02)
    del torch
