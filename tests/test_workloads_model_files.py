"""A user's model file: its format from its content, its inputs from the options and data."""

from __future__ import annotations

import json
import re
import zipfile

import numpy as np
import pytest
from conftest import dlbench

from dlbench.errors import CaseError, UserError, cause_summary
from dlbench.spec.model_signature import InputSpec
from dlbench.workloads.model_format import model_format
from dlbench.workloads.user_model import parse_input_option, resolve_inputs

# builds ONNX files (imports onnx): not in the fast tier (tests/conftest.py)
pytestmark = pytest.mark.integration


def tiny_onnx(path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["in:0"], ["out"])], "g",
        [helper.make_tensor_value_info("in:0", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 3])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_onnx_is_recognised_under_any_name(tmp_path):
    pytest.importorskip("onnx")
    path = tmp_path / "model.bin"
    tiny_onnx(path)
    assert model_format(path) == "onnx"


@pytest.mark.parametrize(
    ("members", "kind"),
    [
        (["m/code/__torch__.py", "m/constants.pkl", "m/data.pkl"], "torchscript"),
        (["m/models/model.json", "m/archive_format", "m/data/weights/w"], "torch-export"),
        (["m/data/aotinductor/model/x.so", "m/archive_format"], "aoti-package"),
        (["sd/data.pkl", "sd/version"], "torch-pickle"),
        (["config.json", "metadata.json", "model.weights.h5"], "keras"),
    ],
)
def test_zip_archives_are_told_apart_by_their_layout(tmp_path, members, kind):
    path = tmp_path / "model.jit"  # the extension says nothing
    with zipfile.ZipFile(path, "w") as archive:
        for name in members:
            archive.writestr(name, b"x")
    assert model_format(path) == kind


def test_other_signatures_and_what_an_unknown_file_looked_like(tmp_path):
    (tmp_path / "weights.best.hdf5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    assert model_format(tmp_path / "weights.best.hdf5") == "keras-h5"
    (tmp_path / "model.xml").write_text('<?xml version="1.0"?>\n<net name="m" version="11">')
    assert model_format(tmp_path / "model.xml") == "openvino-ir"
    (tmp_path / "m.tflite").write_bytes(b"\x1c\0\0\0TFL3" + b"\0" * 32)
    assert model_format(tmp_path / "m.tflite") == "tflite"
    saved = tmp_path / "saved"
    saved.mkdir()
    with pytest.raises(UserError, match=re.escape("a directory without saved_model.pb")):
        model_format(saved)
    (saved / "saved_model.pb").write_bytes(b"\x08\x01")
    assert model_format(saved) == "savedmodel"
    (tmp_path / "notes.onnx").write_text("hello")
    with pytest.raises(UserError, match="starts with text 'hello'"):
        model_format(tmp_path / "notes.onnx")
    with zipfile.ZipFile(tmp_path / "other.pt", "w") as archive:
        archive.writestr("readme.txt", b"x")
    with pytest.raises(UserError, match=r"a zip archive that is not .*readme\.txt"):
        model_format(tmp_path / "other.pt")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x:8x3", ("x", "8x3:")),
        ("pixels:8x3x32x32:float32", ("pixels", "8x3x32x32:float32")),
        ("serving_default_input_2:0:1x43844x1", ("serving_default_input_2:0", "1x43844x1:")),
        ("a:b:0:2x2:int64", ("a:b:0", "2x2:int64")),
    ],
)
def test_input_names_may_hold_colons(text, expected):
    assert parse_input_option(text) == expected


def test_a_dynamic_batch_takes_the_batch_size_and_only_other_dims_are_asked():
    image = InputSpec("input_1", (None, 64, 64, 1), "float32")
    arrays = resolve_inputs([image], {}, seed=0)
    assert arrays["input_1"].shape == (1, 64, 64, 1)
    assert resolve_inputs([image], {}, seed=0, batch_size=8)["input_1"].shape == (8, 64, 64, 1)
    tokens = InputSpec("ids", (None, None), "int64")
    with pytest.raises(CaseError, match=r"beyond the batch \(1x\?\).*--input ids:1xN"):
        resolve_inputs([tokens], {}, seed=0)
    with pytest.raises(CaseError, match="--batch-size 8, but input 'input_1' is given with a"):
        resolve_inputs([image], {"input_1": "2x64x64x1:"}, seed=0, batch_size=8)
    fixed = InputSpec("x", (1, 4), "float32")
    with pytest.raises(CaseError, match="fixed first dimension of 1"):
        resolve_inputs([fixed], {}, seed=0, batch_size=8)


