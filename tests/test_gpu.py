"""Every GPU path dlbench has, run for real on a CUDA GPU (skipped elsewhere).

`pytest -m gpu` on a GPU machine runs these; bench/gpu_validation.sh does
so first. Each test asserts what a missing synchronise, a switch not in
effect or a wrong placement would break, at shapes that take seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import dlbench

from dlbench.results.details import DEVICE_CLOCK

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
FAST = ("--min-time", "0.2", "--min-iters", "5", "--warmup", "2")
# NVML's energy counter needs a region of a second (measure.energy.NVML_MIN_REGION_S)
METERED = ("--min-time", "1.5", "--min-iters", "5", "--warmup", "2")
NVML_FIELDS = ("gpu_util_percent", "sm_clock_mhz", "power_w", "temperature_c", "throttle")


def run_json(tmp_path: Path, *args: str, name: str = "run.json") -> dict:
    out = tmp_path / name
    done = dlbench("run", *args, "--json", str(out), "-q", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def ok(result: dict) -> dict:
    assert result["status"] == "ok", result["error"]
    return result


def sleep_cycles_for(ms: float) -> int:
    """torch.cuda._sleep spins a kernel for N clock cycles; at most ~2 GHz, so >= `ms`."""
    return int(ms * 2_000_000)


def test_an_asynchronous_kernel_cannot_make_the_step_look_faster():
    from dlbench.backends.torch.backend import _synchronised
    from dlbench.measure.timer import StopRule, run_timed

    device = torch.device("cuda:0")
    cycles = sleep_cycles_for(20.0)

    def kernel() -> None:
        torch.cuda._sleep(cycles)  # returns at once; the GPU spins for ~20 ms

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    kernel()
    torch.cuda.synchronize()
    start.record()
    kernel()
    end.record()
    torch.cuda.synchronize()
    gpu_ms = start.elapsed_time(end)

    launched = time.perf_counter()
    kernel()
    launch_ms = 1000.0 * (time.perf_counter() - launched)
    torch.cuda.synchronize()
    assert launch_ms < gpu_ms / 5, "the kernel is not asynchronous: the test proves nothing"

    rule = StopRule(min_time_s=0.0, min_iters=5, warmup_iters=1)
    step_ms = 1000.0 * min(run_timed(_synchronised(kernel, device), rule).samples_s)
    assert step_ms >= 0.9 * gpu_ms, (step_ms, gpu_ms)


def test_gemm_rates_show_tf32_and_amp_in_effect_and_never_beat_the_gpu(tmp_path):
    run = run_json(
        tmp_path, "-w", "gemm", "-d", "cuda", "--param", "size=4096",
        "-p", "fp32", "-p", "tf32", "-p", "amp-bf16", "-p", "amp-fp16", *FAST,
    )  # fmt: skip
    by = {r["case"]["precision"]: ok(r) for r in run["results"]}
    assert by["fp32"]["details"]["extra"]["matmul_tf32"] is False
    assert by["tf32"]["details"]["extra"]["matmul_tf32"] is True
    # tensor cores: TF32 and bf16/fp16 run several times strict fp32's rate
    for fast in ("tf32", "amp-bf16", "amp-fp16"):
        assert by[fast]["gflops"] > 2 * by["fp32"]["gflops"], (fast, by[fast]["gflops"])
    # the reported rate is no higher than the GPU's own event-timed rate
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b, out = torch.randn_like(a), torch.empty_like(a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        torch.matmul(a, b, out=out)
    start.record()
    for _ in range(20):
        torch.matmul(a, b, out=out)
    end.record()
    torch.cuda.synchronize()
    event_gflops = 20 * 2 * 4096**3 / (start.elapsed_time(end) / 1000.0) / 1e9
    assert by["amp-bf16"]["gflops"] < 1.15 * event_gflops, (by["amp-bf16"]["gflops"], event_gflops)
    for result in run["results"]:
        assert result["details"]["placement"]["kind"] == "cuda"
        assert result["details"]["extra"]["cuda_max_memory_allocated_mb"] > 0


def test_autocast_runs_matmuls_in_the_low_precision_and_fp32_is_strict():
    from dlbench.backends.torch.precision import precision_plan

    device = torch.device("cuda:0")
    x = torch.randn(64, 64, device=device)
    for precision, dtype in (("amp-bf16", torch.bfloat16), ("amp-fp16", torch.float16)):
        plan = precision_plan(precision, device, training=True)
        with plan.autocast():
            assert (x @ x).dtype == dtype
        assert (plan.scaler is not None) == (dtype is torch.float16)
    precision_plan("fp32", device, training=True)
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cudnn.allow_tf32 is False


def test_amp_training_and_compile_run_on_the_gpu_with_telemetry(tmp_path):
    run = run_json(
        tmp_path, "-w", "mlp", "-m", "train", "-d", "cuda", "-p", "amp-fp16",
        "-c", "eager", "-c", "compile", "-b", "512", *METERED,
    )  # fmt: skip
    for result in map(ok, run["results"]):
        details = result["details"]
        extra = details["extra"]
        assert extra["grad_scaler"] is True and extra["autocast_dtype"] == "float16"
        assert details["placement"]["kind"] == "cuda"
        gpus = [g for p in details["timeline"]["points"] for g in p.get("gpu") or ()]
        assert gpus, "no NVML reading in the timeline"
        fields = set().union(*gpus)
        missing = [f for f in NVML_FIELDS if f not in fields]
        assert not missing, f"NVML fields never read: {missing}"
        energy = details["energy"]
        assert energy.get("source", "").startswith("nvml"), energy
        assert energy["joules_per_sample"] > 0 and 10 < energy["mean_power_w"] < 2000, energy


def test_compiled_inference_on_the_gpu_passes_the_output_check(tmp_path):
    run = run_json(
        tmp_path, "-w", "mlp", "-d", "cuda", "-c", "compile", "-c", "script", "-c", "export", *FAST
    )
    by_mode = {r["case"]["compile"]: ok(r) for r in run["results"]}
    assert set(by_mode) == {"compile", "script", "export"}
    for result in by_mode.values():
        assert "tolerance" in result["details"]["check"], result["details"]["check"]
    # AOTInductor built the package for the GPU, and torch.compile compiled cold
    assert by_mode["export"]["details"]["extra"]["export"]["device"].startswith("cuda")
    assert by_mode["compile"]["details"]["extra"]["compile_counters"]["fxgraph_cache_hit"] == 0


def test_ddp_with_one_process_uses_nccl_on_the_gpu(tmp_path):
    run = run_json(tmp_path, "-w", "mlp", "-m", "train", "-d", "cuda", "--nproc", "1", *METERED)
    plain, ddp = map(ok, run["results"])
    assert (plain["case"]["ddp"], ddp["case"]["ddp"]) == (False, True)
    assert ddp["details"]["ddp"]["backend"] == "nccl"
    assert ddp["details"]["ddp"]["world_size"] == 1
    # with one rank, the "scaling" is DDP's own cost against the plain process
    assert 0 < ddp["derived"]["scaling"]["scaling_efficiency"] < 1.5
    assert ddp["details"]["energy"]["joules_per_sample"] > 0


def test_mnist_trains_on_the_gpu_with_per_epoch_times(tmp_path):
    run = run_json(tmp_path, "-w", "mnist-train", "-f", "torch", "-d", "cuda", "--epochs", "2")
    (result,) = map(ok, run["results"])
    epochs = result["details"]["training"]["epochs"]
    assert len(epochs) == 2 and all(e["train_s"] > 0 for e in epochs)
    assert result["details"]["placement"]["kind"] == "cuda"
    assert result["details"]["energy"]["joules_per_sample"] > 0


def test_jax_runs_on_the_gpu_without_preallocating_its_memory(tmp_path):
    """Every weight and the input on the GPU; XLA's 75% preallocation off, so the
    process's GPU memory and the allocator's peak are the model's; the step's memory
    from XLA's buffer assignment; and a 0.2 s region gets no joules, with the reason."""
    pytest.importorskip("jax")
    run = run_json(tmp_path, "-w", "mlp", "-f", "jax", "-d", "cuda", *FAST)
    (result,) = map(ok, run["results"])
    details, extra = result["details"], result["details"]["extra"]
    assert details["placement"]["kind"] == "cuda", details["placement"]
    assert extra["xla_python_client_preallocate"] == "false"
    half_gpu_mb = torch.cuda.get_device_properties(0).total_memory / 2**20 / 2
    assert 0 < extra["xla_allocator_peak_since_start_mb"] < half_gpu_mb, extra
    assert 0 < extra["xla_step_peak_mb"] <= extra["xla_allocator_peak_since_start_mb"], extra
    process_mb = [g["gpu_process_mem_mb"] for p in details["timeline"]["points"]
                  for g in p.get("gpu") or () if "gpu_process_mem_mb" in g]  # fmt: skip
    assert max(process_mb, default=0.0) < half_gpu_mb, "XLA preallocated the GPU"
    energy = details["energy"]
    assert "joules" not in energy and "shorter than the 1.0 s" in energy["unmeasurable"]


