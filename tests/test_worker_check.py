"""The output check fails a case whose output is wrong, however fast it was."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from factories import checked_result

from dlbench.backends.base import Job, Prepared
from dlbench.results.details import Details
from dlbench.spec.case import Case
from dlbench.worker.steps import _output_check
from dlbench.workloads import get_workload


def kernel_job() -> Job:
    case = Case(
        "add", "torch", "eager", device="cpu", batch_size=1, threads=1, params=(("size", 64),)
    )
    return Job(case, get_workload("add"), "cpu", 1, {"size": 64}, seed=0)


def run_check(output: np.ndarray):
    job = kernel_job()
    prepared = Prepared(step=lambda: None, device="cpu", fetch_output=lambda: output)
    return checked_result(job, _output_check(job, prepared))


def correct_output() -> np.ndarray:
    inputs = get_workload("add").make_inputs(1, {"size": 64}, "infer", 0)
    return inputs["x"] + inputs["y"]


def test_a_correct_output_passes_with_its_difference_recorded():
    result = run_check(correct_output())
    assert result.ok and result.max_abs_diff == 0.0
    assert result.details.check.note == "numpy spot check"


def test_a_skipped_computation_fails_the_case():
    result = run_check(np.zeros((1, 64, 64), dtype=np.float32))  # "fast": never computed
    assert result.status == "failed"
    assert result.error.startswith("output differs from the reference: max_abs_diff")


def test_a_small_error_beyond_tolerance_fails():
    output = correct_output()
    output[0, 3, 5] += 0.5
    result = run_check(output)
    assert result.status == "failed" and result.max_abs_diff >= 0.5


def test_a_wrong_shape_fails():
    result = run_check(np.zeros((1, 10, 64), dtype=np.float32))
    assert result.status == "failed" and "shape" in result.error


BLOCKED = r"""
import sys
from dlbench.backends.framework_guard import block_other_frameworks
blocked = block_other_frameworks("onnxruntime")
assert "torch" in blocked and "onnxruntime" not in blocked, blocked
try:
    import torch.nn
except ModuleNotFoundError as exc:
    assert exc.name == "torch", exc
else:
    raise SystemExit("torch imported in an onnxruntime worker")
assert "torch" not in sys.modules  # nothing left there for libraries that look it up
import importlib.util
assert importlib.util.find_spec("torch") is None  # what torch.compile and nncf ask
assert importlib.util.find_spec("onnxruntime") is not None  # the worker's own
# what frameworks import only because it is installed (Keras, transformers) is hidden too
assert importlib.util.find_spec("sklearn") is None and importlib.util.find_spec("pandas") is None
import scipy.stats  # its array-API helpers read sys.modules["torch"]
print("ok")
"""


# torch's quantizer package (torchao), which transformers imports wherever it is
# installed: hidden from a case that does not quantize, visible to one that does
QUANTIZER = r"""
import importlib.util, sys
from dlbench.backends.framework_guard import block_other_frameworks
block_other_frameworks("torch", quantizes=sys.argv[1] == "int8")
seen = importlib.util.find_spec("torchao") is not None
assert seen == (sys.argv[1] == "int8"), (sys.argv[1], seen)
if not seen:
    import transformers.modeling_utils  # its torchao quantizer is left out, not failed
    assert "torchao" not in sys.modules
print("ok")
"""


@pytest.mark.integration
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_torchs_quantizer_package_is_seen_only_by_a_case_that_quantizes(precision):
    import subprocess
    import sys

    if (
        importlib.util.find_spec("torchao") is None
        or importlib.util.find_spec("transformers") is None
    ):
        pytest.skip("needs torchao and transformers")
    done = subprocess.run([sys.executable, "-c", QUANTIZER, precision], capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# A user's model may import what a framework imports only where it is installed
USER_MODEL = r"""
import importlib.util
from dlbench.backends.framework_guard import block_other_frameworks
blocked = block_other_frameworks("onnxruntime", hide_incidental=False)
assert "torch" in blocked and importlib.util.find_spec("torch") is None, blocked
assert importlib.util.find_spec("sklearn") is not None  # visible to the user's model
print("ok")
"""


@pytest.mark.integration
@pytest.mark.parametrize("script", [BLOCKED, USER_MODEL], ids=["case", "user-model"])
def test_other_frameworks_are_unimportable_and_absent_from_sys_modules(script):
    import subprocess
    import sys

    if importlib.util.find_spec("sklearn") is None:
        pytest.skip("scikit-learn is not installed (nncf requires it)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def user_model_check(tmp_path, framework: str, outputs: list, string_inputs: bool = False):
    """The check of a user ONNX model's run whose step returned `outputs`."""
    import hashlib

    from test_workloads_model_files import tiny_onnx

    model = tmp_path / "model.onnx"
    if not model.exists():
        tiny_onnx(model)
    # a digest of its own: the session's reference cache must not mix tests
    digest = hashlib.sha256(str(tmp_path).encode()).hexdigest()
    case = Case.of(workload="user-model", framework=framework, compile="default",
                   model=str(model), model_digest=digest, device="cpu", batch_size=2,
                   threads=1)  # fmt: skip
    job = Job(case, get_workload("user-model"), "cpu", 2, {}, seed=0)
    extra = {"inputs": {"text": [2]}, **({"string_inputs": ["text"]} if string_inputs else {})}
    prepared = Prepared(step=lambda: None, device="cpu", fetch_output=lambda: outputs,
                        details=Details(extra=extra))  # fmt: skip
    return checked_result(job, _output_check(job, prepared))


@pytest.mark.integration
def test_a_user_models_first_run_records_its_outputs_and_claims_no_check(tmp_path):
    pytest.importorskip("onnx")
    ids = np.array([3, 1])
    first = user_model_check(tmp_path, "onnxruntime", [ids])
    assert first.ok and first.max_abs_diff is None and first.details.check.tolerance is None
    assert first.details.check.note == (
        "not cross-checked: the first to run it with these inputs (openvino: checked against "
        "it); the outputs of onnxruntime are recorded as the reference"
    )
    later = user_model_check(tmp_path, "openvino", [ids])
    assert later.ok and later.max_abs_diff == 0.0
    assert "checked against the first framework that ran this model (onnxruntime)" in (
        later.details.check.note
    )
    assert user_model_check(tmp_path, "openvino", [ids + 1]).status == "failed"


@pytest.mark.integration
def test_string_outputs_are_compared_exactly_however_the_runtime_returns_them(tmp_path):
    pytest.importorskip("onnx")
    # ONNX Runtime returns str objects, TensorFlow bytes objects: the same strings
    words = np.array(["cat", "naïve"], dtype=object)
    first = user_model_check(tmp_path, "onnxruntime", [words, np.array([1, 0])], True)
    assert first.max_abs_diff is None
    assert first.details.check.note.startswith(
        "not cross-checked: no other framework that reads onnx takes its string inputs"
    )
    as_bytes = np.array([w.encode() for w in words], dtype=object)
    same = user_model_check(tmp_path, "onnxruntime", [as_bytes, np.array([1, 0])], True)
    assert same.ok and same.max_abs_diff == 0.0
    assert "2 outputs compared" in same.details.check.note
    other = np.array(["cat", "naive"], dtype=object)
    changed = user_model_check(tmp_path, "onnxruntime", [other, np.array([1, 0])], True)
    assert changed.status == "failed" and "output 0: <U" in changed.error
