"""Bring your own model: ONNX, TorchScript and Keras files, safely."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli, dlbench, installed, session_folder

from dlbench.reference.user_model import reference_folder
from dlbench.spec.registry import PRECISIONS, QUANTIZED_MODEL_PRECISION
from dlbench.worker.check import relative_tolerance

FAST = ["--min-time", "0", "--min-iters", "3", "--warmup", "1", "--threads", "1", "--quiet"]


def dlbench_run(tmp_path, *args: str) -> tuple[int, list[dict], str]:
    out = tmp_path / "run.json"
    out.unlink(missing_ok=True)  # an earlier call's results must not pass for this one's
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


MAKER = Path(__file__).with_name("make_models.py")
# Each TensorFlow import costs seconds of CPU: one process makes every TensorFlow
# kind, once per test session, and each test gets a copy of its own.
TENSORFLOW_KINDS = ("keras2-hdf5", "keras2-savedmodel", "keras2-savedmodel-unsigned",
                    "savedmodel", "tf2onnx", "keras", "keras-lambda")  # fmt: skip


def make_model(kind: str, path) -> str:
    """A model file written by the real exporter (tests/make_models.py), in its own process."""
    if kind in TENSORFLOW_KINDS:
        return copy_of(tensorflow_made(kind), Path(path))
    subprocess.run([sys.executable, str(MAKER), kind, str(path)], check=True, capture_output=True)
    return str(path)


def tensorflow_made(kind: str) -> Path:
    """The session's file of a TensorFlow kind, made with the others on first need."""
    folder = session_folder("tensorflow-models")
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist's other test processes wait
        if not (folder / kind).exists():
            subprocess.run([sys.executable, str(MAKER), "--into", str(folder),
                            *TENSORFLOW_KINDS], check=True, capture_output=True)  # fmt: skip
    error = folder / f"{kind}.error"
    assert not error.exists(), error.read_text()
    (made,) = (folder / kind).iterdir()
    return made


def copy_of(made: Path, path: Path) -> str:
    """`made` copied to `path` (a folder's tree, or a file)."""
    if made.is_dir():
        shutil.copytree(made, path)
    else:
        shutil.copy2(made, path)
    return str(path)


@pytest.mark.slow
def test_onnx_dynamic_batch_comes_from_batch_size_on_both_runtimes(tmp_path):
    pytest.importorskip("onnx")
    model = onnx_file(tmp_path)
    code, results, text = dlbench_run(tmp_path, "--model", model)
    assert code == 0, text
    inputs = [r["details"]["extra"]["inputs"] for r in results]
    assert inputs == [{"x": [1, 8]}] * 2  # default batch 1
    code, results, text = dlbench_run(tmp_path, "--model", model, "-b", "4")
    assert code == 0, text
    assert [r["case"]["framework"] for r in results] == ["onnxruntime", "openvino"]
    assert all(r["case"]["batch_size"] == 4 for r in results)
    assert results[1]["max_abs_diff"] < 1e-4  # openvino checked against onnxruntime's output
    assert "first framework" in results[1]["details"]["check"]["note"]


@pytest.mark.slow
def test_tf_style_onnx_colon_names_and_an_int64_scalar_from_npz(tmp_path):
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    model = make_model("onnx-tf-style", tmp_path / "exported_from_tf.onnx")
    data = tmp_path / "rate.npz"
    np.savez(data, sr=np.array(16000, dtype=np.int64))
    code, results, text = dlbench_run(
        tmp_path, "--model", model, "--input", "serving_default_input_2:0:3x12",
        "--input-data", str(data),
    )  # fmt: skip
    assert code == 0, text
    for result in results:
        inputs = result["details"]["extra"]["inputs"]
        assert inputs == {"serving_default_input_2:0": [3, 12], "sr": []}
        assert result["case"]["batch_size"] == 3
        assert result["case"]["input_data_digest"]
    # both outputs (float scores, int64 argmax) are compared; the argmax exactly
    assert "2 outputs compared" in results[1]["details"]["check"]["note"]
    np.savez(data, sr=np.array(16000, dtype=np.int32))
    code, results, text = dlbench_run(
        tmp_path, "--model", model, "--input", "serving_default_input_2:0:3x12",
        "--input-data", str(data),
    )  # fmt: skip
    # the user's data does not fit the model: exit 2 before the run starts, nothing written
    assert code == 2 and results == [], text
    assert "input 'sr' is int32 in the file; the model takes int64" in text


