"""What limits a generation (issue 39, items 1-2): the work a prefill and a decode step
must do from the model's shape (a workload's, checked against the model transformers
builds in test_decode_bound; or a served model's config.json), the
prefill held to the GEMM ceiling (MFU) beside the decode's MBU, above-ceiling called
impossible, and the verdict each result stores with the figure that shows it, as the
studies, compare and the HTML page show it. Pure: records and rules, no engine."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from factories import make_result, make_run, samples

from dlbench.errors import UserError
from dlbench.measure.client_health import ClientHealth
from dlbench.measure.server_counters import GaugeSamples, ServerCounters, ServerTiming
from dlbench.measure.stats import summarize
from dlbench.plan.endpoint_cases import validate_endpoint_case
from dlbench.report.compare import compare_case
from dlbench.report.html import flag_legend, results_table
from dlbench.report.studies.llm import ON_THE_DEVICE, llm_tables
from dlbench.results.details import DEVICE_CLOCK, STREAMER_CLOCK, Generation
from dlbench.results.flags import ABOVE_CEILING, CLIENT_BOUND, HOST_BOUND, result_flags
from dlbench.results.limits import judge, with_limits
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Result
from dlbench.results.roofline_bound import prefill_bound
from dlbench.spec.case import REMOTE_DEVICE
from dlbench.spec.record_dict import to_dict
from dlbench.worker.model_work import NO_CONFIG, Work, running_batch, served_config
from dlbench.workloads.decoder import SHAPES
from dlbench.workloads.model_config import read_model_config

# A 2-core CPU's ceilings as `dlbench roofline` stores them (balance: 2 FLOP/byte)
CPU_CEILINGS = {"source_run": "roof", "values": {"cpu|memory": 30.0, "cpu|gflops|fp32": 60.0}}
LLAMA_8B = {  # Llama-3.1-8B's config.json, as the model ships it (the keys read)
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def test_a_served_models_config_gives_its_shape_and_the_dtype_its_weights_are_stored_in(
    tmp_path,
):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    config = read_model_config(tmp_path, "--model-config")
    assert config.shape.parameter_count() == SHAPES["llama-3.1-8b"].parameter_count()
    assert (config.precision, config.shape.head_dim, config.shape.kv_heads) == ("bf16", 128, 8)
    gemma = {**LLAMA_8B, "head_dim": 256, "num_key_value_heads": None}  # an explicit head_dim
    (tmp_path / "gemma.json").write_text(json.dumps(gemma))
    shape = read_model_config(tmp_path / "gemma.json", "x").shape
    assert (shape.head_dim, shape.kv_heads) == (256, 32)  # no KV heads: one per head


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_local_experts": 8}, "a mixture of experts (num_local_experts)"),
        ({"quantization_config": {"quant_method": "awq"}}, "a awq checkpoint"),
        ({"torch_dtype": "float8_e4m3fn"}, "dtype 'float8_e4m3fn' is not one dlbench sizes"),
        ({"hidden_size": None}, "no hidden_size (a positive whole number)"),
    ],
)
def test_a_config_the_roofline_cannot_count_exits_2_naming_why(tmp_path, change, message):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA_8B, **change}))
    case = make_result(framework="endpoint", workload="llm-requests", device=REMOTE_DEVICE,
                       endpoint="http://127.0.0.1:8000", served_model="m",
                       model_config=str(tmp_path)).case  # fmt: skip
    with pytest.raises(UserError, match=r"--model-config .*: .*" + re.escape(message)):
        validate_endpoint_case(case)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UserError, match="not a readable JSON file"):
        validate_endpoint_case(case)


def generated(*, isl: int = 128, osl: int = 32, ttft_ms: float, tpot_ms: float,
              device: str = "cpu", batch: int = 1, framework: str = "torch",
              **fields: object):  # fmt: skip
    """A generation result of llm-135m whose work is what the worker records."""
    record = Generation(isl=isl, osl=osl, ttft_p50_ms=ttft_ms, tpot_p50_ms=tpot_ms,
                        e2e_p50_ms=ttft_ms + (osl - 1) * tpot_ms, **fields)  # fmt: skip
    record = Work(SHAPES["llm-135m"], batch, batch, isl, osl, 4, 4).into(
        record, "workload llm-135m"
    )
    return make_result(workload="llm-135m", device=device, batch_size=batch, framework=framework,
                       latency_ms=summarize(samples(100.0, seed=1, n=5)),
                       details={"generation": to_dict(record)})  # fmt: skip


def test_a_decode_is_memory_bound_its_figure_the_mbu_and_a_prefill_is_held_to_gemm():
    result = generated(ttft_ms=800.0, tpot_ms=40.0)
    run = make_run([result], env={"ceilings": CPU_CEILINGS})
    record = result.details.generation
    limit = judge(result, run)
    # the decode (31 steps of 40 ms) takes longer than the prefill; it reads 4 bytes a
    # weight for 2 FLOPs: far under the balance of 60/30 FLOP/byte
    assert limit.verdict == "memory-bound" and limit.phase == "decode"
    assert limit.value == pytest.approx(record.decode_bytes_per_step / 0.040 / 30e9)
    assert f"decode MBU {limit.value:.0%} of 30.0 GB/s (measured);" in limit.figure
    assert read(METRICS["mbu"], result, run) == pytest.approx(limit.value)
    bound = prefill_bound(result, run)
    assert bound.achieved_gflops == pytest.approx(record.prefill_flops / 0.8 / 1e9)
    assert bound.mfu == pytest.approx(bound.achieved_gflops / 60.0)
    assert bound.least_ttft_ms == pytest.approx(record.prefill_flops / 60e9 * 1000)
    assert bound.bound_tokens_per_s == pytest.approx(128 * 60e9 / record.prefill_flops)
    assert read(METRICS["mfu"], result, run) == pytest.approx(bound.mfu)


def test_a_long_prompt_with_few_tokens_out_is_a_compute_bound_prefill():
    result = generated(isl=2048, osl=2, ttft_ms=20000.0, tpot_ms=40.0)
    limit = judge(result, make_run([result], env={"ceilings": CPU_CEILINGS}))
    record = result.details.generation
    assert limit.verdict == "compute-bound" and limit.phase == "prefill"
    assert limit.value == pytest.approx(record.prefill_flops / 20.0 / 60e9)
    assert limit.figure.startswith(f"prefill MFU {limit.value:.0%} of 60 GFLOP/s")


def test_without_a_ceiling_the_verdict_is_unknown_and_says_what_to_run():
    result = generated(ttft_ms=800.0, tpot_ms=40.0)
    limit = judge(result, make_run([result]))
    assert limit.verdict == "unknown"
    assert limit.figure == "no memory ceiling for cpu: run `dlbench roofline` on this machine"


def on_device(result: Result, name: str) -> Result:
    """`result` as measured on the GPU `name` (its framework's extra says which)."""
    extra = {**result.details.extra, "device_name": name}
    return replace(result, details=replace(result.details, extra=extra))


def test_a_gpu_without_a_roofline_is_held_to_its_datasheet_both_ways():
    """bf16 on an H100 SXM: 3,350 GB/s and 989 dense TFLOP/s, labelled datasheet."""
    result = generated(isl=1024, ttft_ms=2.0, tpot_ms=1.0, device="cuda:0", batch=8,
                       work_precision="bf16")  # fmt: skip
    result = on_device(result, "NVIDIA H100 80GB HBM3")
    run = make_run([result])
    bound = prefill_bound(result, run)
    assert (bound.ceiling.gflops, bound.ceiling.source) == (989e3, "datasheet: H100 SXM bf16 dense")
    limit = judge(result, run)
    assert limit.verdict == "memory-bound" and "datasheet: H100 SXM" in limit.figure
    fp32 = generated(ttft_ms=2.0, tpot_ms=1.0, device="cuda:0")  # no fp32 tensor figure
    fp32 = on_device(fp32, "NVIDIA H100 80GB HBM3")
    assert prefill_bound(fp32, make_run([fp32])).ceiling is None
    assert "no GEMM fp32 ceiling for cuda:0" in judge(fp32, make_run([fp32])).figure


def test_a_model_held_in_bf16_is_held_to_the_measured_amp_bf16_gemm_not_the_datasheet():
    """An H200's roofline measures its bf16 GEMMs as amp-bf16 (the gemm case's precision);
    a generation whose weights are bf16 multiplies with those kernels."""
    result = generated(isl=1024, ttft_ms=2.0, tpot_ms=1.0, device="cuda:0",
                       work_precision="bf16")  # fmt: skip
    result = on_device(result, "NVIDIA H200")
    ceilings = {"source_run": "roof", "values": {"cuda:0|gflops|amp-bf16|burst": 717e3,
                                                 "cuda:0|memory|burst": 4360.0}}  # fmt: skip
    bound = prefill_bound(result, make_run([result], env={"ceilings": ceilings}))
    assert bound.ceiling.gflops == 717e3 and bound.ceiling.measured
    assert bound.ceiling.source.startswith("measured gemm amp-bf16")


def test_a_figure_above_its_ceiling_is_flagged_impossible_and_never_picked():
    # a prefill at twice the GEMM ceiling's rate: 2 x 60 GFLOP/s
    result = generated(ttft_ms=1.0, tpot_ms=40.0, framework="onnxruntime-genai")
    fast = result.details.generation.prefill_flops / 120e9 * 1000.0
    generation = replace(result.details.generation, ttft_p50_ms=fast)
    result = replace(result, details=replace(result.details, generation=generation))
    honest = generated(ttft_ms=1000.0, tpot_ms=60.0)
    run = make_run([result, honest], env={"ceilings": CPU_CEILINGS})
    result, honest = with_limits(result, run), with_limits(honest, run)
    run = replace(run, results=[result, honest])
    assert ABOVE_CEILING in result.flags and ABOVE_CEILING not in honest.flags
    assert prefill_bound(result, run).note("").startswith("impossible: prefill at 200%")
    engines, pick = llm_tables(run)
    (row,) = [r for r in engines.rows if "onnxruntime" in r.label]
    mbu, mfu = engines.columns.index(METRICS["mbu"]), engines.columns.index(METRICS["mfu"])
    assert row.extra[mbu] is None and row.extra[mfu] is None and "impossible" in row.note
    assert all("onnxruntime" not in r.label for r in pick.rows)  # never a record
    assert "impossible, above its ceiling" in compare_case(result, honest, METRICS["ttft"]).limits
    assert ABOVE_CEILING in flag_legend(run) and "impossible" in flag_legend(run)


def test_a_gpu_waiting_for_its_host_between_decode_steps_is_host_bound():
    result = generated(ttft_ms=20.0, tpot_ms=8.0, device="cuda:0", decode_device_busy=0.55)
    limit = judge(result, make_run([result], env={"ceilings": CPU_CEILINGS}))
    assert (limit.verdict, limit.value) == ("host-bound", 0.55)
    assert "GPU busy 55% of the decode" in limit.figure
    assert HOST_BOUND in result_flags(result, cpus_available=2)
    busy = generated(ttft_ms=20.0, tpot_ms=8.0, device="cuda:0", decode_device_busy=0.95)
    assert HOST_BOUND not in result_flags(busy, cpus_available=2)


def test_a_case_whose_token_times_are_the_gpus_says_so_beside_the_hosts():
    """The device loop stamps its tokens on the GPU (CUDA events), generate's streamer
    on the host: the engines' table says which row is timed there."""
    on_gpu = generated(ttft_ms=30.0, tpot_ms=5.0, device="cuda:0", decode_device_busy=0.99)
    on_gpu = replace(on_gpu, case=replace(on_gpu.case, compile="device-loop"), details=replace(
        on_gpu.details, extra={"token_clock": DEVICE_CLOCK}))  # fmt: skip
    on_host = generated(ttft_ms=40.0, tpot_ms=8.0, device="cuda:0", decode_device_busy=0.99)
    on_host = replace(on_host, details=replace(on_host.details,
                                               extra={"token_clock": STREAMER_CLOCK}))  # fmt: skip
    engines, _ = llm_tables(make_run([on_gpu, on_host], env={"ceilings": CPU_CEILINGS}))
    notes = {row.label: row.note for row in engines.rows}
    (device_row,) = [label for label in notes if "device-loop" in label]
    assert ON_THE_DEVICE in notes[device_row]
    assert all(ON_THE_DEVICE not in note for label, note in notes.items() if label != device_row)


def served(**load: object):
    """An endpoint result against a server on this machine's loopback address."""
    result = generated(ttft_ms=500.0, tpot_ms=40.0, device=REMOTE_DEVICE, work_batch=1,
                       itl_p50_ms=40.0, itl_p99_ms=60.0)  # fmt: skip
    details = result.details.to_dict()
    details["endpoint"] = {"url": "http://127.0.0.1:8000", **load}
    return make_result(workload="llm-requests", framework="endpoint", device=REMOTE_DEVICE,
                       endpoint="http://127.0.0.1:8000", latency_ms=result.latency_ms,
                       details=details)  # fmt: skip


def test_a_server_on_loopback_is_held_to_this_cpu_unless_a_gpu_is_here():
    result = served()
    assert judge(result, make_run([result], env={"ceilings": CPU_CEILINGS})).verdict == (
        "memory-bound"
    )
    gpu_here = make_run([result], env={"ceilings": CPU_CEILINGS, "gpus": [{"name": "L4"}]})
    limit = judge(result, gpu_here)
    assert limit.verdict == "unknown" and "the server's device is unknown" in limit.figure


def test_a_servers_queue_dominating_its_ttft_is_queueing_and_saturation_comes_first():
    queue = ServerTiming("vllm:request_queue_time_seconds", 10, mean_ms=300.0)
    ttft = ServerTiming("vllm:time_to_first_token_seconds", 10, mean_ms=500.0)
    result = served(server={"family": "vLLM", "queue": queue.__dict__, "ttft": ttft.__dict__})
    limit = judge(result, make_run([result], env={"ceilings": CPU_CEILINGS}))
    assert (limit.verdict, limit.value) == ("queueing", pytest.approx(0.6))
    assert limit.figure.startswith("queue 300 ms of a 500 ms TTFT (60%")
    short = ServerTiming("q", 10, mean_ms=100.0).__dict__
    calm = served(server={"family": "vLLM", "queue": short, "ttft": ttft.__dict__})
    assert judge(calm, make_run([calm], env={"ceilings": CPU_CEILINGS})).verdict == "memory-bound"
    flooded = replace(served(saturated="the requests in flight grew 4x"), status="failed")
    assert judge(flooded, make_run([flooded])).figure == "stopped sending: the requests in "\
        "flight grew 4x"  # fmt: skip


def test_a_client_that_could_not_keep_up_is_client_bound_before_anything_else():
    hot = ClientHealth(processes=1, lag_samples=500, loop_lag_p50_ms=0.5,
                       loop_lag_p99_ms=1.0, cpu_share=0.97, chunks_per_s=9000.0)  # fmt: skip
    result = served(client=hot.__dict__)
    limit = judge(result, make_run([result], env={"ceilings": CPU_CEILINGS}))
    assert (limit.verdict, limit.value) == ("client-bound", 0.97)
    assert CLIENT_BOUND in result_flags(result, cpus_available=2)
    judged = with_limits(result, make_run([result]))
    page = results_table(make_run([judged]))
    assert "client-bound: client CPU 97% of a core (bound 90%)" in page
    assert "the benchmark&#x27;s client could not keep up" in flag_legend(make_run([judged]))


def test_a_servers_decode_batch_is_its_mean_of_running_requests_rounded_down():
    assert running_batch(None) == 1
    running = GaugeSamples("vllm:num_requests_running", samples=9, peak=8.0, mean=5.7)
    assert running_batch(ServerCounters(running=running)) == 5
    idle = GaugeSamples("vllm:num_requests_running", samples=9, peak=1.0, mean=0.2)
    assert running_batch(ServerCounters(running=idle)) == 1


def test_a_servers_config_is_its_model_config_else_the_one_beside_its_tokenizer(tmp_path):
    case = make_result(framework="endpoint", workload="llm-requests", device=REMOTE_DEVICE,
                       tokenizer=str(tmp_path / "tokenizer.json")).case  # fmt: skip
    assert served_config(case) is None and "--model-config FILE" in NO_CONFIG
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    found = served_config(case)
    assert found is not None and found.source == "the config.json beside --tokenizer"
    given = case.replaced(model_config=str(tmp_path / "config.json"))
    assert served_config(given).source == "--model-config"