def test_tensorflow_grows_its_gpu_memory_and_peaks_over_the_measured_steps(tmp_path):
    """Growth on instead of TensorFlow mapping the whole GPU, and its allocator's peak
    reset as the measured loop starts: the model's memory, well under half the GPU."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed")
    out = tmp_path / "run.json"
    done = dlbench("run", "-w", "mlp", "-f", "tensorflow", "-d", "cuda", *FAST,
                   "--json", str(out), "-q", timeout=900)  # fmt: skip
    (result,) = json.loads(out.read_text())["results"]
    if "sees 0 GPU" in (result["error"] or ""):
        pytest.skip("this TensorFlow has no GPU support")
    assert done.returncode == 0, done.stderr[-3000:]
    extra = ok(result)["details"]["extra"]
    assert extra["tf_force_gpu_allow_growth"] == "true"
    half_gpu_mb = torch.cuda.get_device_properties(0).total_memory / 2**20 / 2
    assert 0 < extra["tf_peak_memory_mb"] < half_gpu_mb, extra
    assert result["details"]["placement"]["kind"] == "cuda", result["details"]["placement"]


def test_onnxruntime_runs_every_node_on_the_gpu(tmp_path):
    """Each node's provider, from the probe's profile: the CUDA provider's, bar ONNX
    Runtime's own small shape computations on the CPU."""
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip(f"onnxruntime {ort.__version__} has no CUDA provider (onnxruntime-gpu has)")
    run = run_json(tmp_path, "-w", "mlp", "-w", "mnist-cnn", "-f", "onnxruntime", "-d", "cuda",
                   *FAST)  # fmt: skip
    for result in map(ok, run["results"]):
        placed, extra = result["details"]["placement"], result["details"]["extra"]
        assert placed["by"] == "ONNX Runtime nodes" and placed["kind"] == "cuda", placed
        assert extra["nodes_by_provider"].get("CUDAExecutionProvider", 0) > 0, extra


