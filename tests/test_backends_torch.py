"""The real PyTorch backend: every workload, mode and compile mode, small shapes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAST

from dlbench.launch.runner import run_case
from dlbench.spec.case import Case
from dlbench.workloads import get_workload

torch = pytest.importorskip("torch")

from dlbench.backends.base import Job  # noqa: E402
from dlbench.backends.torch.backend import TorchBackend  # noqa: E402
from dlbench.backends.torch.models import build_module  # noqa: E402

# starts a process or imports a framework: not in the fast tier (tests/conftest.py)
pytestmark = pytest.mark.integration

SMALL = {
    "add": ((("size", 64),), 2),
    "gemm": ((("size", 32),), 2),
    "mlp": ((), 8),
    "mnist-cnn": ((), 4),
}
# Every builder in eager and TorchScript. torch.compile wraps the module the same
# way for all of them, at 15-20 s of Inductor each, so it compiles once per kind of
# graph elsewhere: dense inference in the quick suite (test_cli_quick_suite, cold), a
# convolutional training graph (backward included) in test_worker_training's MNIST, a
# transformer in test_worker_generation's decoder.
COMPILED: set[tuple[str, str]] = set()
MATRIX = [
    (workload, mode, compile_mode)
    for workload in SMALL
    for mode in get_workload(workload).modes
    for compile_mode in ("eager", "script", "compile")
    if compile_mode != "compile" or (workload, mode) in COMPILED
]


def assert_ran_on_the_cpu(result) -> None:
    """What every case of the matrix shows: it ran here, timed, with the threads it set."""
    assert result.ok, f"{result.error}\n{result.error_detail}"
    assert result.case.device == "cpu" and result.framework_version == torch.__version__
    assert result.latency_ms.n >= 3 and result.latency_ms.median > 0
    assert result.throughput > 0 and result.gflops > 0
    assert result.details.threads == {"intra_op": 1, "inter_op": 1}


@pytest.mark.slow
@pytest.mark.parametrize(("workload", "mode", "compile_mode"), MATRIX)
def test_every_workload_mode_and_compile_mode_runs(workload, mode, compile_mode):
    params, batch = SMALL[workload]
    case = Case(
        workload,
        "torch",
        compile_mode,
        mode=mode,
        device="cpu",
        batch_size=batch,
        threads=1,
        params=params,
    )
    result = run_case(case, FAST)
    assert_ran_on_the_cpu(result)
    if workload == "add":
        assert result.gbps > 0


def test_a_kernel_at_an_amp_precision_counts_the_bytes_of_its_half_precision_operands():
    """At amp-bf16 a kernel's operands are stored in bf16: GB/s counts 2 bytes a value."""
    size = 256
    case = Case("add", "torch", "eager", device="cpu", precision="amp-bf16", threads=1,
                params=(("size", size),))  # fmt: skip
    result = run_case(case, FAST)
    if result.status == "skipped":  # a CPU without native bf16 measures none
        assert "would be emulated" in str(result.error)
        return
    assert result.ok, result.error
    assert result.bytes_per_sample == 3 * 2 * size**2  # read x and y, write z
    assert result.gbps == pytest.approx(result.throughput * result.bytes_per_sample / 1e9)


def test_cuda_request_without_cuda_fails_clearly():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    case = Case("mlp", "torch", "eager", device="cuda", batch_size=2, threads=1)
    result = run_case(case, FAST)
    assert result.status == "failed"
    assert "sees no CUDA device" in result.error and "--device cpu" in result.error


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_case_runs_on_the_gpu():
    case = Case(
        "gemm", "torch", "eager", device="cuda", batch_size=1, threads=1, params=(("size", 1024),)
    )
    result = run_case(case, FAST)
    assert result.ok, result.error
    assert result.case.device == "cuda:0"


def test_mnist_cnn_has_the_example_parameter_count():
    workload = get_workload("mnist-cnn")
    module = build_module("mnist-cnn", workload.reference_weights({}, seed=0))
    assert sum(p.numel() for p in module.parameters()) == 1_199_882


def numpy_mlp(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    for index in range(6):
        x = x @ weights[f"fc{index}.weight"].T + weights[f"fc{index}.bias"]
        x = np.maximum(x, 0) if index < 5 else 1 / (1 + np.exp(-x))
    return x


def test_mlp_computes_the_reference_function_with_the_reference_weights():
    workload = get_workload("mlp")
    weights = workload.reference_weights({}, seed=7)
    x = workload.make_inputs(16, {}, "infer", seed=7)["x"]
    with torch.inference_mode():
        out = build_module("mlp", weights)(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, numpy_mlp(weights, x), rtol=1e-5, atol=1e-6)


def job(workload: str, mode: str, batch: int = 4) -> Job:
    """A Job for in-process tests; kernels get a 16x16 size."""
    case = Case(workload, "torch", "eager", mode=mode, device="cpu", batch_size=batch, threads=1)
    spec = get_workload(workload)
    params = spec.resolve_params("cpu", {"size": 16} if spec.cpu_params else {})
    return Job(case, spec, "cpu", batch, params, seed=0)


def test_inference_records_no_autograd():
    prepared = TorchBackend().prepare(job("mlp", "infer"))
    with prepared.context():
        out = prepared.step()
    assert not out.requires_grad
    assert out.is_inference()


def test_add_and_gemm_write_the_right_answer_into_the_preallocated_output():
    for name, reference in (("add", np.add), ("gemm", np.matmul)):
        spec_job = job(name, "infer", batch=2)
        inputs = spec_job.inputs()
        prepared = TorchBackend().prepare(spec_job)
        with prepared.context():
            out = prepared.step()
        np.testing.assert_allclose(out.numpy(), reference(*inputs.values()), rtol=1e-4, atol=1e-4)


def test_training_steps_update_the_weights_and_lower_the_loss():
    prepared = TorchBackend().prepare(job("mnist-cnn", "train", batch=16))
    with prepared.context():
        losses = [prepared.step().item() for _ in range(10)]
    assert all(np.isfinite(losses))
    assert max(losses[-3:]) < losses[0]  # dropout makes single steps noisy


def test_the_fused_optimizer_is_a_labelled_variant_that_trains_and_is_recorded():
    fused = (("optimizer", "fused"),)
    case = Case("mlp", "torch", "eager", mode="train", device="cpu", batch_size=8, threads=1,
                options=fused)  # fmt: skip
    result = run_case(case, FAST)
    assert result.ok, result.error
    assert "optimizer=fused" in result.case.label()
    optimizer = get_workload("mlp").optimizer
    assert result.details.extra["optimizer"].lower().startswith(optimizer)
    assert result.details.extra["optimizer"].endswith("(fused)")
    plain = Case("mlp", "torch", "eager", mode="train", device="cpu", batch_size=8, threads=1)
    assert plain.key() != result.case.key()


def test_every_input_parameter_and_buffer_of_a_torch_case_is_placed():
    from dlbench.backends.torch.backend import tensor_placement

    module = torch.nn.BatchNorm1d(4)  # two parameters, three buffers
    inputs = {"x": torch.zeros(2, 4)}
    placed = tensor_placement(inputs, module)
    assert placed.kind == "cpu" and placed.reported == "6 on cpu"
    module.running_mean = torch.zeros(4, device="meta")  # a buffer left elsewhere
    stray = tensor_placement(inputs, module)
    assert stray.kind == "mixed" and "buffer running_mean" in stray.reported
