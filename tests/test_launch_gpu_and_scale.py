"""Devices, placement checks, ceilings and efficiency, the hardware table, DDP scaling.

CPU-only tests run everywhere (DDP with gloo); the GPU tests are marked and
skipped with a reason where torch sees no CUDA device.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import cli, dlbench
from factories import make_result, make_run

from dlbench.backends.base import placement
from dlbench.errors import CaseError
from dlbench.measure.energy import EnergyReading
from dlbench.plan.build import RunRequest, build_plan
from dlbench.report.table import flags
from dlbench.results.ceilings import ceilings_from_results, efficiency, efficiency_in_run
from dlbench.results.details import Details
from dlbench.results.env import Fingerprint
from dlbench.results.files import read_json
from dlbench.results.records import Result
from dlbench.worker.ddp_rank import _total_energy, group_throughput
from dlbench.worker.placement import placement_error

# starts a process or imports a framework: not in the fast tier (tests/conftest.py)
pytestmark = pytest.mark.integration

torch = pytest.importorskip("torch")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
FAST = ("--min-time", "0", "--min-iters", "3", "--warmup", "1")


def run_json(tmp_path: Path, *args: str, expect: int = 0, name: str = "run.json") -> dict:
    out = tmp_path / name
    done = dlbench(*args, "--json", str(out), "-q", timeout=900)
    assert done.returncode == expect, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.alone  # the timed region's length is paced by the warm-up's: a busy neighbour
# slowed the warm-up and not the loop, and 0.36 s were timed of the 0.5 asked
def test_ddp_with_gloo_on_two_processes_reports_scaling(tmp_path):
    run = run_json(
        tmp_path, "run", "-w", "mlp", "-m", "train", "-f", "torch", "-d", "cpu", "--nproc", "2",
        "-b", "256", "--min-time", "0.5", "--min-iters", "5", "--warmup", "8",
    )  # fmt: skip
    single, double = run["results"]
    assert (single["case"]["nproc"], double["case"]["nproc"]) == (1, 2)
    assert single["status"] == double["status"] == "ok", (single["error"], double["error"])
    ddp = double["details"]["ddp"]
    assert ddp["world_size"] == 2 and ddp["backend"] == "gloo"
    assert len(ddp["per_rank_throughput"]) == len(ddp["per_rank_wall_s"]) == 2
    # the group's rate: every rank's agreed steps over the slowest rank's measured time
    samples = 2 * double["case"]["batch_size"] * ddp["iterations_per_rank"]
    assert double["throughput"] == pytest.approx(samples / max(ddp["per_rank_wall_s"]))
    # each rank's own loop held the agreed steps: rank 0's samples are its steps
    assert len(double["samples_ms"]) == ddp["iterations_per_rank"]
    assert max(ddp["per_rank_wall_s"]) >= sum(double["samples_ms"]) / 1000.0
    # the agreed count is paced by the ranks' fastest warm-up step: about --min-time is
    # timed (pacing by the slowest timed a third of it). Alone on 2 cores the steady
    # steps once ran 26% faster than the fastest of 3 warm-up steps (0.37 s timed): 8
    # warm-up steps, and a bound a third pacing still fails
    assert max(ddp["per_rank_wall_s"]) >= 0.6 * 0.5
    expected = double["throughput"] / (2 * single["throughput"])
    # computed when read (results.scaling), written beside the result, never into it
    assert "scaling_efficiency" not in ddp
    scaling = double["derived"]["scaling"]
    assert scaling["scaling_efficiency"] == pytest.approx(expected)
    assert scaling["baseline_throughput"] == pytest.approx(single["throughput"])
    # the cores are shared out: one thread per process on a 2-CPU machine, in both cases
    assert single["case"]["threads"] == double["case"]["threads"]
    # the parent sampled the whole process tree (torchrun and its ranks)
    assert double["details"]["timeline"]["points"]


def rank(steps: int, wall_s: float, batch: int = 10) -> dict:
    return {"steps": steps, "samples": steps * batch, "wall_s": wall_s}


def test_a_ddp_group_rate_is_its_samples_over_the_slowest_rank():
    """Two ranks of 100 steps of 10 samples, one taking 2 s: the group did 2000
    samples in 2 s (1000/s), not the 1000 + 500 its ranks' own rates add to."""
    assert group_throughput([rank(100, 1.0), rank(100, 2.0)], agreed=100) == 1000.0
    with pytest.raises(CaseError, match=r"timed \[100, 99\] steps, not the 100"):
        group_throughput([rank(100, 1.0), rank(99, 1.0)], agreed=100)
    with pytest.raises(CaseError, match="measured no time"):
        group_throughput([rank(100, 0.0)], agreed=100)