def test_given_data_is_checked_against_the_model_and_fed_as_is():
    specs = [InputSpec("x", (None, 4), "float32"), InputSpec("sr", (), "int64")]
    data = {"x": np.ones((2, 4), np.float32), "sr": np.array(16000)}
    arrays = resolve_inputs(specs, {}, seed=0, data=data)
    assert arrays["sr"].shape == () and int(arrays["sr"]) == 16000
    assert arrays["x"].shape == (2, 4)
    wrong = "input 'x' has shape 2x5 in the file; the model takes ?x4"
    with pytest.raises(CaseError, match=re.escape(wrong)):
        resolve_inputs(specs, {}, seed=0, data={"x": np.ones((2, 5), np.float32)})
    with pytest.raises(CaseError, match=re.escape("has no input 'y'; its inputs: x, sr")):
        resolve_inputs(specs, {}, seed=0, data={"y": np.ones(1)})
    with pytest.raises(CaseError, match=re.escape("a .npy file feeds a single-input model")):
        resolve_inputs(specs, {}, seed=0, data={"": np.ones((1, 4), np.float32)})
    # a needed input missing from the file is refused, not filled with noise
    with pytest.raises(CaseError, match=re.escape("--input-data has no array 'sr'")):
        resolve_inputs(specs, {}, seed=0, data={"x": np.ones((2, 4), np.float32)})


def test_an_input_whose_format_records_no_type_takes_the_datas_type():
    # TorchScript records `Tensor`, not its element type: token ids come as int64
    untyped = [InputSpec("ids", None, "float32", typed=False)]
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert resolve_inputs(untyped, {}, seed=0, data={"ids": ids})["ids"].dtype == np.int64
    typed = [InputSpec("ids", None, "float32")]
    with pytest.raises(CaseError, match="is int64 in the file; the model takes float32"):
        resolve_inputs(typed, {}, seed=0, data={"ids": ids})


