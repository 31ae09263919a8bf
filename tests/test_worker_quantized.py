"""int8 for real: ONNX Runtime, OpenVINO (NNCF) and torch (PT2E, torchao) at small shapes."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import FAST, cli, dlbench
from factories import make_result

from dlbench.launch.runner import run_case
from dlbench.measure.cpu_features import int8_dot_units
from dlbench.plan.validate import validate_case
from dlbench.reference.quantized import META_FILE, QUANTIZER_MODULE, QuantizeRequest
from dlbench.results.flags import result_flags
from dlbench.results.metrics import CSV_METRICS, METRICS, read
from dlbench.spec.case import Case
from dlbench.spec.record_dict import to_dict
from dlbench.spec.registry import PRECISIONS
from dlbench.worker.quantized_check import measure, output_kind, sqnr_db

INT8_BOUND = PRECISIONS["int8"].min_sqnr_db


def installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def quantized_case(framework: str, workload: str, precision: str, compile_mode: str) -> Case:
    case = Case(workload, framework, compile_mode, device="cpu", batch_size=4, threads=1,
                precision=precision)  # fmt: skip
    return validate_case(case)


def checked(result) -> dict:
    assert result.ok, (result.error, result.error_detail)
    check = to_dict(result.details.check)  # as the run file holds it
    assert check["note"] == "int8 against fp32" and check["min_sqnr_db"] == INT8_BOUND
    # the SQNR that passed it, with the agreement reported beside it
    assert check["sqnr_db"] >= INT8_BOUND and 0 <= check["agreement"] <= 1
    assert "floor" not in check  # agreement decides nothing for float outputs
    assert result.max_abs_diff == check["max_abs_diff"] > 0  # int8 is not fp32
    assert "sqnr" in CSV_METRICS and read(METRICS["sqnr"], result) == check["sqnr_db"]
    assert result.details.int8_dot_units == int8_dot_units()
    return to_dict(result.details.quantization)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("framework", "workload", "precision", "compile_mode", "method"),
    [
        ("onnxruntime", "mlp", "int8", "default", "quantize_static (QDQ, per-channel"),
        ("onnxruntime", "mlp", "int8-dynamic", "default", "quantize_dynamic"),
        ("onnxruntime", "mnist-cnn", "int8", "default", "quantize_static"),
        ("openvino", "mnist-cnn", "int8", "default", "NNCF post-training quantization"),
        ("torch", "mlp", "int8", "compile", "PT2E, torchao X86InductorQuantizer"),
        ("torch", "mlp", "int8-dynamic", "eager", "Int8DynamicActivationInt8WeightConfig"),
    ],
)
def test_int8_runs_quantized_and_is_held_to_fp32_by_sqnr(
    framework, workload, precision, compile_mode, method
):
    if not installed(framework) or (framework == "torch" and not installed("torchao")):
        pytest.skip(f"{framework} (and its quantizer) is not installed")
    if framework == "openvino" and not installed("nncf"):
        pytest.skip("nncf is not installed")
    result = run_case(quantized_case(framework, workload, precision, compile_mode), FAST)
    quantization = checked(result)
    assert method in quantization["method"]
    assert quantization["seconds"] >= 0
    kind = "top-1 agreement" if workload == "mnist-cnn" else "thresholded output"
    assert kind in result.details.check.measure
    if workload == "mnist-cnn":  # a classifier: the field name
        assert result.details.check.top1_agreement == result.details.check.agreement
    assert result.details.check.samples >= 256
    if precision == "int8":
        assert quantization["calibration"]["samples"] >= 64
    if (framework, precision) == ("torch", "int8"):
        assert quantization["input_check_removed"]  # no per-call check a hand loop lacks
    if "folder" in quantization:  # built in a process of its own, then found in the cache
        again = run_case(quantized_case(framework, workload, precision, compile_mode), FAST)
        assert again.ok and again.details.quantization.cached is True
        assert again.details.quantization.seconds == quantization["seconds"]
        # a fresh build's process is kept out of the worker's load+compile time
        assert again.details.quantization.build_wall_s == 0.0
        if not quantization["cached"]:
            assert quantization["build_wall_s"] >= quantization["seconds"]
    # the quantizer ran in a process of its own: the worker holds its framework alone
    assert result.details.frameworks_in_process == (framework,)


@pytest.mark.slow
def test_a_user_onnx_model_is_quantized_calibrated_on_its_input_data(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((16, 6)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["logits"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 6])], [weight],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "classifier.onnx"
    path.write_bytes(model.SerializeToString())
    data = tmp_path / "x.npz"
    np.savez(data, x=rng.standard_normal((64, 16)).astype(np.float32))
    out = tmp_path / "run.json"
    done = dlbench("run", "--model", str(path), "--input-data", str(data), "-p", "int8",
                   "--min-time", "0", "--min-iters", "3", "--json", str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())["results"]
    assert [r["case"]["framework"] for r in results] == ["onnxruntime", "openvino"]
    for result in results:
        check = result["details"]["check"]
        assert check["measure"] == "top-1 agreement" and check["samples"] == 64
        assert check["sqnr_db"] >= INT8_BOUND and check["agreement"] > 0
        assert result["details"]["quantization"]["calibration"]["data"] == "--input-data"


# The quantizer's module run as `python -m` runs it, saying at its exit which frameworks
# it imported
REPORTS_FRAMEWORKS = """
import atexit, json, runpy, sys
from dlbench.backends.framework_guard import frameworks_in_process
atexit.register(lambda: print(json.dumps(frameworks_in_process())))
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""


