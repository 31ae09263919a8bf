"""Text generation: token latencies as the field defines them, tokens held to the torch
reference, and the engines for real on one tiny decoder."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import cli, dlbench, installed
from factories import make_result, make_run

from dlbench.backends.base import GenerationTrace, Job
from dlbench.measure.token_latency import TokenTimes, percentiles_ms, token_latencies
from dlbench.reference.decoder import OwnReference
from dlbench.report.studies.llm import llm_charts, llm_tables
from dlbench.results.files import read_json
from dlbench.spec.case import Case
from dlbench.spec.registry import FRAMEWORKS
from dlbench.worker.generation import _token_check
from dlbench.worker.token_check import (
    DIVERGED,
    IDENTICAL,
    NEAR_TIE,
    check_generations,
    check_tokens,
    failure,
)
from dlbench.workloads import get_workload
from dlbench.workloads.decoder import SHAPES, kv_cache_bytes

FAST = ("--min-time", "0", "--min-iters", "3", "--warmup", "1")
# each engine where it is installed (its converter included: FrameworkInfo.needs)
ENGINES = [name for name in ("onnxruntime-genai", "openvino-genai", "llama-cpp")
           if FRAMEWORKS[name].installed_version() is not None]  # fmt: skip


def test_ttft_tpot_and_inter_token_latency_follow_the_fields_definitions():
    # started at 10 s; tokens at +0.5 s, then every 0.1 s, then one late gap of 0.3 s
    times = TokenTimes(10.0, [10.5, 10.6, 10.7, 11.0])
    assert times.ttft_s == pytest.approx(0.5)
    assert times.e2e_s == pytest.approx(1.0)
    # TPOT leaves the first token out: (1.0 - 0.5) / 3 further tokens
    assert times.tpot_s == pytest.approx(0.5 / 3)
    assert times.gaps_s() == pytest.approx([0.1, 0.1, 0.3])
    latencies = token_latencies([times, TokenTimes(0.0, [0.2])])
    assert latencies.ttft_s == pytest.approx([0.5, 0.2])
    assert latencies.tpot_s == pytest.approx([0.5 / 3])  # one token: no time per further token
    assert latencies.itl_s == pytest.approx([0.1, 0.1, 0.3])
    p50, _, p99 = percentiles_ms(latencies.itl_s)
    assert p50 == pytest.approx(100.0) and p99 == pytest.approx(296.0)
    with pytest.raises(ValueError, match="no token"):
        token_latencies([TokenTimes(0.0, [])])


def reference(tokens, top1, top2):
    return {"tokens": np.array(tokens), "top1": np.array(top1), "top2": np.array(top2)}


def test_tokens_agree_diverge_at_a_near_tie_or_fail_at_a_clear_margin():
    ref = reference([[5, 6, 7], [8, 9, 10]], [[2.0, 3.0, 1.0]] * 2, [[1.0, 2.9995, 0.5]] * 2)
    same = check_tokens([[5, 6, 7], [8, 9, 10]], ref, tolerance=1e-3)
    assert same.verdict == IDENTICAL and same.agreeing == same.compared == 6
    assert failure(same) is None
    # position 1: top two logits 5e-4 apart, within 1e-3 x |3.0|: either token is right
    tie = check_tokens([[5, 4, 7], [8, 9, 10]], ref, tolerance=1e-3)
    assert tie.verdict == NEAR_TIE and tie.first_divergence == 1 and tie.agreeing == 5
    assert tie.margin_there == pytest.approx(5e-4) and failure(tie) is None
    # position 0: a margin of 1.0 is no rounding: the engine computed something else
    wrong = check_tokens([[5, 6, 7], [1, 9, 10]], ref, tolerance=1e-3)
    assert wrong.verdict == DIVERGED and wrong.first_divergence == 0
    assert "output position 0" in failure(wrong) and "1 apart" in failure(wrong)
    short = check_tokens([[5, 6]], ref, tolerance=1e-3)
    assert short.verdict.startswith(DIVERGED) and failure(short)


def test_repeated_generations_are_each_held_to_the_reference_and_the_worst_is_reported():
    ref = reference([[5, 6, 7], [8, 9, 10]], [[2.0, 3.0, 1.0]] * 2, [[1.0, 2.9995, 0.5]] * 2)
    exact, at_a_tie = [[5, 6, 7], [8, 9, 10]], [[5, 4, 7], [8, 9, 10]]
    same = check_generations([exact, exact, exact], ref, tolerance=1e-3)
    assert same.verdict == IDENTICAL and same.generations_agree
    # a GPU's bf16 run that turns a near tie the other way once: each is right, and the
    # check says they differ, reporting the departure (not the identical runs)
    tie = check_generations([exact, at_a_tie, exact], ref, tolerance=1e-3)
    assert tie.verdict == NEAR_TIE and tie.first_divergence == 1
    assert tie.generations_agree is False and failure(tie) is None
    # one generation off at a clear margin fails the case, whichever it is
    wrong = check_generations([exact, at_a_tie, [[5, 6, 7], [1, 9, 10]]], ref, tolerance=1e-3)
    assert wrong.verdict == DIVERGED and wrong.first_divergence == 0 and failure(wrong)


def generation_job(device: str, framework: str = "onnxruntime-genai", compile_mode: str = "default",
                   precision: str = "fp32") -> Job:  # fmt: skip
    case = Case("llm-tiny", framework, compile_mode, device=device, batch_size=1,
                precision=precision)  # fmt: skip
    spec = get_workload("llm-tiny")
    return Job(case, spec, device, 1, spec.resolve_params("cpu", {}), seed=0)


def traced(*generations: list[list[int]]) -> list[GenerationTrace]:
    return [GenerationTrace(tokens=g, started_s=0.0, token_times_s=[0.1] * 3) for g in generations]


def test_a_cpu_engine_must_repeat_itself_where_a_gpus_may_turn_a_near_tie_the_other_way():
    ref = reference([[5, 6, 7]], [[2.0, 3.0, 1.0]], [[1.0, 2.9995, 0.5]])
    own = OwnReference(ref, "torch eager fp32 on the same weights", None)
    runs = traced([[5, 6, 7]], [[5, 4, 7]])  # the second turned position 1's near tie
    on_gpu = _token_check(generation_job("cuda:0", "torch", "eager", "bf16"), runs, own)
    assert on_gpu.verdict == NEAR_TIE and on_gpu.generations_agree is False
    assert failure(on_gpu) is None
    # a CPU gives the same bits every call: a second generation that differs (a cache not
    # reset between calls, say) fails even where it differs at a near tie
    on_cpu = _token_check(generation_job("cpu"), runs, own)
    assert on_cpu.verdict.startswith(DIVERGED) and failure(on_cpu)
    # the reference itself must agree with itself, and then is taken as it is
    itself = generation_job("cpu", "torch", "eager", "fp32")
    assert failure(_token_check(itself, runs, None))
    same = _token_check(itself, traced([[5, 6, 7]], [[5, 6, 7]]), None)
    assert same.verdict.startswith("the reference itself") and same.generations_agree


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-w", "llm-tiny", "--param", "osl=1000"), "beyond its context of 1024 tokens"),
        (("-w", "llm-tiny", "-c", "script"), "compile mode"),
        (("-w", "llm-tiny", "-f", "onnxruntime-genai", "-p", "amp-bf16"), "precision"),
        (("-w", "llm-tiny", "-f", "openvino-genai", "-p", "bf16"), "allowed there: fp32"),
        (("-w", "llm-tiny", "-f", "torch", "-p", "amp-bf16"), "is autocast; text generation"),
        (("-w", "mlp", "-f", "torch", "-p", "bf16"), "for mlp, amp-bf16 autocasts"),
        (("-w", "mlp", "-f", "openvino-genai"), "not supported on 'openvino-genai'"),
        (("-w", "llm-tiny", "-f", "null"), "not supported on 'null'"),
        (("-w", "llm-tiny", "--transfer", "inside"), "not llm-tiny on torch"),
    ],
)
def test_bad_generation_cases_are_one_line_user_errors(args, message):
    done = cli("run", "--dry-run", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert message in line, line


@installed("transformers")
@pytest.mark.slow
@pytest.mark.long
def test_engines_generate_the_reference_tokens_from_the_same_weights(tmp_path):
    out = tmp_path / "run.json"
    engines = [arg for name in ENGINES for arg in ("-f", name)]
    done = dlbench(
        "run", "-w", "llm-tiny", "-f", "torch", "-c", "eager", "-c", "compile", "-c", "default",
        *engines, "-t", "1", *FAST, "--json", str(out), "--csv", str(tmp_path / "run.csv"),
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = json.loads(out.read_text())
    by_engine = {f"{r['case']['framework']}[{r['case']['compile']}]": r for r in run["results"]}
    assert set(by_engine) == {"torch[eager]", "torch[compile]", *(f"{e}[default]" for e in ENGINES)}
    for name, result in by_engine.items():
        assert result["status"] == "ok", (name, result["error"])
        generation = result["details"]["generation"]
        assert (generation["isl"], generation["osl"]) == (32, 16)
        assert generation["generations"] >= 3
        # the first token comes before the last; TPOT leaves the first one out
        assert 0 < generation["ttft_p50_ms"] < generation["e2e_p50_ms"]
        assert generation["tpot_p50_ms"] * 15 <= generation["e2e_p50_ms"]
        assert generation["decode_tokens_per_s"] > 0 and generation["output_tokens_per_s"] > 0
        # the harness's clock around a generation holds the engine's token clock
        assert result["latency_ms"]["median"] >= generation["e2e_p50_ms"] * 0.99
        assert generation["kv_cache_dtype"] == "float32" and generation["kv_cache_mb"] > 0
        assert result["details"]["threads"]["intra_op"] == 1
        verdict = generation["tokens"]["verdict"]
        if name == "torch[eager]":
            assert verdict.startswith("the reference itself")
        else:
            assert verdict in (IDENTICAL, NEAR_TIE), (name, generation["tokens"])
    for engine in ENGINES:  # each converted the shared checkpoint with its own tool, timed apart
        generation = by_engine[f"{engine}[default]"]["details"]["generation"]
        assert generation["converter"] and generation["convert_s"] > 0
        own = by_engine[f"{engine}[default]"]["details"]["frameworks_in_process"]
        assert "torch" not in own  # torch stayed out of its worker
    with open(tmp_path / "run.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert all(float(row["ttft"]) > 0 and float(row["decode_tps"]) > 0 for row in rows)
    tables = llm_tables(read_json(out))
    (engines_table, picks) = tables
    assert len(engines_table.rows) == len(by_engine)
    assert picks.rows[0].label.startswith("most output tokens/s within TTFT <= 500 ms")


@installed("transformers")
@pytest.mark.integration
def test_torch_generates_with_its_model_held_in_bf16_and_its_tokens_checked(tmp_path):
    """bf16 is the model's dtype (weights, KV cache), not autocast; its bytes are counted
    at 2 a value, and its tokens are held to the fp32 reference, not taken as it."""
    out = tmp_path / "run.json"
    done = dlbench("run", "-w", "llm-tiny", "-f", "torch", "-p", "bf16", "-t", "1", *FAST,
                   "--json", str(out), timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (result,) = json.loads(out.read_text())["results"]
    if result["status"] == "skipped":  # a CPU without AVX512-BF16 or AMX: never emulated
        assert "would be emulated" in result["error"], result["error"]
        return
    assert result["status"] == "ok", result["error"]
    generation, shape = result["details"]["generation"], SHAPES["llm-tiny"]
    assert result["details"]["extra"]["dtype"] == generation["kv_cache_dtype"] == "bfloat16"
    assert generation["kv_cache_mb"] * 2**20 == kv_cache_bytes(shape, 1, 32 + 16, 2)
    assert result["bytes_per_sample"] == 2 * shape.parameter_count() * 16  # weights per token
    assert generation["tokens"]["verdict"] in (IDENTICAL, NEAR_TIE), generation["tokens"]
    assert generation["tokens"]["compared"] == 16


@pytest.mark.integration
def test_a_batch_is_checked_sequence_by_sequence_and_repeats_merge_the_token_rates(tmp_path):
    if "onnxruntime-genai" not in ENGINES:
        pytest.skip("needs onnxruntime-genai (the llm-onnx extra)")
    out = tmp_path / "run.json"
    done = dlbench("run", "-w", "llm-tiny", "-f", "onnxruntime-genai", "-b", "2", "-t", "1",
                   *FAST, "--repeat", "2", "--json", str(out), timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (result,) = json.loads(out.read_text())["results"]
    generation = result["details"]["generation"]
    # both sequences' 16 tokens held to the reference's tokens for the same two prompts
    assert generation["tokens"]["compared"] == 2 * 16
    assert generation["tokens"]["verdict"] in (IDENTICAL, NEAR_TIE)
    # the clean processes made the headline (a disturbed one is run again; on a machine
    # so busy that none was clean, all of them did)
    every = result["details"]["processes"]["summaries"]
    used = [s for s in every if s.get("used")]
    clean = [s for s in every if not s.get("disturbed")]
    assert used == (clean or every) and len(every) >= 2 and len(clean) <= 2
    assert all(s["status"] == "ok" for s in every)
    # a rate of the merged result is the median of its processes' rates
    rates = [s["decode_tokens_per_s"] for s in used]
    assert generation["decode_tokens_per_s"] == pytest.approx(float(np.median(rates)))


def test_isl_and_osl_sweeps_plan_a_case_per_length_and_refuse_other_workloads():
    done = cli("run", "--dry-run", "-w", "llm-tiny", "-f", "torch", "--sweep", "isl=16,64",
               "--sweep", "osl=8,16")  # fmt: skip
    assert done.returncode == 0, done.stderr
    planned = [line for line in done.stdout.splitlines() if line.startswith("llm-tiny")]
    assert [line.split(" / ")[0] for line in planned] == [
        "llm-tiny isl=16 osl=8", "llm-tiny isl=16 osl=16",
        "llm-tiny isl=64 osl=8", "llm-tiny isl=64 osl=16",
    ]  # fmt: skip
    refused = cli("run", "--dry-run", "-w", "mlp", "--sweep", "isl=16")
    assert refused.returncode == 2 and "workload 'mlp' has no parameter isl" in refused.stderr


def generation_result(framework: str, batch: int, isl: int, ttft: float, decode: float):
    record = {"isl": isl, "osl": 16, "ttft_p50_ms": ttft, "tpot_p50_ms": 1000 / decode,
              "decode_tokens_per_s": decode, "output_tokens_per_s": decode * 0.9}  # fmt: skip
    return make_result(workload="llm-tiny", framework=framework, batch_size=batch,
                       params={"isl": isl, "osl": 16}, details={"generation": record})  # fmt: skip


def test_llm_charts_draw_ttft_by_prompt_length_decode_by_batch_and_the_front():
    isl_sweep = make_run([generation_result("torch", 1, isl, isl / 10, 50.0) for isl in (16, 64)])
    (ttft,) = llm_charts(isl_sweep)  # one batch, one engine: neither batch chart nor front
    assert ttft.name == "llm-ttft-isl-llm-tiny"
    assert [(p.x, p.y) for p in ttft.curves[0].points] == [(16, 1.6), (64, 6.4)]
    batch_sweep = make_run(
        [generation_result("torch", b, 32, 5.0, d) for b, d in ((1, 50.0), (4, 150.0))]
        + [generation_result("openvino-genai", b, 32, 4.0, d) for b, d in ((1, 60.0), (4, 120.0))]
    )
    decode, front = llm_charts(batch_sweep)
    assert decode.name == "llm-decode-batch-llm-tiny" and len(decode.curves) == 2
    assert [(p.x, p.y) for p in decode.curves[0].points] == [(1, 50.0), (4, 150.0)]
    ringed = {(p.label, c.label) for c in front.curves for p in c.points if p.marked}
    # torch at batch 4 decodes fastest (lowest TPOT, most tokens/s): it alone is the front
    assert ringed == {("bs=4 isl=32", "torch [eager] t=2")}
