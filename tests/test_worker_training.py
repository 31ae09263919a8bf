"""Training benchmarks: MNIST time-to-train (torch, TensorFlow), precisions, large models."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import cli, dlbench
from factories import checked_result, make_case, make_result, make_run

from dlbench.data.mnist import synthetic_mnist, write_idx
from dlbench.launch.runner import run_case
from dlbench.plan.build import RunRequest, build_plan
from dlbench.results.details import Epoch
from dlbench.spec.case import Case, Settings
from dlbench.spec.record_dict import to_dict
from dlbench.worker.epochs import training_error
from dlbench.workloads.mnist_train import epoch_permutation, usable_train_samples

# 60 steps of 64: past the first-epoch guard's 50 steps, still a few seconds
SMALL_MNIST = ("--param", "train_samples=3840", "--param", "test_samples=500")


def run_json(tmp_path: Path, *args: str, expect: int = 0) -> dict:
    out = tmp_path / "run.json"
    done = dlbench("run", *args, "--json", str(out), "-q", timeout=900)
    assert done.returncode == expect, done.stderr[-2000:]
    return json.loads(out.read_text())


def by_case(run: dict) -> dict[str, dict]:
    return {f"{r['case']['framework']}[{r['case']['compile']}]": r for r in run["results"]}


@pytest.mark.slow
def test_mnist_trains_in_tensorflow_with_decreasing_loss(tmp_path):
    """Both of TensorFlow's training loops learn, and the epoch loop's bookkeeping (the
    worker's, for every framework) adds up. torch learns in the tests below: it
    reaches a target accuracy, and trains two epochs from IDX files and compiled."""
    run = run_json(
        tmp_path,
        *("-w", "mnist-train", "-f", "tensorflow"),
        # half SMALL_MNIST: TensorFlow's steps are the slow ones (both loops reach 0.93)
        *("-c", "fit", "-c", "function", "--epochs", "2"),
        *("--param", "train_samples=1920", "--param", "test_samples=500"),
    )
    results = by_case(run)
    assert set(results) == {"tensorflow[fit]", "tensorflow[function]"}
    for name, result in results.items():
        assert result["status"] == "ok", (name, result["error"])
        epochs = result["details"]["training"]["epochs"]
        assert [e["epoch"] for e in epochs] == [1, 2]
        assert epochs[1]["loss"] < epochs[0]["loss"], name
        assert epochs[-1]["accuracy"] > 0.5, name  # chance is 0.1
        assert result["details"]["training"]["data"]["synthetic"] is True
        assert result["details"]["training"]["data"]["train_samples_used"] == 1920
        total = sum(e["train_s"] for e in epochs)
        assert result["details"]["training"]["time_to_train_s"] == pytest.approx(total)
        assert result["throughput"] == pytest.approx(2 * 1920 / total)
        # evaluation is timed apart from training
        assert all(e["eval_s"] > 0 for e in epochs)
        assert result["details"]["training"]["wall_to_train_s"] > total
        steady = 1920 / epochs[1]["train_s"]  # epoch 2 alone: no compilation in it
        assert result["details"]["training"]["steady_samples_per_s"] == pytest.approx(steady)
        # the parent's resource timeline covers the training
        assert result["details"]["timeline"]["points"]
        assert result["details"]["timeline"]["summary"]["window"] == "measured"
        # the data, the loss sum and the network's 8 weights, each asked where it is
        placed = result["details"]["placement"]
        assert placed["kind"] == "cpu" and int(placed["reported"].split(" on ")[0]) >= 13


@pytest.mark.slow
def test_same_initial_weights_give_the_same_first_test_loss_in_both_frameworks(tmp_path):
    """Both frameworks start from the reference weights: before any update the nets agree."""
    from dlbench.backends.base import Job
    from dlbench.workloads import get_workload

    torch = pytest.importorskip("torch")
    from dlbench.backends.torch.precision import precision_plan
    from dlbench.backends.torch.training import TorchMnistTrainer

    data = synthetic_mnist(640, 300, seed=0)
    workload = get_workload("mnist-train")
    params = {"epochs": 1, "train_samples": 640, "test_samples": 300}
    case = Case("mnist-train", "torch", "eager", mode="train", device="cpu")
    job = Job(case, workload, "cpu", 64, params, 0)
    cpu = torch.device("cpu")
    trainer = TorchMnistTrainer(job, data, cpu, precision_plan("fp32", cpu, True))
    torch_loss, _ = trainer.evaluate()
    # TensorFlow in its own process (one framework per process)
    script = (
        "import json, sys\n"
        "from dlbench.backends.framework_guard import block_other_frameworks\n"
        "block_other_frameworks('tensorflow')  # as a TensorFlow worker is\n"
        "from dlbench.backends.base import Job\n"
        "from dlbench.spec.case import Case\n"
        "from dlbench.data.mnist import synthetic_mnist\n"
        "from dlbench.workloads import get_workload\n"
        "from dlbench.backends.tensorflow.training import TfMnistTrainer\n"
        "case = Case('mnist-train', 'tensorflow', 'function', mode='train', device='cpu')\n"
        f"job = Job(case, get_workload('mnist-train'), 'cpu', 64, {params!r}, 0)\n"
        "trainer = TfMnistTrainer(job, synthetic_mnist(640, 300, 0), '/CPU:0')\n"
        "print(json.dumps(trainer.evaluate()))\n"
    )
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    tf_loss, _ = json.loads(done.stdout.strip().splitlines()[-1])
    assert tf_loss == pytest.approx(torch_loss, rel=1e-4)


@pytest.mark.slow
def test_torch_compile_trains_mnist_and_reports_the_first_step_apart(tmp_path):
    run = run_json(
        tmp_path, "-w", "mnist-train", "-f", "torch", "-c", "compile", "--epochs", "1", *SMALL_MNIST
    )
    (result,) = run["results"]
    assert result["status"] == "ok", result["error"]
    assert result["first_call_ms"] > 0
    assert result["details"]["training"]["epochs"][0]["accuracy"] > 0.3


def write_mnist_dir(folder: Path, gz: bool) -> None:
    data = synthetic_mnist(700, 200, seed=3)
    suffix = ".gz" if gz else ""
    folder.mkdir()
    write_idx(folder / f"train-images-idx3-ubyte{suffix}", data.train_images)
    write_idx(folder / f"train-labels-idx1-ubyte{suffix}", data.train_labels.astype(np.uint8))
    write_idx(folder / f"t10k-images-idx3-ubyte{suffix}", data.test_images)
    write_idx(folder / f"t10k-labels-idx1-ubyte{suffix}", data.test_labels.astype(np.uint8))


@pytest.mark.slow
def test_idx_files_from_data_dir_are_used_and_progress_is_reported(tmp_path):
    folder = tmp_path / "mnist"
    write_mnist_dir(folder, gz=True)
    case = Case.of(
        workload="mnist-train",
        framework="torch",
        compile="eager",
        mode="train",
        device="cpu",
        params=(("epochs", 2), ("test_samples", 10_000), ("train_samples", 60_000)),
        data_dir=str(folder),
    )
    notes: list[str] = []
    result = run_case(case, Settings(timeout_s=300), notes.append)
    assert result.ok, result.error
    data = to_dict(result.details.training.data)
    assert data["synthetic"] is False and "mnist" in data["source"]
    # 700 samples hold 10 whole batches of 64; the ragged rest is left out everywhere
    assert data["train_samples_used"] == 640 and data["test_samples"] == 200
    assert notes and notes[-1].startswith("epoch 2/2: train")
    first, second = result.details.training.epochs
    assert second.loss < first.loss  # torch's loop learns


def test_a_corrupt_idx_file_is_a_one_line_user_error(tmp_path):
    folder = tmp_path / "mnist"
    write_mnist_dir(folder, gz=False)
    images = folder / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-100])  # truncated download
    done = cli("run", "-w", "mnist-train", "--data-dir", str(folder))
    assert done.returncode == 2
    assert "train-images-idx3-ubyte" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_target_accuracy_stops_early_or_fails_clearly(tmp_path):
    reached = run_json(
        tmp_path,
        *("-w", "mnist-train", "-f", "torch", "--target-accuracy", "0.5", *SMALL_MNIST),
    )
    (result,) = reached["results"]
    assert result["status"] == "ok", result["error"]
    assert result["case"]["params"]["epochs"] == 14  # the cap a target implies
    assert len(result["details"]["training"]["epochs"]) < 14  # stopped at the target
    assert result["details"]["training"]["time_to_target_s"] == pytest.approx(
        result["details"]["training"]["time_to_train_s"]
    )
    missed = run_json(
        tmp_path,
        *("-w", "mnist-train", "-f", "torch", "--target-accuracy", "1.0", "--epochs", "1"),
        *("--param", "train_samples=640", "--param", "test_samples=100"),  # one short epoch
        expect=1,
    )
    (result,) = missed["results"]
    assert result["status"] == "failed"
    assert "did not reach target accuracy 1" in result["error"]
    assert result["details"]["training"]["epochs"]  # the epochs that ran are kept


def test_training_guard_catches_non_finite_loss_and_no_learning():
    record = Epoch(epoch=1, loss=0.5, test_loss=0.4, accuracy=0.9)
    assert training_error(record, steps_per_epoch=100) is None
    assert "loss is nan in epoch 1" in (training_error(replace(record, loss=math.nan), 100) or "")
    assert "chance" in (training_error(replace(record, accuracy=0.11), 100) or "")
    # too few steps to expect learning: no verdict on accuracy
    assert training_error(replace(record, accuracy=0.11), 10) is None
    # later epochs are not held to the first-epoch bar, but NaN always fails
    assert training_error(replace(record, epoch=2, accuracy=0.11), 100) is None
    error = training_error(replace(record, epoch=3, test_loss=math.inf), 100)
    assert error == "test loss is inf in epoch 3"


def test_epoch_order_is_shared_across_frameworks_and_whole_batches_only():
    first = epoch_permutation(640, seed=0, epoch=1)
    assert np.array_equal(first, epoch_permutation(640, seed=0, epoch=1))
    assert not np.array_equal(first, epoch_permutation(640, seed=0, epoch=2))
    assert sorted(first.tolist()) == list(range(640))
    assert usable_train_samples(700, 64) == 640
    assert usable_train_samples(63, 64) == 0


def test_loss_check_fails_a_case_whose_training_diverged():
    from dlbench.backends.base import Prepared
    from dlbench.worker.steps import _loss_check, make_job

    job = make_job(make_case(mode="train", batch_size=8, threads=1), Settings(), "cpu")
    finite = Prepared(step=lambda: None, device="cpu", fetch_loss=lambda: 0.7)
    result = checked_result(job, _loss_check(finite))
    assert result.ok and result.details.final_loss == 0.7
    diverged = Prepared(step=lambda: None, device="cpu", fetch_loss=lambda: math.nan)
    result = checked_result(job, _loss_check(diverged))
    assert result.status == "failed" and "not finite" in (result.error or "")
    assert math.isnan(result.details.final_loss)  # the loss that failed it, recorded


def cpu_supports(kind: str) -> bool:
    torch = pytest.importorskip("torch")
    if kind == "bf16":
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())


@pytest.mark.slow
def test_precisions_on_cpu_run_where_the_hardware_has_them_and_skip_otherwise(tmp_path):
    run = run_json(
        tmp_path,
        *("-w", "mlp", "-m", "train", "-d", "cpu", "-b", "32"),
        *("-p", "fp32", "-p", "tf32", "-p", "amp-bf16", "-p", "amp-fp16"),
        *("--min-time", "0", "--min-iters", "3", "--warmup", "1"),
    )
    results = {r["case"]["precision"]: r for r in run["results"]}
    assert results["fp32"]["status"] == "ok"
    assert results["fp32"]["details"]["extra"]["float32_matmul_precision"] == "highest"
    assert results["fp32"]["details"]["extra"]["cudnn_tf32"] is False  # torch's default is True
    assert math.isfinite(results["fp32"]["details"]["final_loss"])
    assert results["tf32"]["status"] == "skipped"
    assert "CPUs have no TF32" in results["tf32"]["error"]
    for precision, kind in (("amp-bf16", "bf16"), ("amp-fp16", "fp16")):
        result = results[precision]
        if cpu_supports(kind):
            assert result["status"] == "ok", result["error"]
            assert result["details"]["extra"]["autocast_dtype"] in ("bfloat16", "float16")
        else:
            assert result["status"] == "skipped"
            assert "emulated" in result["error"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "params"),
    # DistilBERT's training step is BERT-base's code at half the layers
    [("resnet50", ("--param", "image=64")), ("distilbert", ("--param", "seq=16"))],
)
def test_large_models_run_a_training_step(tmp_path, workload, params):
    run = run_json(
        tmp_path,
        *("-w", workload, "-m", "train", "-d", "cpu", "-b", "2", *params),
        *("--min-time", "0", "--min-iters", "2", "--warmup", "1"),
    )
    (result,) = run["results"]
    assert result["status"] == "ok", result["error"]
    assert result["throughput"] > 0
    assert math.isfinite(result["details"]["final_loss"])
    assert result["first_call_ms"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-w", "mlp", "--target-accuracy", "0.9"), "time-to-train"),
        (("-w", "mlp", "-f", "tensorflow", "-c", "fit"), "tensorflow: eager, function, xla)"),
        (("-w", "mlp", "-f", "tensorflow", "-p", "amp-bf16"), "not available on 'tensorflow'"),
        (("-w", "mnist-train", "--target-accuracy", "1.5"), "fraction"),
        (("-w", "mlp", "-p", "fp8"), "unknown precision"),
        (("-w", "mnist-train", "-f", "torch", "-c", "script"), "eager, compile"),
        (("-w", "mnist-train", "--data-dir", "/no/such/folder"), "--data-dir"),
    ],
)
def test_training_options_are_validated_with_one_line(args, message):
    done = cli("run", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_training_suites_plan_as_the_articles_ran_them(monkeypatch):
    monkeypatch.setattr("dlbench.measure.devices.gpu_visible", lambda: False)
    mnist = build_plan(RunRequest(suite="mnist"))
    assert [(c.framework, c.compile, c.device) for c in mnist.cases] == [
        ("torch", "eager", "cpu"),
        ("tensorflow", "fit", "cpu"),
    ]
    assert all(dict(c.params)["epochs"] == 14 for c in mnist.cases)
    assert any("no GPU" in note for note in mnist.skipped)
    monkeypatch.setattr("dlbench.measure.devices.gpu_visible", lambda: True)
    assert len(build_plan(RunRequest(suite="mnist")).cases) == 4
    pt2 = build_plan(RunRequest(suite="pt2-training"))
    # ResNet-50, and BERT base/large at two sequence lengths; 4 precisions, eager and
    # compile; and BERT's small batches of earlier runs, eager at amp-bf16
    assert len(pt2.cases) == (1 + 2 * 2) * 4 * 2 + 2 * 2
    small = {(c.workload, dict(c.params)["seq"], c.batch_size) for c in pt2.cases
             if c.batch_size in (32, 8) and "bert" in c.workload}  # fmt: skip
    assert small == {
        (m, s, b) for m in ("bert-base", "bert-large") for s, b in ((128, 32), (512, 8))
    }
    # the others at the GPU defaults (DeepLearningExamples' batches), fp32 and tf32 at
    # sequence 128 at half of it
    defaults = [c for c in pt2.cases if "bert" in c.workload and c.batch_size is None]
    assert {c.precision for c in defaults} == {"fp32", "tf32", "amp-fp16", "amp-bf16"}
    assert {c.batch_size for c in pt2.cases if c.precision in ("fp32", "tf32")} == {None, 128}
    assert {c.precision for c in pt2.cases} == {"fp32", "tf32", "amp-fp16", "amp-bf16"}
    assert {c.mode for c in pt2.cases} == {"train"}
    bert_seqs = {(c.workload, dict(c.params)["seq"]) for c in pt2.cases if "bert" in c.workload}
    assert bert_seqs == {(m, s) for m in ("bert-base", "bert-large") for s in (128, 512)}
    only_bf16 = build_plan(RunRequest(suite="pt2-training", precisions=("amp-bf16",)))
    assert {c.precision for c in only_bf16.cases} == {"amp-bf16"}


def test_per_epoch_table_and_study_tables_from_stored_results():
    from rich.console import Console

    from dlbench.report.studies.training_studies import epochs_table, mnist_tables, pt2_tables
    from dlbench.results.records import Result

    def trained(framework: str, compile_mode: str, device: str, seconds: float) -> Result:
        epochs = [
            {"epoch": e, "train_s": seconds, "eval_s": 0.5, "samples_per_s": 640 / seconds,
             "loss": 1.0 / e, "test_loss": 0.9 / e, "accuracy": 0.8 + 0.05 * e}
            for e in (1, 2)
        ]  # fmt: skip
        return make_result(
            workload="mnist-train", framework=framework, compile=compile_mode, mode="train",
            device=device, batch_size=64, throughput=640 / seconds,
            details={"training": {
                "epochs": epochs, "time_to_train_s": 2 * seconds, "final_accuracy": 0.9,
                "data": {"synthetic": True, "train_samples_used": 640}}},
        )  # fmt: skip

    run = make_run(
        [
            trained("torch", "eager", "cpu", 4.0),
            trained("tensorflow", "fit", "cpu", 5.0),
            trained("torch", "eager", "cuda:0", 1.0),
        ],
        suite="mnist",
    )
    console = Console(width=200, record=True)
    console.print(epochs_table(run))
    text = console.export_text()
    assert text.count("mnist-train") == 6  # 3 cases x 2 epochs
    tables = {t.metric.key: t for t in mnist_tables(run)}
    time_rows = {row.label: row for row in tables["time_to_train"].rows}
    assert time_rows["tensorflow [fit] cpu"].relative == pytest.approx(10 / 8)
    assert "SYNTHETIC" in time_rows["torch [eager] cpu"].note
    (speedup,) = tables["gpu_speedup"].rows
    assert speedup.label == "torch [eager]" and speedup.value == pytest.approx(4.0)
    assert epochs_table(make_run()) is None
    pt2 = make_run([
        make_result(workload="resnet50", compile=c, mode="train", batch_size=16, precision=p,
                    throughput=t, first_call_ms=f)
        for c, p, t, f in (("eager", "fp32", 10.0, 100.0), ("compile", "fp32", 15.0, 9000.0),
                           ("eager", "amp-bf16", 20.0, 120.0))
    ], suite="pt2-training")  # fmt: skip
    rates = next(t for t in pt2_tables(pt2) if t.metric.key == "throughput")
    assert {row.label: row.relative for row in rates.rows} == {
        "fp32 eager": 1.0,
        "fp32 compile": 1.5,
        "amp-bf16 eager": 2.0,
    }
    compile_times = next(t for t in pt2_tables(pt2) if t.metric.key == "first_step")
    assert max(row.value for row in compile_times.rows) == pytest.approx(9.0)


def test_bert_on_a_gpu_defaults_to_deeplearningexamples_batches_and_the_cpu_keeps_its_own():
    from dlbench.workloads import get_workload

    for name in ("bert-base", "bert-large"):
        bert = get_workload(name)
        assert bert.default_batch_size("cuda", {"seq": 128}) == 256
        assert bert.default_batch_size("cuda", {"seq": 512}) == 32
        assert bert.default_batch_size("cpu", {"seq": 512}) == bert.cpu_batch_size