def test_a_file_cut_short_is_named_as_such(tmp_path):
    pytest.importorskip("onnx")
    h5py = pytest.importorskip("h5py")
    onnx_path = tmp_path / "model.onnx"
    tiny_onnx(onnx_path)
    whole = onnx_path.read_bytes()
    onnx_path.write_bytes(whole[: len(whole) - 10])
    with pytest.raises(UserError, match="an ONNX model cut short"):
        model_format(onnx_path)
    for libver in ("earliest", "latest"):  # superblock versions 0 and 3
        h5_path = tmp_path / f"weights-{libver}.h5"
        with h5py.File(h5_path, "w", libver=libver) as file:
            file["w"] = np.zeros(4096)
        assert model_format(h5_path) == "keras-h5"
        whole = h5_path.read_bytes()
        h5_path.write_bytes(whole[: len(whole) // 2])
        with pytest.raises(UserError, match="an HDF5 file cut short"):
            model_format(h5_path)


def test_the_cause_of_a_framework_error_is_the_line_shown():
    openvino = (
        "Exception from src/inference/src/cpp/core.cpp:84:\n"
        "Check 'false' failed at src/frontends/common/src/report.cpp:151:\n"
        "FrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted.\n"
        "-- No conversion rule found for operations: com.example.FancyOp\n"
    )
    summary = cause_summary(openvino)
    assert summary.startswith("FrontEnd API failed") and "com.example.FancyOp" in summary
    assert "core.cpp" not in summary
    ort = (
        "[ONNXRuntimeError] : 1 : FAIL : Load model failed:/src/core/graph/model.cc:256 "
        "onnxruntime::Model::Model(onnx::ModelProto&&, const Logger&) Unsupported IR version"
    )
    assert cause_summary(ort).endswith("failed: Unsupported IR version")
    # a traceback inside the message (TorchScript's interpreter): the raised line
    torchscript = (
        "The following operation failed in the TorchScript interpreter.\n"
        "Traceback of TorchScript, serialized code (most recent call last):\n"
        '  File "code/__torch__.py", line 11, in forward\n'
        "    _0 = torch.__contains__([8000, 16000], sr)\n"
        "builtins.ValueError: unsupported sample rate\n"
    )
    assert cause_summary(torchscript) == "builtins.ValueError: unsupported sample rate"
    # without a traceback, a line that merely looks like one is not singled out
    assert cause_summary("first line\nValueError: second").startswith("first line")


@pytest.mark.slow
def test_inspect_names_the_format_inputs_and_frameworks(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    path = tmp_path / "exported.model"
    tiny_onnx(path)
    proc = dlbench("inspect", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["format"] == "onnx"
    views = {view["framework"]: view for view in found["frameworks"]}
    assert views["onnxruntime"]["verdict"] == "loads"
    assert (
        views["onnxruntime"]["inputs"][0] | {"name": "in:0", "dims": [None, 3]}
        == (views["onnxruntime"]["inputs"][0])
    )
    assert views["torch"]["verdict"] == "does not read this format"
    text = dlbench("inspect", str(path))
    assert "?x3" in text.stdout and "in:0" in text.stdout
    (tmp_path / "notes.txt").write_text("hello")
    bad = dlbench("inspect", str(tmp_path / "notes.txt"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_unsigned_and_string_inputs_are_typed_as_such_and_bfloat16_is_refused(tmp_path):
    pytest.importorskip("onnxruntime")
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from dlbench.backends.onnxruntime.user_model import ort_signature

    def model(kind: int, path) -> str:
        # Identity keeps the input's type, so the graph's output is of that type too
        graph = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", kind, ["n", 3])],
            [helper.make_tensor_value_info("y", kind, ["n", 3])],
        )  # fmt: skip
        built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        built.ir_version = 8
        onnx.save(built, path)
        return str(path)

    (spec,) = ort_signature(ort.InferenceSession(model(TensorProto.UINT16, tmp_path / "u.onnx")))
    assert spec.dtype == "uint16"  # not float32 in its place
    strings = ort.InferenceSession(model(TensorProto.STRING, tmp_path / "s.onnx"))
    assert ort_signature(strings)[0].dtype == "string"
    halves = ort.InferenceSession(model(TensorProto.BFLOAT16, tmp_path / "b.onnx"))
    with pytest.raises(CaseError, match=r"input 'x' is tensor\(bfloat16\); dlbench feeds"):
        ort_signature(halves)  # NumPy has no bfloat16: float32 would measure another model


def test_string_inputs_come_from_input_data_as_str_or_bytes_arrays():
    text = InputSpec("text", (None,), "string")
    words = np.array(["cat", "dog"])
    fed = resolve_inputs([text], {}, seed=0, data={"text": words})["text"]
    assert fed.tolist() == ["cat", "dog"]
    as_bytes = np.array([b"cat", b"\xff"])  # TensorFlow's strings are any bytes
    assert resolve_inputs([text], {}, seed=0, data={"text": as_bytes})["text"].dtype.kind == "S"
    with pytest.raises(CaseError, match="is float32 in the file; the model takes strings"):
        resolve_inputs([text], {}, seed=0, data={"text": np.zeros(2, np.float32)})
    for given in ({}, {"text": "2:"}):  # no data: dlbench makes up no text
        with pytest.raises(CaseError, match="give its values with --input-data"):
            resolve_inputs([text], given, seed=0)
    number = InputSpec("x", (None,), "float32")
    with pytest.raises(CaseError, match="'x' holds strings in the file; the model takes float32"):
        resolve_inputs([number], {}, seed=0, data={"x": words})


def test_each_framework_gets_strings_as_it_takes_them_or_a_clear_refusal(tmp_path):
    pytest.importorskip("onnx")
    from dlbench.spec.case import Case
    from dlbench.workloads.user_model import case_inputs

    model = tmp_path / "model.onnx"
    tiny_onnx(model)  # only its format matters here: onnx
    signature = [InputSpec("text", (None,), "string")]

    def fed(framework: str, array: np.ndarray) -> np.ndarray:
        case = Case.of(workload="user-model", framework=framework, compile="default",
                       model=str(model))  # fmt: skip
        return case_inputs(case, signature, 0, {"text": array})["text"]

    encoded = np.array(["naïve".encode(), b"cat"])
    # ONNX Runtime reads strings from str arrays (a bytes array is fed wrongly): decoded
    assert fed("onnxruntime", encoded).tolist() == ["naïve", "cat"]
    assert fed("tensorflow", encoded).tolist() == ["naïve".encode(), b"cat"]  # bytes, as given
    with pytest.raises(CaseError, match=r"not UTF-8 text .*onnxruntime takes strings as text"):
        fed("onnxruntime", np.array([b"\xff\xfe"]))
    with pytest.raises(
        CaseError, match="'text' is a string tensor, and dlbench feeds openvino no strings; "
        "run it with -f onnxruntime",
    ):  # fmt: skip
        fed("openvino", np.array(["cat"]))


def test_a_torch_argument_after_one_left_to_its_default_is_refused_not_dropped():
    pytest.importorskip("torch")
    from dlbench.backends.torch.user_model import call_arguments

    signature = [InputSpec("ids", None, "int64", typed=False),
                 InputSpec("mask", None, "float32", optional=True, typed=False),
                 InputSpec("types", None, "int64", optional=True, typed=False)]  # fmt: skip
    ids = np.zeros((1, 4), np.int64)
    assert len(call_arguments(signature, {"ids": ids}, "cpu")) == 1
    both = {"ids": ids, "mask": np.ones((1, 4), np.float32), "types": ids}
    assert len(call_arguments(signature, both, "cpu")) == 3
    with pytest.raises(CaseError, match="'types' comes after 'mask'"):
        call_arguments(signature, {"ids": ids, "types": ids}, "cpu")