@installed("tf2onnx")
@pytest.mark.slow
def test_an_onnx_file_from_tf2onnx_runs_on_both_onnx_frameworks_with_its_outputs_checked(
    tmp_path,
):
    np = pytest.importorskip("numpy")
    model = make_model("tf2onnx", tmp_path / "converted.onnx")
    data = tmp_path / "inputs.npz"
    features = np.random.default_rng(1).standard_normal((5, 12)).astype(np.float32)
    np.savez(data, input_2=features, sr=np.array(16000, dtype=np.int64))
    code, results, text = dlbench_run(tmp_path, "--model", model, "--input-data", str(data))
    assert code == 0, text
    assert [r["case"]["framework"] for r in results] == ["onnxruntime", "openvino"]
    assert all(r["case"]["batch_size"] == 5 for r in results)  # from the data's first dim
    assert results[0]["details"]["extra"]["inputs"] == {"input_2": [5, 12], "sr": []}
    # both outputs, the int64 label exactly, checked against the first framework's
    assert "2 outputs compared" in results[1]["details"]["check"]["note"]


QUANTIZED_RULE = PRECISIONS[QUANTIZED_MODEL_PRECISION]


def quantized_checks(results: list[dict], ops: list[str]) -> dict:
    """onnxruntime, the first to run the file, records its outputs; openvino's are held
    to int8's rule against them."""
    assert [r["case"]["framework"] for r in results] == ["onnxruntime", "openvino"]
    assert all(r["status"] == "ok" and r["case"]["precision"] == "fp32" for r in results)
    first, check = (r["details"]["check"] for r in results)
    assert first["note"].startswith("not cross-checked") and "quantized_ops" not in first
    assert check["quantized_ops"] == ops and check["note"].startswith("already quantized")
    assert check["min_sqnr_db"] == QUANTIZED_RULE.min_sqnr_db and "tolerance" not in check
    assert check["measure"] == "top-1 agreement" and check["samples"] == 64
    return check


@pytest.mark.slow
def test_an_onnx_file_quantized_dynamically_is_held_to_int8s_rule_across_runtimes(tmp_path):
    pytest.importorskip("onnxruntime.quantization")
    model = make_model("onnx-int8-dynamic", tmp_path / "dynamic.onnx")
    code, results, text = dlbench_run(tmp_path, "--model", model, "-b", "64")
    assert code == 0, text
    check = quantized_checks(results, ["ConvInteger", "DynamicQuantizeLinear", "MatMulInteger"])
    # the runtimes round a few activations apart (or none: no noise, no SQNR)
    assert check["sqnr_db"] is None or check["sqnr_db"] >= QUANTIZED_RULE.min_sqnr_db
    assert check["agreement"] == 1.0 and results[1]["max_abs_diff"] == check["max_abs_diff"]


@pytest.mark.slow
def test_a_qdq_onnx_file_differs_across_runtimes_beyond_fp32s_tolerance_and_passes(tmp_path):
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime.quantization")
    model = make_model("onnx-int8-qdq", tmp_path / "qdq.onnx")
    code, results, text = dlbench_run(tmp_path, "--model", model, "-b", "64")
    assert code == 0, text
    check = quantized_checks(results, ["DequantizeLinear", "QuantizeLinear"])
    assert check["sqnr_db"] >= QUANTIZED_RULE.min_sqnr_db and check["agreement"] > 0.9
    # held to fp32's tolerance against onnxruntime's recorded outputs, it would fail
    first = results[0]
    folder = reference_folder(first["case"]["model_digest"], first["details"]["extra"]["inputs"],
                              0, None)  # fmt: skip
    with np.load(folder / "outputs.npz") as recorded:
        reference = recorded["output_0"]
    fp32_tolerance = relative_tolerance("fp32") * max(1.0, float(np.max(np.abs(reference))))
    assert check["max_abs_diff"] > fp32_tolerance