@pytest.mark.integration
@pytest.mark.parametrize("framework", ["onnxruntime", "openvino"])
def test_a_quantizer_process_imports_no_other_framework(tmp_path, framework):
    """ONNX Runtime's pre-processing and NNCF import torch wherever it is installed: the
    quantizer's process hides it, as the worker that runs its model does."""
    if not installed(framework):
        pytest.skip(f"needs {framework}")
    case = quantized_case(framework, "mlp", "int8", "default")
    request = json.dumps(to_dict(QuantizeRequest(case, 0, tmp_path / "built")))
    module = QUANTIZER_MODULE.format(framework=framework)
    done = subprocess.run([sys.executable, "-c", REPORTS_FRAMEWORKS, module, request],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "built" / META_FILE).is_file()
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [framework]


def test_agreement_by_kind_is_reported_beside_the_sqnr_that_decides():
    expected = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    flipped = expected[:, ::-1]
    assert measure("top1", expected, expected, 4, "int8").value == 1.0
    low = measure("top1", flipped, expected, 4, "int8")
    # both classes swapped: the noise is twice the (centred) scores, -6 dB
    assert low.value == 0.0 and low.sqnr_db == pytest.approx(-6.02, abs=0.01) and low.failed
    assert "SQNR -6.0 dB, below 10 dB (top-1 agreement 0.000" in low.reason()
    probs = np.array([[0.2], [0.7], [0.51], [0.49]])
    assert measure("threshold", probs + 0.02, probs, 4, "int8").value == 0.75  # 0.49 crossed
    features = np.ones((2, 3, 4))
    assert measure("cosine", features * 3, features, 2, "int8").value == pytest.approx(1.0)
    assert measure("cosine", -features, features, 2, "int8").value == pytest.approx(-1.0)
    assert output_kind(np.zeros((4, 6), np.float32)) == "top1"
    assert output_kind(np.full((4, 1), 0.3, np.float32)) == "threshold"
    assert output_kind(np.zeros((4, 8, 3), np.float32)) == "cosine"
    assert output_kind(np.zeros(4, np.int64)) == "exact"
    # integer outputs have no noise to measure: the fraction equal decides
    ids = np.arange(10)
    assert measure("exact", ids, ids, 10, "int8").sqnr_db is None
    assert measure("exact", np.where(ids < 2, -1, ids), ids, 10, "int8").failed  # 0.8 equal


def noise_at(expected: np.ndarray, db: float, seed: int = 0) -> np.ndarray:
    """Zero-mean-per-row noise whose power is `db` below the expected outputs'."""
    noise = np.random.default_rng(seed).standard_normal(expected.shape)
    noise -= noise.mean(axis=-1, keepdims=True)
    return noise * np.sqrt(np.sum(expected**2) / np.sum(noise**2) / 10 ** (db / 10))


@pytest.mark.parametrize("db", [3.0, 9.5, 10.5, 35.0])
def test_outputs_with_noise_of_a_known_power_read_that_sqnr_and_fail_below_the_bound(db):
    scores = np.random.default_rng(1).standard_normal((256, 1000))
    scores -= scores.mean(axis=-1, keepdims=True)  # as a classifier's scores are compared
    verdict = measure("top1", scores + noise_at(scores, db), scores, 256, "int8")
    assert verdict.sqnr_db == pytest.approx(db, abs=1e-9)
    assert verdict.failed is (db < INT8_BOUND)
    assert to_dict(verdict.details())["sqnr_db"] == pytest.approx(db)
    hidden = np.random.default_rng(2).standard_normal((16, 128, 64))  # an encoder's
    assert sqnr_db(hidden + noise_at(hidden, db), hidden) == pytest.approx(db, abs=1e-9)


