"""ONNX Runtime's int8, built by onnxruntime.quantization in a process of its own.

Run as `python -m dlbench.backends.onnxruntime.quantize REQUEST` by
reference.quantized, which caches what it writes. int8 is static
quantization in the QDQ format with per-channel weights, calibrated (MinMax)
on seeded samples of the workload's inputs, after ONNX Runtime's
pre-processing (shape inference and graph optimisation), as its
documentation asks. int8-dynamic quantizes the weights ahead and the
activations at each call (MatMul and Gemm).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from onnxruntime.quantization import CalibrationDataReader

from dlbench.backends.calibration import CALIBRATION_BATCH, calibration_inputs
from dlbench.backends.framework_guard import block_other_frameworks
from dlbench.reference.builtin import onnx_model
from dlbench.reference.quantized import builder_main, save_reference_outputs
from dlbench.spec.case import Case
from dlbench.untyped import JSONObject
from dlbench.workloads import get_workload
from dlbench.workloads.user_model import model_inputs

if TYPE_CHECKING:
    import numpy as np

MODEL_FILE = "model.onnx"


def build(case: Case, seed: int, folder: Path) -> JSONObject:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    source, batches, data, meta = _source(case, seed, folder)
    target = folder / MODEL_FILE
    if case.precision == "int8-dynamic":
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)
        method = "onnxruntime.quantization.quantize_dynamic (int8 weights, QInt8)"
        return {**meta, "method": method, "model_file": MODEL_FILE, "calibration": None}
    prepared, note = _preprocessed(source, folder)
    quantize_static(
        str(prepared),
        str(target),
        _Reader(batches),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
    )
    samples = sum(len(next(iter(batch.values()))) for batch in batches)
    return {
        **meta,
        "method": "onnxruntime.quantization.quantize_static (QDQ, per-channel, S8S8, MinMax)",
        "model_file": MODEL_FILE,
        "preprocess": note,
        "calibration": {"samples": samples, "data": data},
    }


def _source(
    case: Case, seed: int, folder: Path
) -> tuple[Path, list[dict[str, np.ndarray]], str, JSONObject]:
    """The fp32 model, its calibration batches and where they came from, and metadata."""
    if case.user_model is None:
        workload = get_workload(case.workload)
        params = workload.resolve_params("cpu", dict(case.params))
        path, _ = onnx_model(case.workload, params, seed)
        batches = calibration_inputs(case, seed, CALIBRATION_BATCH)
        data = "seeded samples of the workload's inputs (a seed of their own)"
        return path, batches, data, {"source": "the torch reference's ONNX export"}
    return _user_source(case, seed, folder)


def _user_source(
    case: Case, seed: int, folder: Path
) -> tuple[Path, list[dict[str, np.ndarray]], str, JSONObject]:
    """A user's ONNX file: calibrated on --input-data (else seeded batches of its
    inputs), with fp32's outputs on the benchmark inputs kept for the check."""
    import onnxruntime as ort

    from dlbench.backends.calibration import user_calibration
    from dlbench.backends.onnxruntime.user_model import ort_signature

    session = ort.InferenceSession(case.given_model.model, providers=["CPUExecutionProvider"])
    signature = ort_signature(session)
    batches, data = user_calibration(case, signature, seed)
    outputs = session.run(None, model_inputs(case, signature, seed))
    save_reference_outputs(folder, outputs)
    return Path(case.given_model.model), batches, data, {"source": "the given ONNX file"}


def _preprocessed(source: Path, folder: Path) -> tuple[Path, str]:
    """ONNX Runtime's pre-processing before static quantization, where it works."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    target = folder / "preprocessed.onnx"
    try:
        quant_pre_process(str(source), str(target))
    except Exception as exc:  # quantizing without it still works, less well: say so
        return source, f"skipped ({type(exc).__name__}: {str(exc)[:200]})"
    return target, "onnxruntime.quantization.quant_pre_process"


class _Reader(CalibrationDataReader):
    """Calibration batches, one per get_next(), as quantize_static reads them."""

    def __init__(self, batches: list[dict[str, np.ndarray]]) -> None:
        self._batches = iter(batches)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


if __name__ == "__main__":
    # onnxruntime.tools, which the pre-processing loads, imports torch wherever it is
    # installed (2.0 s of CPU against 0.5 s, bench/incidental_imports.py --quantizers):
    # the quantizer hides the other frameworks, as the worker that runs its model does
    block_other_frameworks("onnxruntime", quantizes=True)
    raise SystemExit(builder_main(build))