@pytest.mark.slow
def test_torchscript_with_an_odd_extension_and_a_plain_int_argument(tmp_path):
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    model = make_model("torchscript-int", tmp_path / "silero_like.jit")
    code, results, text = dlbench_run(tmp_path, "--model", model, "--input", "x:2x16")
    assert code == 2 and results == [] and "'sr' is a plain int64 argument" in text
    data = tmp_path / "inputs.npz"
    rng = np.random.default_rng(0)
    np.savez(data, x=rng.standard_normal((2, 16)).astype(np.float32), sr=np.array(16000))
    code, results, text = dlbench_run(tmp_path, "--model", model, "--input-data", str(data))
    assert code == 0, text
    assert results[0]["details"]["extra"]["model_kind"] == "torchscript"
    assert results[0]["case"]["batch_size"] == 2
    # the value reaches the model: a rate it rejects fails the case
    np.savez(data, x=rng.standard_normal((2, 16)).astype(np.float32), sr=np.array(44100))
    code, results, _ = dlbench_run(tmp_path, "--model", model, "--input-data", str(data))
    assert code == 1 and "unsupported sample rate" in results[0]["error_detail"]
    assert "ValueError: unsupported sample rate" in results[0]["error"]  # the cause, shown


def assert_every_input_and_variable_placed(result: dict, inputs: int) -> None:
    """TensorFlow's placement counts each input and variable, all on the CPU here (the
    model's weights are variables: more pieces than inputs)."""
    placed = result["details"]["placement"]
    count, _, device = placed["reported"].partition(" on ")
    assert placed["kind"] == "cpu" and device.endswith("CPU:0"), placed
    assert int(count) > inputs, placed


@installed("tensorflow")
@pytest.mark.slow
def test_keras2_hdf5_file_runs_with_its_batch_filled_in(tmp_path):
    model = make_model("keras2-hdf5", tmp_path / "weights.best.hdf5")
    code, results, text = dlbench_run(tmp_path, "--model", model, "-b", "2")
    assert code == 0, text
    assert results[0]["details"]["extra"]["model_kind"] == "keras-h5"
    assert results[0]["details"]["extra"]["inputs"] == {"input_1": [2, 64, 64, 1]}
    assert_every_input_and_variable_placed(results[0], inputs=1)


@installed("tensorflow")
@pytest.mark.slow
def test_savedmodel_through_its_serving_signature_with_every_output(tmp_path):
    model = make_model("savedmodel", tmp_path / "exported")
    code, results, text = dlbench_run(tmp_path, "--model", model, "-b", "3")
    assert code == 0, text
    assert results[0]["details"]["extra"]["model_kind"] == "savedmodel"
    assert results[0]["details"]["extra"]["loader"] == "tf.saved_model.load"
    assert results[0]["details"]["extra"]["outputs"] == ["label", "logits"]
    assert_every_input_and_variable_placed(results[0], inputs=1)


@pytest.mark.slow
def test_pt2_program_eager_compile_and_aoti_export(tmp_path):
    pytest.importorskip("torch")
    model = make_model("pt2", tmp_path / "model.pt2")
    code, results, text = dlbench_run(
        tmp_path, "--model", model, "-b", "4", "-c", "eager", "-c", "compile", "-c", "export"
    )
    assert code == 0, text
    assert [r["case"]["compile"] for r in results] == ["eager", "compile", "export"]
    assert all(r["details"]["extra"]["model_kind"] == "torch-export" for r in results)
    # the suite's shared compiler cache reached the workers through their requests
    cache = [r["details"].get("compile_cache") or "" for r in results]
    assert cache[0] == "" and all(c.startswith("warm: shared test cache") for c in cache[1:])
    export = results[2]["details"]["extra"]["export"]
    assert export["method"] == "torch.export + AOTInductor" and export["export_s"] > 0
    assert results[2]["max_abs_diff"] < 1e-4  # the compiled package agrees with eager


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
    code, results, text = dlbench_run(tmp_path, "--model", str(path), "--input", "x:1x8")
    # refused from its format alone, before a run is stored: nothing loaded it
    assert code == 2 and results == [], text
    assert "evil.pt is a torch.save pickle" in text and "--trust-model" in text
    assert not marker.exists()