def test_a_wrong_scale_fails_and_a_log_partition_is_no_signal():
    """A scale off by 2x on a classifier's output: noise as strong as the scores (0 dB).
    Log-softmax outputs carry each sample's log-partition, which softmax ignores: as
    signal it would lift the SQNR of that wrong scale by some 28 dB, as on mnist-cnn."""
    logits = np.random.default_rng(3).standard_normal((256, 10)) * 0.1

    def log_softmax(x: np.ndarray) -> np.ndarray:
        return x - np.log(np.sum(np.exp(x), axis=-1, keepdims=True))

    reference = log_softmax(logits)
    wrong = measure("top1", log_softmax(2 * logits), reference, 256, "int8")
    assert wrong.sqnr_db == pytest.approx(0.0, abs=1e-9) and wrong.failed
    assert sqnr_db(log_softmax(2 * logits), reference) > 25  # the raw ratio would pass it
    assert measure("top1", reference + 1.5, reference, 256, "int8").sqnr_db > 200  # rounding


def test_a_cpu_without_int8_dot_products_is_flagged_not_skipped(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse4_2 avx avx2 fma\n")
    assert int8_dot_units(cpuinfo) == ()
    cpuinfo.write_text("flags : avx2 avx512f avx512_vnni amx_int8\n")
    assert int8_dot_units(cpuinfo) == ("avx512_vnni", "amx_int8")
    plain = make_result(precision="int8", details={"int8_dot_units": []})
    assert "int8-no-vnni" in result_flags(plain, 2)
    vnni = make_result(precision="int8", details={"int8_dot_units": ["avx512_vnni"]})
    assert "int8-no-vnni" not in result_flags(vnni, 2)
    # flags that cannot be read are unknown, not "no dot-product units"
    assert int8_dot_units(tmp_path / "missing") is None
    cpuinfo.write_text("processor : 0\n")
    assert int8_dot_units(cpuinfo) is None
    unknown = make_result(precision="int8", details={"int8_dot_units": None})
    assert "int8-no-vnni" not in result_flags(unknown, 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-w", "mlp", "-f", "torch", "-c", "compile", "-p", "int8", "-m", "train"],
            "for inference",
        ),
        (["-w", "mlp", "-f", "jax", "-p", "int8"], "no quantization path for mlp on jax"),
        (["-w", "mnist-cnn", "-f", "torch", "-p", "int8-dynamic"], "torch: mlp, distilbert"),
        (["-w", "mlp", "-f", "openvino", "-p", "int8-dynamic"], "onnxruntime: mlp"),
        (["-w", "mlp", "-f", "torch", "-p", "int8", "-c", "eager"], "use -c compile"),
        (["-w", "mlp", "-f", "onnxruntime", "-p", "int8", "-d", "cuda"], "quantized for the CPU"),
        (["-w", "mlp", "--sweep", "depth=1,2"], "unknown sweep axis 'depth'"),
        (["-w", "mlp", "--sweep", "batch="], "an empty sweep of batch"),
        (["-w", "mlp", "--sweep", "batch=1,x"], "batch value 'x'"),
        (["-w", "mlp", "--sweep", "batch=1,8", "-b", "4"], "give one"),
        (["-w", "mlp", "--sweep", "threads=1", "--sweep", "threads=2"], "given twice"),
    ],
)
def test_int8_and_sweep_user_errors_exit_2_with_one_line(args, message):
    done = cli("run", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_the_cache_key_separates_what_changes_a_quantized_model():
    from dlbench.reference.quantized import quantized_folder

    base = Case("mlp", "onnxruntime", "default", precision="int8", batch_size=4, threads=1)
    same = replace(base, batch_size=64, threads=2, scenario="offline")  # not the model
    assert quantized_folder(base, 0) == quantized_folder(same, 0)
    for other in (replace(base, precision="int8-dynamic"), replace(base, framework="openvino")):
        assert quantized_folder(base, 0) != quantized_folder(other, 0)
    assert quantized_folder(base, 0) != quantized_folder(base, 1)
    torch = replace(base, framework="torch", compile="compile")  # exported at its batch
    assert quantized_folder(torch, 0) != quantized_folder(replace(torch, batch_size=8), 0)
    assert Path(quantized_folder(base, 0)).name.startswith("mlp-onnxruntime-int8-")


def test_without_the_quantizer_installed_the_error_names_the_extra(monkeypatch, capsys):
    import importlib.util

    from dlbench.cli.main import main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nncf" else real(name, *a)
    )
    assert main(["run", "-w", "mlp", "-f", "openvino", "-p", "int8"]) == 2
    error = capsys.readouterr().err
    assert "needs nncf" in error and "dlbench[quantization]" in error
