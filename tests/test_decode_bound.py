"""A generation's decode against the memory-bandwidth bound (results.decode_bound):
the bytes a step reads, the bound and MBU against a measured or a datasheet ceiling,
computed when read and shown in the case's line, its JSON and CSV."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import dlbench
from factories import make_result, make_run, samples

from dlbench.cli.terminal import case_line
from dlbench.measure.stats import summarize
from dlbench.reference.decoder import SHARED_REFERENCE
from dlbench.results.decode_bound import datasheet_memory_ceiling, decode_bound
from dlbench.results.files import run_json, write_csv
from dlbench.results.metrics import METRICS, read
from dlbench.workloads.decoder import SHAPES, decode_step_bytes, kv_cache_bytes, prefill_flops


@pytest.mark.integration
def test_a_decode_step_reads_every_weight_but_the_embedding_and_the_cache_at_its_context():
    """Counted from the parameters of the model transformers builds, not the formula."""
    pytest.importorskip("transformers")
    from dlbench.backends.torch.decoder import build_decoder

    shape = SHAPES["llm-tiny"]
    model = build_decoder(shape, seed=0)
    read_whole = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    batch, isl, osl = 3, 32, 16
    rows = batch * model.model.embed_tokens.weight.shape[1]
    # the step giving token k attends to isl + k - 1 positions: their mean over k = 2..osl
    context = sum(isl + k - 1 for k in range(2, osl + 1)) / (osl - 1)
    cache = kv_cache_bytes(shape, batch, 1, 2) * context
    expected = (read_whole + rows) * 2 + cache
    assert decode_step_bytes(shape, batch, isl, osl, 2, 2) == pytest.approx(expected)
    # the same model's prefill (results.roofline_bound): 2 FLOPs a layer weight a prompt
    # token, causal attention (position i attends to i: QK^T and AV, 2 FLOPs each per
    # head dimension), and the output head once, for the first output token
    layers = sum(p.numel() for n, p in model.named_parameters()
                 if "embed_tokens" not in n and "lm_head" not in n)  # fmt: skip
    attention = 2 * 2 * shape.layers * shape.heads * shape.head_dim * sum(range(1, isl + 1))
    prefill = batch * (2 * layers * isl + 2 * model.lm_head.weight.numel() + attention)
    assert prefill_flops(shape, batch, isl) == pytest.approx(prefill)


def generation(device: str, tpot_ms: float, batch: int = 1, **extra: object):
    shape = SHAPES["llama-3.1-8b"]
    step = decode_step_bytes(shape, batch, 1024, 128, 2, 2)
    record = {"isl": 1024, "osl": 128, "tpot_p50_ms": tpot_ms, "decode_bytes_per_step": step,
              "decode_tokens_per_s": batch * 1000.0 / tpot_ms}  # fmt: skip
    return make_result(
        workload="llama-3.1-8b", device=device, batch_size=batch, precision="bf16",
        latency_ms=summarize(samples(1000.0, seed=1, n=5)),
        details={"generation": record, "extra": dict(extra)},
    )  # fmt: skip


def test_the_bound_and_mbu_are_read_against_the_runs_measured_memory_ceiling(tmp_path):
    result = generation("cuda:0", tpot_ms=8.0, batch=8, device_name="NVIDIA H100 80GB HBM3")
    ceilings = {"source_run": "roof", "values": {"cuda:0|memory": 3000.0}}
    run = make_run([result], env={"ceilings": ceilings})
    bound = decode_bound(result, run)
    step = result.details.generation.decode_bytes_per_step
    assert bound is not None and bound.ceiling is not None
    # measured wins over the datasheet's 3,350 GB/s for this GPU
    assert bound.ceiling.gbps == 3000.0 and bound.ceiling.source.startswith("measured")
    assert bound.achieved_gbps == pytest.approx(step / 0.008 / 1e9)
    assert bound.bound_tokens_per_s == pytest.approx(3000e9 / step)
    assert bound.batch_bound_tokens_per_s == pytest.approx(8 * 3000e9 / step)
    # MBU is decode tokens/s over the batch's bound, and a share below one here
    decode_tps = result.details.generation.decode_tokens_per_s
    assert bound.mbu == pytest.approx(decode_tps / bound.batch_bound_tokens_per_s)
    assert 0 < bound.mbu < 1 and not bound.above_bound
    assert read(METRICS["mbu"], result, run) == pytest.approx(bound.mbu)
    assert read(METRICS["mbu"], result) is None  # derived: no value without its run
    line = case_line(result, run)
    assert f"{100 * bound.mbu:.0f}% of the 3,000 GB/s ceiling (measured, run roof)" in line
    assert f"bound {bound.bound_tokens_per_s:.0f} tokens/s a sequence" in line
    derived = run_json(run)["results"][0]["derived"]["decode_bound"]
    assert derived["mbu"] == pytest.approx(bound.mbu) and derived["note"] is None
    write_csv(run, tmp_path / "run.csv")
    with open(tmp_path / "run.csv", newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert float(row["decode_bound"]) == pytest.approx(bound.batch_bound_tokens_per_s)


@pytest.mark.parametrize(
    ("name", "gbps", "label"),
    [
        ("NVIDIA H100 80GB HBM3", 3350.0, "H100 SXM"),
        ("NVIDIA H100 PCIe", 2000.0, "H100 PCIe"),
        ("NVIDIA H200", 4800.0, "H200"),
        ("NVIDIA A100-SXM4-80GB", 2039.0, "A100 80GB SXM"),
        ("NVIDIA A100-SXM4-40GB", 1555.0, "A100 40GB"),
        ("NVIDIA L40S", 864.0, "L40S"),
        ("NVIDIA L4", 300.0, "L4"),
    ],
)
def test_without_a_measured_ceiling_a_known_gpu_is_held_to_its_datasheet(name, gbps, label):
    result = generation("cuda:0", tpot_ms=8.0, device_name=name)
    bound = decode_bound(result, make_run([result]))
    assert bound is not None and bound.ceiling is not None
    assert (bound.ceiling.gbps, bound.ceiling.source) == (gbps, f"datasheet: {label}")
    assert not bound.ceiling.measured


def test_a_gpu_named_by_the_fingerprint_alone_and_an_unknown_one():
    result = generation("cuda:1", tpot_ms=8.0)  # no device_name from the framework
    run = make_run([result], env={"gpus": [{"name": "NVIDIA L4"}, {"name": "NVIDIA H200"}]})
    assert decode_bound(result, run).ceiling.source == "datasheet: H200"
    # a Grace Hopper's HBM is not an H200's: no guess
    assert datasheet_memory_ceiling("NVIDIA GH200 480GB") is None


def test_with_no_ceiling_at_all_the_line_says_to_measure_one():
    result = generation("cpu", tpot_ms=80.0)
    bound = decode_bound(result, make_run([result]))
    assert bound is not None and bound.ceiling is None and bound.mbu is None
    assert bound.achieved_gbps is not None
    line = case_line(result, make_run([result]))
    assert "decode" in line and "dlbench roofline" in line


def test_a_decode_faster_than_memory_is_said_to_be_a_bug_not_a_record():
    shape = SHAPES["llama-3.1-8b"]
    floor_ms = 1000.0 * decode_step_bytes(shape, 1, 1024, 128, 2, 2) / 3350e9
    result = generation("cuda:0", tpot_ms=floor_ms / 2, device_name="NVIDIA H100 80GB HBM3")
    run = make_run([result])
    bound = decode_bound(result, run)
    assert bound.above_bound and bound.mbu == pytest.approx(2.0)
    assert "above the memory-bandwidth bound" in bound.note(result.case.device)
    assert "[red]" in case_line(result, run)
    # at the bound exactly it is the bound, not above it
    at = generation("cuda:0", tpot_ms=floor_ms, device_name="NVIDIA H100 80GB HBM3")
    assert not decode_bound(at, make_run([at])).above_bound


def test_a_result_without_decode_bytes_has_no_bound():
    result = make_result(workload="mlp")
    assert decode_bound(result, make_run([result])) is None
    assert "decode" not in case_line(make_result(workload="mlp", latency_ms=summarize([1.0])),
                                     make_run([]))  # fmt: skip


@pytest.mark.slow
def test_a_cpu_case_loads_the_shared_checkpoint_and_shows_its_decode_bandwidth(tmp_path):
    """The CPU path as before (the shared checkpoint, its reference made apart), with
    the decode's bytes, bandwidth and a hint to measure the ceiling on its line."""
    out = tmp_path / "run.json"
    # eager alone: a compiled decoder's tokens are held to the same reference in
    # test_worker_generation, and its compile would cost this test 45 s more
    done = dlbench("run", "-w", "llm-tiny", "-f", "torch", "-c", "eager",
                   "-t", "1", "--min-time", "0", "--min-iters", "3", "--warmup", "1",
                   "--json", str(out), timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (eager,) = json.loads(out.read_text())["results"]
    assert eager["status"] == "ok", eager["error"]
    assert eager["details"]["extra"]["weights"].startswith("the shared checkpoint")
    assert eager["details"]["generation"]["tokens"]["reference"] == SHARED_REFERENCE
    bound = eager["derived"]["decode_bound"]
    assert bound["achieved_gbps"] > 0 and "dlbench roofline" in bound["note"]
    assert eager["details"]["generation"]["tokens"]["verdict"].startswith("the reference itself")
    shown = " ".join(done.stderr.split())  # the line as printed, unwrapped
    assert "; decode " in shown and "no memory ceiling for cpu: run `dlbench roofline`" in shown