@pytest.mark.slow
def test_a_pickled_module_loads_only_with_trust(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "module.pt"
    torch.save(torch.nn.Linear(8, 4), str(path))
    code, results, text = dlbench_run(tmp_path, "--model", str(path), "--input", "input:2x8")
    assert code == 2 and results == [] and "pass --trust-model" in text
    code, results, text = dlbench_run(tmp_path, "--model", str(path), "--input", "input:2x8",
                                      "--trust-model")  # fmt: skip
    assert code == 0, text
    assert results[0]["details"]["extra"]["model_kind"] == "torch-pickle"


@installed("tensorflow")
@pytest.mark.slow
def test_keras_model_and_its_unsafe_lambda_sibling(tmp_path):
    plain = make_model("keras", tmp_path / "plain.keras")
    risky = make_model("keras-lambda", tmp_path / "risky.keras")
    status, results, text = dlbench_run(tmp_path, "--model", str(plain), "--input", "features:3x8")
    assert status == 0, text
    assert results[0]["details"]["extra"]["model_kind"] == "keras"
    assert results[0]["case"]["batch_size"] == 3
    assert_every_input_and_variable_placed(results[0], inputs=1)
    status, results, text = dlbench_run(tmp_path, "--model", str(risky), "--input", "features:3x8")
    # the loader refuses it in the pre-run check: exit 2, no run stored
    assert status == 2 and results == [], text
    assert "refused to load risky.keras" in text and "--trust-model" in text


INSPECTED = r"""
import json, sys
from pathlib import Path
from dlbench.backends.framework_guard import FRAMEWORK_MODULES
from dlbench.spec.model_signature import LoaderRequest
from dlbench.worker.inspect_model import describe
described = describe(LoaderRequest("tensorflow", "keras", Path(sys.argv[1])))
loaded = sorted(name for name in FRAMEWORK_MODULES if sys.modules.get(name) is not None)
print(json.dumps({"ok": described.ok, "loaded": loaded}))
"""


@installed("tensorflow")
@pytest.mark.integration
def test_a_model_files_inspection_loads_its_one_framework(tmp_path):
    """TensorFlow's tf.lite imports jax where it is installed: the inspection hides the
    other frameworks first, as a worker does (0.7 s of every TensorFlow inspection)."""
    model = make_model("keras", tmp_path / "plain.keras")
    done = subprocess.run([sys.executable, "-c", INSPECTED, str(model)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "ok": True,
        "loaded": ["tensorflow"],
    }


@pytest.mark.slow
def test_a_framework_that_cannot_convert_names_the_cause(tmp_path):
    pytest.importorskip("onnx")
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("FancyOp", ["x"], ["y"], domain="com.example")], "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    )
    model.ir_version = 8
    onnx.save(model, tmp_path / "custom.onnx")
    code, results, _ = dlbench_run(tmp_path, "--model", str(tmp_path / "custom.onnx"))
    assert code == 1
    openvino = next(r for r in results if r["case"]["framework"] == "openvino")
    # the cause, not the location line OpenVINO puts first; the whole message kept
    assert "No conversion rule found for operations: com.example.FancyOp" in openvino["error"]
    assert "Exception from" not in openvino["error"]
    assert "Exception from src" in openvino["error_detail"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "missing.onnx"], "no such file or directory"),
        (["--model", "model.txt"], "not a model format dlbench reads (the file starts with text"),
        (["--model", "garbage.onnx"], "starts with bytes 08 01 67"),
        (["--model", "saved"], "a directory without saved_model.pb"),
        (["--input-data", "data.npz"], "--input-data and --trust-model go with --model FILE"),
        (["--model", "model.txt", "--input-data", "missing.npz"], "not a model format"),
        (["--input", "x:8x0"], "every dimension must be > 0"),
        (["--input", "x"], "expected NAME:SHAPE[:DTYPE]"),
        (["--input", "x:2x3:complex"], "unknown dtype 'complex'"),
    ],
)
def test_bad_model_options_are_user_errors(tmp_path, monkeypatch, args, message):
    (tmp_path / "model.txt").write_text("x")
    (tmp_path / "garbage.onnx").write_bytes(b"\x08\x01garbage" * 50)
    (tmp_path / "saved").mkdir()
    monkeypatch.chdir(tmp_path)
    proc = cli("run", *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def one_line_refusal(proc: subprocess.CompletedProcess[str], message: str, db: Path) -> None:
    """Exit 2, one line naming the problem, no traceback, and no run in the store."""
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("checking ")]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    if db.exists():  # refused before the store was opened, there is none to list
        runs = cli("runs", "--db", str(db))
        assert runs.returncode == 0 and "user-model" not in runs.stdout, runs.stdout