def test_the_decoder_seeded_on_the_gpu_is_the_same_every_build_and_a_cast_only_rounds_it():
    from dlbench.backends.torch.decoder import build_decoder, greedy_reference
    from dlbench.workloads.decoder import SHAPES

    shape = SHAPES["llm-tiny"]
    first, again = (build_decoder(shape, seed=0, device="cuda:0") for _ in range(2))
    bf16 = build_decoder(shape, seed=0, device="cuda:0", dtype=torch.bfloat16)
    weights = dict(first.named_parameters())
    for name, parameter in again.named_parameters():
        assert parameter.device.type == "cuda" and torch.equal(parameter, weights[name]), name
    for name, parameter in bf16.named_parameters():
        assert torch.equal(parameter, weights[name].to(torch.bfloat16)), name
    assert {b.dtype for b in bf16.buffers()} == {torch.float32}  # the rotary frequencies
    prompts = torch.randint(3, shape.vocab, (2, 32)).numpy()
    reference = greedy_reference(first, prompts, 8)
    assert reference["tokens"].shape == reference["top1"].shape == (2, 8)
    assert (reference["top1"] >= reference["top2"]).all()


def test_text_generation_on_the_gpu_is_seeded_there_and_held_to_a_reference_made_there(
    tmp_path,
):
    """transformers on CUDA, its model built from the seed on the GPU (no checkpoint),
    in bf16 and fp32, eager, with its decoding step in CUDA graphs, and in dlbench's
    device loop: each held to the fp32 reference made once on the same GPU from the same
    weights, its decode held to the memory-bandwidth bound, its GPU memory counted beside
    the KV cache."""
    run = run_json(tmp_path, "-w", "llm-tiny", "-f", "torch", "-d", "cuda", "-b", "2",
                   "-c", "eager", "-c", "reduce-overhead", "-c", "device-loop", "-p", "bf16",
                   "-p", "fp32", *FAST)  # fmt: skip
    assert len(run["results"]) == 6
    origin = f"torch eager fp32 on {torch.cuda.get_device_name(0)}, TF32 off, from the same"
    made = []
    for result in map(ok, run["results"]):
        generation, extra = result["details"]["generation"], result["details"]["extra"]
        precision, mode = result["case"]["precision"], result["case"]["compile"]
        assert result["details"]["placement"]["kind"] == "cuda"
        dtype = {"bf16": "bfloat16", "fp32": "float32"}[precision]
        assert generation["kv_cache_dtype"] == extra["dtype"] == dtype
        assert extra["weights"].startswith("seeded on cuda:0 in fp32"), extra["weights"]
        assert extra["matmul_tf32"] is False
        assert generation["device_peak_mb"] > generation["kv_cache_mb"] > 0
        tokens = generation["tokens"]
        assert tokens["reference"] == f"{origin} seeded weights", tokens
        # fp32 eager is the reference's own computation: nothing may round differently
        exact = (precision, mode) == ("fp32", "eager")
        expected = ("identical",) if exact else ("identical", "near tie")
        assert tokens["verdict"] in expected, (precision, mode, tokens)
        assert 0 < generation["ttft_p50_ms"] < generation["e2e_p50_ms"]
        made.append(extra["reference_made_s"])
        if mode in ("reduce-overhead", "device-loop"):  # its CUDA graphs really replayed
            counters = extra["compile_counters"]
            assert counters["graphs"] >= 1 and counters["graph_breaks"] == 0, counters
            assert counters["cudagraph_skips"] == 0, counters
        if mode == "device-loop":  # each token's time a CUDA event, no per-token sync
            assert extra["token_clock"] == DEVICE_CLOCK, extra
        bound = result["derived"]["decode_bound"]
        assert bound["ceiling_gbps"] and bound["note"] is None, bound  # a known GPU
        assert 0 < bound["mbu"] <= 1.05, bound
    # one key (workload, seed, lengths, batch, GPU, versions): made by the first case
    assert made[0] > 0 and made[1:] == [None] * 5, made