def test_a_ddp_group_s_energy_is_every_rank_s_joules_or_why_there_are_none():
    """Two metered ranks: their joules add, over every rank's samples. A rank whose
    reading has neither joules nor a reason makes the group's unmeasurable, saying
    "no reading" (as one process's reading does), never a reason of None."""
    metered = [
        {**rank(10, 1.0), "energy": EnergyReading("nvml", 3.0, 1.0)},
        {**rank(10, 1.0), "energy": EnergyReading("nvml", 5.0, 2.0)},
    ]
    total = _total_energy(metered)
    assert total.joules == 8.0
    assert total.joules_per_sample == pytest.approx(8.0 / 200)
    blank = {**rank(10, 1.0), "energy": EnergyReading("nvml")}
    assert _total_energy([metered[0], blank]).unmeasurable == "no reading"
    unmetered = {**rank(10, 1.0), "energy": None}
    assert _total_energy([unmetered]).unmeasurable == "no rank metered its device"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-w", "mlp", "--nproc", "2"), "torch training steps"),
        (("-w", "mlp", "-m", "train", "-f", "null", "--nproc", "2"), "torch training steps"),
        (("-w", "mlp", "-m", "train", "--nproc", "2", "-c", "script"), "not script"),
        (("-w", "mlp", "-m", "train", "--torchrun", "--nnodes 2"), "--torchrun goes with --nproc"),
        (("-w", "mlp", "-f", "onnxruntime", "--transfer", "inside"), "implemented for torch"),
        (("-w", "mlp", "-d", "tpu"), "unknown device 'tpu'"),
        (("-w", "mlp", "-m", "train", "--nproc", "2", "--torchrun", "--rdzv-id 'x"), "--torchrun"),
        (
            ("-w", "mlp", "-m", "train", "--nproc", "2", "--torchrun=--nproc-per-node=4"),
            "must not set --nproc-per-node",
        ),
        (("-w", "h2d", "--transfer", "inside"), "implemented for torch"),
    ],
)
def test_bad_device_and_scale_options_are_one_line_errors(args, message):
    done = cli("run", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_asking_for_a_gpu_that_is_not_there_fails_clearly(tmp_path):
    run = run_json(tmp_path, "run", "-w", "mlp", "-d", "cuda:1", "-b", "4", *FAST, expect=1)
    (result,) = run["results"]
    assert result["status"] == "failed"
    assert "cuda:1" in result["error"] and "--device cpu" in result["error"]
    assert "no GPU" in result["details"].get("timeline", {}).get("gpu_telemetry", "no GPU")


def test_placement_is_checked_against_what_each_framework_recorded():
    torch_cpu = Details(placement=placement("torch tensors", "cpu", "cpu"))
    assert placement_error("cpu", torch_cpu) is None
    assert "torch tensors ran on cpu" in (placement_error("cuda:0", torch_cpu) or "")
    tf_cpu = Details(
        placement=placement("TensorFlow", "/job:localhost/replica:0/task:0/device:CPU:0", "cpu")
    )
    assert placement_error("cpu", tf_cpu) is None
    assert "TensorFlow ran on cpu" in (placement_error("cuda:0", tf_cpu) or "")
    ort_gpu = Details(placement=placement("ONNX Runtime", "CUDAExecutionProvider", "cuda"))
    assert placement_error("cuda:0", ort_gpu) is None
    assert "ONNX Runtime ran on cuda" in (placement_error("cpu", ort_gpu) or "")
    assert placement_error("cpu", Details()) is None  # the null backend places nothing


def result(workload: str, device: str = "cpu", **values: object) -> Result:
    return make_result(workload=workload, device=device, batch_size=1, threads=1, **values)


def test_efficiency_divides_by_the_matching_ceiling():
    ceilings = ceilings_from_results(
        [
            result("gemm", gflops=100.0, primary_metric="gflops"),
            result("gemm", gflops=80.0, primary_metric="gflops"),  # the max is kept
            result("gemm", gflops=300.0, primary_metric="gflops", precision="amp-bf16"),
            result("copy", gbps=20.0, primary_metric="gbps"),
            result("gemm", device="cuda:0", gflops=5e5, primary_metric="gflops"),
        ],
        "roof-1",
    )
    assert ceilings.values["cpu|gflops|fp32"] == 100.0
    mlp = result("mlp", gflops=25.0, primary_metric="gflops")
    found = efficiency(mlp, ceilings)
    assert found is not None
    assert found["fraction"] == pytest.approx(0.25) and found["ceilings_run"] == "roof-1"
    bf16 = result("mlp", gflops=150.0, primary_metric="gflops", precision="amp-bf16")
    assert efficiency(bf16, ceilings)["fraction"] == pytest.approx(0.5)
    add = result("add", gbps=15.0, primary_metric="gbps")
    assert efficiency(add, ceilings)["fraction"] == pytest.approx(0.75)
    # no ceiling for that precision or device: no made-up number
    assert efficiency(result("mlp", gflops=1.0, precision="tf32"), ceilings) is None
    assert efficiency(result("mlp", device="cuda:1", gflops=1.0), ceilings) is None


def test_throttled_results_are_flagged_in_the_table():
    hot = result("add", details={"timeline": {"throttle": "thermal"}}, flags=["throttled:thermal"])
    assert flags(hot) == "throttled:thermal"
    assert flags(result("add")) == ""


@pytest.mark.slow
def test_roofline_then_every_result_carries_its_efficiency(tmp_path):
    roof = run_json(
        tmp_path, "roofline", "-d", "cpu", "--min-time", "0.2", "--sustain", "0.3", name="roof.json"
    )
    by_case = {(r["case"]["workload"], r["case"]["precision"]): r for r in roof["results"]}
    assert by_case[("gemm", "fp32")]["status"] == "ok"
    assert by_case[("gemm", "tf32")]["status"] == "skipped"
    assert by_case[("h2d", "fp32")]["status"] == "skipped"  # no transfer on a CPU
    assert by_case[("copy", "fp32")]["gbps"] > 0
    # windows on the CPU too: copy (ceiling=sustained) runs past --sustain, and the best
    # of its kernels is its one ceiling figure; the fp32 GEMM (burst) stops after its
    # windows, with a sustained figure only where they ran past --sustain
    copy = by_case[("copy", "fp32")]["details"]["power_regimes"]
    assert copy["sustained"]["after_s"] == 0.3 and copy["timed_by"] == "host-clock"
    assert set(copy["sustained"]["by_kernel"]) == {"copy", "add", "sum"}
    gemm = by_case[("gemm", "fp32")]["details"]["power_regimes"]
    assert gemm["burst"]["rate"] > 0 and gemm["burst"]["after_s"] == 0.0
    # a ceiling per precision whose GEMM ran: fp32 always, the 16-bit ones where the CPU
    # has them (AVX512-BF16, AMX)
    gemm_rates = {
        f"cpu|gflops|{precision}": (regimes.get("sustained") or regimes["burst"])["rate"]
        for (workload, precision), each in by_case.items()
        if workload == "gemm" and each["status"] == "ok"
        for regimes in [each["details"]["power_regimes"]]
    }
    assert "cpu|gflops|fp32" in gemm_rates
    assert roof["env"]["ceilings"]["values"] == {
        **gemm_rates,
        "cpu|memory": max(copy["sustained"]["by_kernel"].values()),
    }
    run = run_json(
        tmp_path, "run", "-w", "add", "-w", "mlp", "-d", "cpu", "--param", "size=1024", *FAST
    )
    assert run["env"]["ceilings"]["source_run"] == roof["id"]
    for each in run["results"]:
        assert "stored_efficiency" not in each["details"]  # computed when read, never stored
        share = each["derived"]["efficiency"]
        assert share["ceilings_run"] == roof["id"]
        assert share["fraction"] > 0 and math.isfinite(share["fraction"])
    add = next(r for r in run["results"] if r["case"]["workload"] == "add")
    assert add["derived"]["efficiency"]["basis"] == "memory bandwidth"
    # read back, the run computes the same values from its env's ceilings
    loaded = read_json(tmp_path / "run.json")
    shown = [efficiency_in_run(r, loaded) for r in loaded.results]
    assert shown == [r["derived"]["efficiency"] for r in run["results"]]


@pytest.mark.slow
def test_seed_add_and_the_hardware_table_over_two_machines(tmp_path):
    plan = build_plan(RunRequest(suite="seed-add"))
    assert {dict(c.params)["size"] for c in plan.cases} == {12288}
    assert {c.compile for c in plan.cases} == {"eager", "script"}
    first = run_json(tmp_path, "run", "seed-add", "--param", "size=512", *FAST, name="a.json")
    for each in first["results"]:
        assert each["status"] == "ok", each["error"]
        assert each["details"]["transfer"] == "none (the device is the host)"
    # the same run as if from another machine, to pivot on
    other = dict(first, id="other-machine-run")
    other["env"] = {**first["env"], "hostname": "box2", "cpu_model": "Other CPU 9000"}
    (tmp_path / "b.json").write_text(json.dumps(other))
    done = dlbench(
        "compare", "--by", "hardware", str(tmp_path / "a.json"), str(tmp_path / "b.json")
    )
    assert done.returncode == 0, done.stderr
    assert "it/s" in done.stdout and "GB/s" in done.stdout
    assert "Other CPU 9000" in done.stdout and first["env"]["cpu_model"][:20] in done.stdout


# ---- on a CUDA GPU (skipped elsewhere) ------------------------------------


@pytest.mark.gpu
@needs_gpu
@pytest.mark.slow
def test_gpu_gemm_precisions_add_telemetry_and_memory(tmp_path):
    run = run_json(
        tmp_path, "run", "-w", "gemm", "-d", "cuda", "--param", "size=4096",
        "-p", "fp32", "-p", "tf32", "-p", "amp-bf16", *FAST,
    )  # fmt: skip
    rates = {r["case"]["precision"]: r["gflops"] for r in run["results"] if r["status"] == "ok"}
    assert rates["amp-bf16"] > rates["fp32"]
    for each in run["results"]:
        assert each["details"]["extra"]["cuda_max_memory_allocated_mb"] > 0
        points = each["details"]["timeline"]["points"]
        assert any(p.get("gpu") for p in points), "NVML telemetry missing on a GPU case"


@pytest.mark.gpu
@needs_gpu
@pytest.mark.slow
def test_gpu_transfer_inside_is_slower_than_outside(tmp_path):
    run = run_json(
        tmp_path, "run", "-w", "add", "-d", "cuda", "--param", "size=4096", *FAST, name="out.json"
    )
    inside = run_json(
        tmp_path, "run", "-w", "add", "-d", "cuda", "--param", "size=4096",
        "--transfer", "inside", *FAST, name="in.json",
    )  # fmt: skip
    (outside_result,), (inside_result,) = run["results"], inside["results"]
    assert inside_result["details"]["transfer"].startswith("inside")
    assert inside_result["latency_ms"]["median"] > outside_result["latency_ms"]["median"]


def test_a_rate_above_the_ceiling_is_explained_not_clipped():
    ceilings = ceilings_from_results([result("copy", gbps=20.0, primary_metric="gbps")], "r")
    cached = efficiency(result("add", gbps=30.0, primary_metric="gbps"), ceilings)
    assert cached["fraction"] == pytest.approx(1.5)
    assert "cache" in cached["note"]
    assert "note" not in efficiency(result("add", gbps=19.0, primary_metric="gbps"), ceilings)


@pytest.mark.slow
def test_a_ddp_case_that_cannot_run_ends_every_rank_and_says_why(tmp_path):
    run = run_json(
        tmp_path, "run", "-w", "mlp", "-m", "train", "-d", "cpu", "--nproc", "2", "-p", "tf32",
        *FAST,
    )  # fmt: skip
    assert [(r["case"]["nproc"], r["status"]) for r in run["results"]] == [
        (1, "skipped"),
        (2, "skipped"),
    ]
    assert "TF32" in run["results"][1]["error"]


def test_ddp_efficiency_counts_every_gpu_but_one_shared_cpu():

    ceilings = ceilings_from_results(
        [
            result("gemm", gflops=100.0, primary_metric="gflops"),
            result("gemm", device="cuda:0", gflops=1000.0, primary_metric="gflops"),
        ],
        "r",
    )
    on_gpus = result(
        "mlp", device="cuda:0", nproc=4, ddp=True, gflops=1000.0, primary_metric="gflops"
    )
    assert efficiency(on_gpus, ceilings)["fraction"] == pytest.approx(0.25)
    on_cpu = result("mlp", nproc=2, ddp=True, gflops=50.0, primary_metric="gflops")
    assert efficiency(on_cpu, ceilings)["fraction"] == pytest.approx(0.5)


def test_only_a_roofline_run_sets_ceilings_and_timed_copies_use_the_bus_ceiling():
    from dlbench.results.ceilings import with_measured_ceilings

    stored = ceilings_from_results(
        [
            result("gemm", gflops=100.0, primary_metric="gflops"),
            result("copy", device="cuda:0", gbps=2000.0, primary_metric="gbps"),
            result("h2d", device="cuda:0", gbps=50.0, primary_metric="gbps"),
        ],
        "roof",
    )
    run = make_run(env=Fingerprint(ceilings=stored))
    small_gemm = result("gemm", gflops=10.0, primary_metric="gflops")
    run = with_measured_ceilings(run, small_gemm)
    assert run.env.ceilings.values["cpu|gflops|fp32"] == 100.0  # not replaced
    assert efficiency_in_run(small_gemm, run)["fraction"] == pytest.approx(0.1)
    timed_copy = result(
        "add", device="cuda:0", gbps=40.0, primary_metric="gbps",
        details={"transfer": "inside (host-to-device copy of the inputs timed)"},
    )  # fmt: skip
    found = efficiency(timed_copy, stored)
    assert found["basis"] == "host-to-device bandwidth"
    assert found["fraction"] == pytest.approx(0.8)
    # with the copied bytes recorded, the bus rate is theirs, not the kernel's:
    # 40 steps/s of a 1.2 GB copy is 48 GB/s of a 50 GB/s bus (the H100 showed
    # the kernel's bytes at 1.41x the bus ceiling)
    copied = replace(timed_copy.details, transfer_bytes_per_step=1.2e9)
    timed_copy = replace(timed_copy, throughput=40.0, details=copied)  # batch 1: 40 steps/s
    found = efficiency(timed_copy, stored)
    assert found["basis"].startswith("host-to-device bandwidth (bytes copied")
    assert found["fraction"] == pytest.approx(0.96)


def test_a_run_reads_its_efficiency_against_the_roofline_it_copied(tmp_path):
    from dataclasses import replace

    from factories import make_case

    from dlbench.launch.session import run_plan
    from dlbench.results.store import open_store
    from dlbench.spec.case import Settings

    def runner(case, settings, on_note, files_dir):
        return replace(result(case.workload, gflops=100.0 if case.workload == "gemm" else 25.0,
                              primary_metric="gflops"), case=case)  # fmt: skip

    with open_store(tmp_path / "s.sqlite") as store:
        roof = run_plan("ceilings", [make_case(workload="gemm")], Settings(), store, runner=runner)
        assert roof.env.ceilings.values == {"cpu|gflops|fp32": 100.0}
        run = run_plan("t", [make_case(workload="mlp")], Settings(), store, runner=runner)
        stored = store.load_run(run.id)
    (mlp,) = stored.results
    assert mlp.details.stored_efficiency is None  # nothing written in after the worker
    assert efficiency_in_run(mlp, stored)["fraction"] == pytest.approx(0.25)
    assert efficiency_in_run(roof.results[0], roof)["fraction"] == pytest.approx(1.0)


@pytest.mark.slow
def test_a_timed_out_ddp_case_leaves_no_rank_behind(tmp_path):
    import os

    import psutil

    # The case's scratch (torchrun's and every rank's command line name it) under
    # this test's own folder: another test's ranks running beside it are not ours.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = tmp_path / "run.json"
    done = dlbench(
        "run", "-w", "mlp", "-m", "train", "-d", "cpu", "--nproc", "2", "-b", "64",
        "--min-time", "120", "--timeout", "8", "--json", str(out), "-q",
        env={**os.environ, "TMPDIR": str(scratch)},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    run = json.loads(out.read_text())
    assert all("timed out" in r["error"] for r in run["results"])
    ours = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if str(scratch) in " ".join(p.info["cmdline"] or [])
    ]
    assert ours == []
