"""Bring your own model: ONNX, TorchScript and Keras files, safely."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import dlbench

FAST = ["--min-time", "0", "--min-iters", "3", "--warmup", "1", "--threads", "1", "--quiet"]


def dlbench_run(tmp_path, *args: str) -> tuple[int, list[dict], str]:
    out = tmp_path / "run.json"
    proc = dlbench("run", *args, *FAST, "--json", str(out), timeout=600)
    results = json.loads(out.read_text())["results"] if out.exists() else []
    return proc.returncode, results, proc.stderr + proc.stdout


def onnx_file(tmp_path) -> str:
    """A small ONNX model with a dynamic batch dimension: y = relu(x @ W + b)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [weight, bias],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "tiny.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.mark.slow
def test_onnx_model_needs_its_dynamic_dims_then_runs_on_both_runtimes(tmp_path):
    pytest.importorskip("onnx")
    model = onnx_file(tmp_path)
    code, results, text = dlbench_run(tmp_path, "--model", model)
    assert code == 1
    assert all("give them with --input x:SHAPE" in r["error"] for r in results), text
    code, results, text = dlbench_run(tmp_path, "--model", model, "--input", "x:4x8")
    assert code == 0, text
    assert [r["case"]["framework"] for r in results] == ["onnxruntime", "openvino"]
    assert all(r["case"]["batch_size"] == 4 for r in results)
    assert results[1]["max_abs_diff"] < 1e-4  # openvino checked against onnxruntime's output
    assert "first framework" in results[1]["details"]["check"]["note"]


@pytest.mark.slow
def test_torchscript_model_runs_with_named_inputs(tmp_path):
    torch = pytest.importorskip("torch")
    module = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()))
    path = tmp_path / "tiny.pt"
    torch.jit.save(module, str(path))
    code, results, text = dlbench_run(tmp_path, "--model", str(path))
    assert code == 1 and "dynamic or unknown dimensions" in results[0]["error"], text
    code, results, text = dlbench_run(tmp_path, "--model", str(path), "--input", "input:2x8")
    assert code == 0, text
    assert results[0]["details"]["model_kind"] == "torchscript"
    assert results[0]["details"]["inputs"] == {"input": [2, 8]}


class Payload:
    """Unpickling this runs code: it creates a marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


@pytest.mark.slow
def test_a_malicious_pickle_is_refused_and_never_runs(tmp_path):
    torch = pytest.importorskip("torch")
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": Payload(str(marker))}, str(path))
    code, results, _ = dlbench_run(tmp_path, "--model", str(path), "--input", "x:1x8")
    assert code == 1
    assert "refused to load evil.pt" in results[0]["error"]
    assert "--trust-model" in results[0]["error"]
    assert not marker.exists()


@pytest.mark.slow
def test_a_pickled_module_loads_only_with_trust(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "module.pt"
    torch.save(torch.nn.Linear(8, 4), str(path))
    code, results, _ = dlbench_run(tmp_path, "--model", str(path), "--input", "input:2x8")
    assert code == 1 and "refused" in results[0]["error"]
    code, results, text = dlbench_run(tmp_path, "--model", str(path), "--input", "input:2x8",
                                      "--trust-model")  # fmt: skip
    assert code == 0, text
    assert "trust-model" in results[0]["details"]["model_kind"]


@pytest.mark.slow
def test_keras_model_and_its_unsafe_lambda_sibling(tmp_path):
    pytest.importorskip("tensorflow")
    code = r"""
import sys, keras
plain = keras.Sequential([keras.Input((8,), name="features"), keras.layers.Dense(4)])
plain.save(sys.argv[1])
risky = keras.Sequential([keras.Input((8,), name="features"), keras.layers.Lambda(lambda t: 2 * t)])
risky.save(sys.argv[2])
"""
    plain, risky = tmp_path / "plain.keras", tmp_path / "risky.keras"
    subprocess.run(
        [sys.executable, "-c", code, str(plain), str(risky)], check=True, capture_output=True
    )
    status, results, text = dlbench_run(tmp_path, "--model", str(plain), "--input", "features:3x8")
    assert status == 0, text
    assert results[0]["details"]["model_kind"] == "keras" and results[0]["case"]["batch_size"] == 3
    status, results, _ = dlbench_run(tmp_path, "--model", str(risky), "--input", "features:3x8")
    assert status == 1 and "refused to load risky.keras" in results[0]["error"]


@pytest.mark.slow
def test_a_corrupt_model_file_fails_its_cases_clearly(tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x01garbage" * 50)
    code, results, _ = dlbench_run(tmp_path, "--model", str(path), "--input", "x:1x8")
    assert code == 1 and len(results) == 2
    assert all(r["status"] == "failed" and "cannot" in r["error"] for r in results)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "missing.onnx"], "no such file or directory"),
        (["--model", "model.txt"], "unknown kind of model file"),
        (["--input", "x:8x0"], "every dimension must be > 0"),
        (["--input", "x"], "expected NAME:SHAPE[:DTYPE]"),
        (["--input", "x:2x3:complex"], "unknown dtype 'complex'"),
    ],
)
def test_bad_model_options_are_user_errors(tmp_path, args, message):
    (tmp_path / "model.txt").write_text("x")
    proc = dlbench("run", *args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
