"""torch's int8: PT2E with the X86 Inductor quantizer, in a process of its own.

Run as `python -m dlbench.backends.torch.quantize REQUEST` by
reference.quantized, which caches what it writes. The reference model is
exported (torch.export) at the case's batch, annotated by torchao's
X86InductorQuantizer (its default config: static, per-channel weights),
calibrated on seeded samples of the workload's inputs, converted, and saved
as an exported program; the worker loads it and compiles it with Inductor,
which turns the quantize/dequantize pairs into int8 kernels. In torch 2.13
the PT2E quantizers live in torchao (torchao.quantization.pt2e), no longer
in torch.ao.quantization.
"""

from __future__ import annotations

from pathlib import Path

from dlbench.backends.calibration import calibration_inputs
from dlbench.reference.quantized import builder_main
from dlbench.spec.case import Case
from dlbench.untyped import JSONObject
from dlbench.workloads import get_workload

MODEL_FILE = "model.pt2"


def build(case: Case, seed: int, folder: Path) -> JSONObject:
    import torch
    import torchao
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as x86
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from dlbench.backends.torch.models import reference_module

    workload = get_workload(case.workload)
    params = workload.resolve_params("cpu", dict(case.params))
    module = reference_module(case.workload, params, seed).eval()
    batches = calibration_inputs(case, seed, int(case.batch_size or 1))
    tensors = [[torch.from_numpy(array) for array in batch.values()] for batch in batches]
    quantizer = x86.X86InductorQuantizer()
    quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
    with torch.no_grad():
        exported = torch.export.export(module, tuple(tensors[0])).module()
        prepared = prepare_pt2e(exported, quantizer)
        for batch in tensors:
            prepared(*batch)
        converted = convert_pt2e(prepared)
        program = torch.export.export(converted, tuple(tensors[0]))
    torch.export.save(program, str(folder / MODEL_FILE))
    return {
        "method": "PT2E, torchao X86InductorQuantizer (static, per-channel weights), "
        "run compiled by Inductor",
        "torchao": torchao.__version__,
        "source": "the torch reference, exported at the case's batch",
        "model_file": MODEL_FILE,
        "calibration": {
            "samples": len(batches) * int(case.batch_size or 1),
            "data": "seeded samples of the workload's inputs (a seed of their own)",
        },
    }


if __name__ == "__main__":
    raise SystemExit(builder_main(build))