def test_gpu_training_is_pipelined_timed_by_events_and_diagnosed(tmp_path):
    """The throughput mode on a GPU: CUDA events cover each window's wall time, the
    rate is not below the per-step-synchronised one, GradScaler's check for infinities
    is the amp-fp16 step's one hidden synchronisation, and a profiled step's kernels
    fill part of its interval."""
    run = run_json(
        tmp_path, "-w", "mlp", "-m", "train", "-d", "cuda", "-p", "amp-bf16",
        "-p", "amp-fp16", "-b", "4096", *METERED,
    )  # fmt: skip
    by = {r["case"]["precision"]: ok(r) for r in run["results"]}
    for precision, result in by.items():
        details = result["details"]
        assert details["timing_mode"] == "throughput"
        pipelined = details["pipelined"]
        assert pipelined["marker"] == "cuda-events"
        assert pipelined["min_cover"] >= 0.98, pipelined  # intervals sum to the window
        assert pipelined["steps"] == len(result["samples_ms"])
        assert result["throughput"] == pytest.approx(
            pipelined["steps"] * 4096 / pipelined["wall_s"], rel=1e-6
        )
        # waiting after every step can only lose the overlap, never gain
        assert pipelined["synced_samples_per_s"] <= 1.05 * result["throughput"], pipelined
        assert 0 < pipelined["device_busy"] <= 1.05, pipelined
        expected_syncs = 1 if precision == "amp-fp16" else 0
        assert pipelined["hidden_syncs"] >= expected_syncs, (precision, pipelined)
        # a small MLP at amp launches more than it computes: the verdict says so
        assert ("host-bound" in result["flags"]) == (pipelined["device_busy"] < 0.85)


def test_reduce_overhead_and_the_fused_optimizer_train_on_the_gpu(tmp_path):
    run = run_json(
        tmp_path, "-w", "mlp", "-m", "train", "-d", "cuda", "-p", "amp-bf16",
        "-c", "reduce-overhead", "--option", "optimizer=fused", "-b", "1024", *FAST,
    )  # fmt: skip
    result = ok(run["results"][0])
    assert result["details"]["extra"]["optimizer"].endswith("(fused)")
    assert result["details"]["extra"]["compile_counters"]["graphs"] >= 1
    assert result["details"]["pipelined"]["marker"] == "cuda-events"


def test_a_convolutional_net_on_the_gpu_runs_with_cudnns_autotuner(tmp_path):
    run = run_json(tmp_path, "-w", "mnist-cnn", "-m", "train", "-d", "cuda", "-b", "256", *FAST)
    result = ok(run["results"][0])
    assert result["details"]["extra"]["cudnn_benchmark"] is True
