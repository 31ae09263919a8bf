"""OpenVINO's int8, built by NNCF's post-training quantization in a process of its own.

Run as `python -m dlbench.backends.openvino.quantize REQUEST` by
reference.quantized, which caches the IR it writes. nncf.quantize
calibrates on seeded samples of the workload's inputs (a user model: its
--input-data, else seeded batches of its inputs), with the TRANSFORMER model
type for BERT-family encoders, as NNCF advises for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.calibration import calibration_inputs, user_calibration
from dlbench.backends.framework_guard import block_other_frameworks
from dlbench.reference.builtin import onnx_model
from dlbench.reference.quantized import builder_main, save_reference_outputs
from dlbench.spec.case import Case
from dlbench.untyped import JSONObject
from dlbench.workloads import get_workload
from dlbench.workloads.user_model import model_inputs

if TYPE_CHECKING:  # imported in the builder's process (OpenVINO ships no types)
    import nncf
    import numpy as np
    import openvino as ov

MODEL_FILE = "model.xml"


def build(case: Case, seed: int, folder: Path) -> JSONObject:
    import nncf
    import openvino as ov

    core = ov.Core()
    if case.user_model is None:
        workload = get_workload(case.workload)
        params = workload.resolve_params("cpu", dict(case.params))
        path, _ = onnx_model(case.workload, params, seed)
        model = core.read_model(str(path))
        batches = calibration_inputs(case, seed, batch=1)
        data = "seeded samples of the workload's inputs (a seed of their own)"
        transformer, source = workload.transformer, "the torch reference's ONNX export"
    else:
        model, batches, data = _user_model(core, case, seed, folder)
        transformer, source = False, "the given model file"
    options: dict[str, int | nncf.ModelType] = {"subset_size": len(batches)}
    if transformer:
        options["model_type"] = nncf.ModelType.TRANSFORMER
    quantized = nncf.quantize(model, nncf.Dataset(batches), **options)
    ov.save_model(quantized, str(folder / MODEL_FILE), compress_to_fp16=False)
    samples = sum(len(next(iter(batch.values()))) for batch in batches)
    return {
        "method": "NNCF post-training quantization (nncf.quantize"
        + (", model_type=TRANSFORMER)" if transformer else ")"),
        "nncf": nncf.__version__,
        "source": source,
        "model_file": MODEL_FILE,
        "calibration": {"samples": samples, "data": data},
        **({"reference": "fp32-outputs.npz"} if case.user_model is not None else {}),
    }


def _user_model(
    core: ov.Core, case: Case, seed: int, folder: Path
) -> tuple[ov.Model, list[dict[str, np.ndarray]], str]:
    """A user's model, its calibration batches, and fp32's outputs kept for the check."""
    from dlbench.backends.openvino.user_model import ov_signature

    model = core.read_model(case.given_model.model)
    signature = ov_signature(model)
    batches, data = user_calibration(case, signature, seed)
    feeds = model_inputs(case, signature, seed)
    reshaped = core.read_model(case.given_model.model)
    reshaped.reshape({name: list(array.shape) for name, array in feeds.items()})
    compiled = core.compile_model(reshaped, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    outputs = compiled(feeds)
    save_reference_outputs(folder, [outputs[port] for port in compiled.outputs])
    return model, batches, data


if __name__ == "__main__":
    # NNCF imports torch wherever it is installed (2.3 s of CPU against 0.8 s,
    # bench/incidental_imports.py --quantizers): the quantizer hides the other
    # frameworks, as the worker that runs its model does
    block_other_frameworks("openvino", quantizes=True)
    raise SystemExit(builder_main(build))