@pytest.mark.slow
def test_inputs_that_do_not_fit_the_model_exit_2_and_store_nothing(tmp_path):
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime")
    model, db = onnx_file(tmp_path), tmp_path / "store.sqlite"
    data = tmp_path / "inputs.npz"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return dlbench("run", "--model", model, *args, *FAST, "--db", str(db), timeout=600)

    np.savez(data, wrong_name=np.zeros((2, 8), np.float32))  # a missing .npz key
    one_line_refusal(run("--input-data", str(data)), "the model has no input 'wrong_name'", db)
    np.savez(data, x=np.zeros((2, 5), np.float32))  # a wrong shape
    one_line_refusal(run("--input-data", str(data)), "has shape 2x5 in the file", db)
    np.savez(data, x=np.zeros((2, 8), np.float64))  # a wrong dtype
    one_line_refusal(run("--input-data", str(data)), "is float64 in the file", db)
    truncated = tmp_path / "truncated.onnx"
    whole = Path(model).read_bytes()
    truncated.write_bytes(whole[: len(whole) // 2])  # still starts like an ONNX file
    proc = dlbench("run", "--model", str(truncated), *FAST, "--db", str(db), timeout=600)
    one_line_refusal(proc, "an ONNX model cut short", db)


@pytest.mark.slow
def test_an_npz_missing_an_input_the_model_needs_is_refused_not_filled_with_noise(tmp_path):
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    model = make_model("torchscript-int", tmp_path / "silero_like.jit")
    data, db = tmp_path / "inputs.npz", tmp_path / "store.sqlite"
    np.savez(data, sr=np.array(16000))
    proc = dlbench("run", "--model", model, "--input-data", str(data), *FAST, "--db", str(db),
                   timeout=600)  # fmt: skip
    one_line_refusal(proc, "--input-data has no array 'x', an input the model needs", db)


@pytest.mark.slow
def test_a_torchscript_model_takes_int64_token_ids_from_input_data(tmp_path):
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(100, 8)

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return (self.embed(ids) * mask.unsqueeze(-1)).sum(1)

    model = tmp_path / "encoder.pt"
    torch.jit.save(torch.jit.script(Pooled().eval()), str(model))
    data = tmp_path / "tokens.npz"
    ids = np.random.default_rng(0).integers(0, 100, size=(2, 6), dtype=np.int64)
    np.savez(data, ids=ids, mask=np.ones((2, 6), np.float32))
    code, results, text = dlbench_run(tmp_path, "--model", str(model), "--input-data", str(data))
    assert code == 0, text
    assert results[0]["status"] == "ok" and results[0]["case"]["batch_size"] == 2


KERAS2 = "tf_keras (Keras 2) writes the file: pip install --no-deps tf_keras~=X.Y.0 (for TF X.Y)"


def keras3_only(tmp_path) -> dict[str, str]:
    """The environment of TensorFlow 2.16+ with Keras 3 alone (its default install): a
    tf_keras that cannot be imported, ahead of the installed one on the path."""
    shadow = tmp_path / "keras3-only"
    (shadow / "tf_keras").mkdir(parents=True, exist_ok=True)
    (shadow / "tf_keras" / "__init__.py").write_text(
        'raise ImportError("tf_keras is not installed here")\n'
    )
    path = os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason=KERAS2)
def test_a_keras2_savedmodel_with_optimizer_state_runs_through_tf1s_loader(tmp_path):
    np = pytest.importorskip("numpy")
    model = make_model("keras2-savedmodel", tmp_path / "classifier")
    data = tmp_path / "inputs.npz"
    rng = np.random.default_rng(1)
    np.savez(data, text=np.array(["dog", "naïve", "zebra"]),
             features=rng.standard_normal((3, 6)).astype(np.float32))  # fmt: skip
    # With tf_keras, tf.saved_model.load restores it: the reference for the run below
    code, results, text = dlbench_run(tmp_path, "--model", model, "--input-data", str(data))
    assert code == 0, text
    assert results[0]["details"]["extra"]["loader"] == "tf.saved_model.load"
    assert results[0]["max_abs_diff"] is None  # the first run checks nothing, and says so
    # With Keras 3 alone it cannot, in TensorFlow's own words; TF1's loader serves it
    out = tmp_path / "run.json"
    proc = dlbench("run", "--model", model, "--input-data", str(data), "-c", "function",
                   "-c", "eager", *FAST, "--json", str(out), env=keras3_only(tmp_path),
                   timeout=600)  # fmt: skip
    graph, eager = json.loads(out.read_text())["results"]
    extra = graph["details"]["extra"]
    assert graph["status"] == "ok", proc.stderr
    assert extra["loader"] == "tf.compat.v1.saved_model.loader.load"
    assert extra["fallback_cause"] == (
        "its saved Keras 2 optimizer state, which only tf_keras restores "
        "(AttributeError: '_UserObject' object has no attribute 'add_slot')"
    )
    assert extra["inputs"] == {"text": [3], "features": [3, 6]}
    assert extra["string_inputs"] == ["text"]
    # the same outputs as tf.saved_model.load gave, within fp32's tolerance
    check = graph["details"]["check"]
    assert (
        "the first framework that ran this model (tensorflow via tf.saved_model.load)"
        in (check["note"])
    )
    assert graph["max_abs_diff"] is not None and graph["max_abs_diff"] <= check["tolerance"]
    # eager needs tf.saved_model.load: a failed case whose error names why
    assert proc.returncode == 1 and eager["status"] == "failed"
    assert eager["error"].startswith("SavedModel classifier runs here only as a TF1 graph")
    assert "compile mode eager needs that loader" in eager["error"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason=KERAS2)
def test_a_savedmodel_neither_loader_can_serve_is_refused_naming_both_causes(tmp_path):
    model = make_model("keras2-savedmodel-unsigned", tmp_path / "unsigned")
    proc = dlbench("inspect", model, "--json", env=keras3_only(tmp_path))
    # nothing loads it: exit 2, and the one line names both causes
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("dlbench: error:")]
    assert line.endswith(
        "(tensorflow: SavedModel unsigned: tf.saved_model.load cannot restore its saved Keras "
        "2 optimizer state, which only tf_keras restores (AttributeError: '_UserObject' object "
        "has no attribute 'add_slot'), and it has no signature to serve through TF1's loader)"
    ), line


