"""TensorFlow, JAX, ONNX Runtime and OpenVINO for real: same weights, same outputs."""

from __future__ import annotations

import pytest
from conftest import FAST

from dlbench.errors import UserError
from dlbench.launch.runner import run_case
from dlbench.plan.validate import validate_case
from dlbench.spec.case import Case
from dlbench.workloads import get_workload

FRAMEWORK_MODES = [
    ("tensorflow", "eager"),
    ("tensorflow", "function"),
    ("tensorflow", "xla"),
    ("jax", "jit"),
    ("onnxruntime", "default"),
    ("openvino", "default"),
]
WORKLOADS = ("mlp", "mnist-cnn")
# Each port on each runtime, and TensorFlow's other compile modes on one model each:
# eager and XLA run the same port as function does (a TensorFlow worker costs
# seconds of CPU to import alone).
ONE_MODEL_ONLY = {("tensorflow", "eager", "mnist-cnn"), ("tensorflow", "xla", "mlp")}
MATRIX = [
    (framework, compile_mode, workload)
    for framework, compile_mode in FRAMEWORK_MODES
    for workload in WORKLOADS
    if (framework, compile_mode, workload) not in ONE_MODEL_ONLY
]


def installed(framework: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(framework) is not None


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "compile_mode", "workload"), MATRIX)
def test_outputs_match_the_reference(framework, compile_mode, workload):
    if not installed(framework):
        pytest.skip(f"{framework} is not installed")
    case = Case(workload, framework, compile_mode, device="cpu", batch_size=4, threads=1)
    result = run_case(validate_case(case), FAST)
    assert result.ok, f"{result.error}\n{result.error_detail}"
    assert result.max_abs_diff is not None and result.max_abs_diff < 1e-4
    assert result.details.check.note == "torch eager fp32 reference"
    assert result.latency_ms.n >= 3 and result.throughput > 0
    assert result.case.scenario == "offline"
    # One framework per process: torch made the reference elsewhere.
    assert result.details.frameworks_in_process == (framework,)
    assert result.framework_version
    placed = result.details.placement
    assert placed is not None and placed.kind == "cpu", placed
    if framework in ("tensorflow", "jax"):
        # every weight and the input asked where it is, not the input alone (Keras
        # adds its dropout layers' seed states)
        ported = get_workload(workload)
        weights = ported.reference_weights(ported.resolve_params("cpu", {}), FAST.seed)
        count, _, _ = placed.reported.partition(" on ")
        assert int(count) >= len(weights) + 1, placed


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["onnxruntime", "openvino"])
def test_single_stream_runs_one_sample_per_request(framework):
    case = Case("mlp", framework, "default", device="cpu", scenario="single-stream", threads=1)
    result = run_case(validate_case(case), FAST)
    assert result.ok, result.error
    assert result.case.batch_size == 1 and result.case.scenario == "single-stream"
    if framework == "openvino":
        assert result.details.extra["PERFORMANCE_HINT"] == "LATENCY"


@pytest.mark.slow
def test_openvino_offline_uses_async_requests_and_pinned_fp32():
    case = Case("mnist-cnn", "openvino", "default", device="cpu", batch_size=8, threads=2)
    result = run_case(validate_case(case), FAST)
    assert result.ok, result.error
    assert result.details.extra["PERFORMANCE_HINT"] == "THROUGHPUT"
    assert "float32" in result.details.extra["INFERENCE_PRECISION_HINT"]
    assert 8 % result.details.extra["infer_requests"] == 0


@pytest.mark.slow
def test_onnxruntime_records_providers_and_opset():
    result = run_case(
        Case("mlp", "onnxruntime", "default", device="cpu", batch_size=2, threads=1), FAST
    )
    assert result.ok, result.error
    assert result.details.extra["providers"] == ["CPUExecutionProvider"]
    assert result.details.extra["onnx_opset"] == 17
    # each node's provider, from the probe session's profile
    nodes = result.details.extra["nodes_by_provider"]
    assert list(nodes) == ["CPUExecutionProvider"] and nodes["CPUExecutionProvider"] > 0
    placed = result.details.placement
    assert placed is not None and placed.by == "ONNX Runtime nodes" and placed.kind == "cpu"


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["tensorflow", "jax", "onnxruntime", "openvino"])
def test_a_missing_gpu_is_a_clear_failure(framework):
    result = run_case(
        Case("mlp", framework, validate_default(framework), device="cuda", batch_size=2, threads=1),
        FAST,
    )
    assert result.status == "failed"
    assert "cuda" in result.error and "--device cpu" in result.error


def validate_default(framework: str) -> str:
    from dlbench.spec.registry import framework_info

    return framework_info(framework).default_compile


@pytest.mark.parametrize(
    ("workload", "framework", "message"),
    [
        (
            "gemm",
            "jax",
            "workload 'gemm' in mode 'infer' is not supported on 'jax'; supported on: null, torch",
        ),
        ("mlp", "onnxruntime", "in mode 'train' is not supported on 'onnxruntime'"),
    ],
)
def test_unsupported_pairs_are_user_errors(workload, framework, message):
    mode = "train" if framework == "onnxruntime" else "infer"
    case = Case(workload, framework, validate_default(framework), mode=mode, threads=1)
    with pytest.raises(UserError, match=message):
        validate_case(case)


def test_single_stream_with_a_batch_is_a_user_error():
    case = Case("mlp", "onnxruntime", "default", batch_size=8, scenario="single-stream", threads=1)
    with pytest.raises(UserError, match="batch size 8 belongs to the offline scenario"):
        validate_case(case)


def test_support_matrix_matches_what_model_files_can_run():
    from dlbench.spec.registry import FRAMEWORKS

    runs_user_models = {n for n, info in FRAMEWORKS.items() if info.supports("user-model", "infer")}
    assert runs_user_models == {"torch", "tensorflow", "onnxruntime", "openvino"}


@pytest.mark.integration
def test_openvino_refuses_a_precision_it_has_no_hint_for():
    pytest.importorskip("openvino")
    from dlbench.backends.openvino.backend import plugin_config
    from dlbench.errors import CaseError

    assert plugin_config(Case("mlp", "openvino", "default"), 1, False)[
        "INFERENCE_PRECISION_HINT"
    ] == ("f32")
    with pytest.raises(CaseError, match="unsupported precision 'amp-bf16'"):
        plugin_config(Case("mlp", "openvino", "default", precision="amp-bf16"), 1, False)


@pytest.mark.slow
def test_jax_records_its_step_memory_without_preallocation():
    """XLA's preallocation is off (a GPU's used memory is then the model's), and the
    step's memory is XLA's own buffer assignment: at least its weights and input."""
    if not installed("jax"):
        pytest.skip("jax is not installed")
    case = Case("mlp", "jax", "jit", device="cpu", batch_size=4, threads=1)
    result = run_case(validate_case(case), FAST)
    assert result.ok, result.error
    extra = result.details.extra
    assert extra["xla_python_client_preallocate"] == "false"
    mlp = get_workload("mlp")
    params = mlp.resolve_params("cpu", {})
    weights = sum(w.nbytes for w in mlp.reference_weights(params, FAST.seed).values())
    inputs = sum(x.nbytes for x in mlp.make_inputs(4, params, "infer", FAST.seed).values())
    assert extra["xla_step_peak_mb"] * 2**20 >= weights + inputs
    assert extra["xla_step_temp_mb"] >= 0
    # the CPU client keeps no allocator statistics, so no peak is claimed for it
    assert "xla_allocator_peak_since_start_mb" not in extra