def string_onnx(path: Path) -> str:
    """An ONNX model on strings: whether each word is "naïve" (Equal on strings)."""
    import onnx
    from onnx import TensorProto, helper

    word = helper.make_tensor("word", TensorProto.STRING, [], [b"na\xc3\xafve"])
    graph = helper.make_graph(
        [helper.make_node("Equal", ["text", "word"], ["is_word"])], "strings",
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["batch"])],
        [helper.make_tensor_value_info("is_word", TensorProto.BOOL, ["batch"])], [word],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    onnx.save(model, path)
    return str(path)


@pytest.mark.slow
def test_string_inputs_run_on_onnxruntime_from_input_data_and_openvino_is_refused(tmp_path):
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime")
    model, db = string_onnx(tmp_path / "strings.onnx"), tmp_path / "store.sqlite"
    data = tmp_path / "words.npz"
    np.savez(data, text=np.array(["cat", "naïve", "naive"]))
    proc = dlbench("run", "--model", model, "--input-data", str(data), *FAST, "--db", str(db),
                   timeout=600)  # fmt: skip
    # OpenVINO reads the model, but computes on no string (its CPU plugin: "unsupported
    # src_prc: string"): refused before anything runs
    one_line_refusal(proc, "on openvino: input 'text' is a string tensor, and dlbench feeds "
                     "openvino no strings; run it with -f onnxruntime", db)  # fmt: skip
    # UTF-8 bytes, as a bytes (S) array: decoded for ONNX Runtime, which reads str arrays
    np.savez(data, text=np.char.encode(np.array(["cat", "naïve", "naive"]), "utf-8"))
    code, results, text = dlbench_run(
        tmp_path, "--model", model, "--input-data", str(data), "-f", "onnxruntime"
    )
    assert code == 0, text
    (result,) = results
    assert result["details"]["extra"]["string_inputs"] == ["text"]
    assert result["max_abs_diff"] is None and result["details"]["check"]["note"].startswith(
        "not cross-checked: no other framework that reads onnx takes its string inputs"
    )
    from dlbench.reference.user_model import reference_folder

    folder = reference_folder(result["case"]["model_digest"], {"text": [3]}, 0,
                              result["case"]["input_data_digest"])  # fmt: skip
    with np.load(folder / "outputs.npz") as recorded:  # the outputs it ran to
        assert recorded["output_0"].tolist() == [False, True, False]
