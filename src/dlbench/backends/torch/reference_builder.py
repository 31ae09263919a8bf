"""Builds a reference artifact in a process of its own: `python -m` this module.

dlbench.reference.builtin asks for an output of the torch eager fp32 reference
or its ONNX export; this process imports torch, builds the model with the
workload's seeded weights, and writes the artifact into the cache atomically,
so torch never enters another framework's worker.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.atomic import write_atomic
from dlbench.backends.framework_guard import block_other_frameworks
from dlbench.backends.torch.models import reference_module
from dlbench.reference.builtin import OPSET, ReferenceRequest, reference_output_path
from dlbench.spec.case_inputs import CaseInputs
from dlbench.spec.record_dict import from_dict
from dlbench.workloads.inputs import case_arrays

if TYPE_CHECKING:  # imported in the builder's process
    import torch


def _build_here(kind: str, wanted: CaseInputs) -> None:
    """Runs in the builder process: imports torch and writes the artifact."""
    import numpy as np
    import torch

    params = dict(wanted.params)
    torch.manual_seed(wanted.seed)
    module = reference_module(wanted.workload, params, wanted.seed).eval()
    inputs = {name: torch.from_numpy(array) for name, array in case_arrays(wanted).items()}
    output_path = reference_output_path(wanted)
    # the export's batch's output too, while the model is built: an ONNX case at that
    # batch (the one most runs use) then needs no second builder process
    if kind == "output" or not output_path.exists():
        with torch.inference_mode():
            output = module(*inputs.values()).numpy()
        write_atomic(output_path, lambda p: np.save(p, output))
    if kind == "output":
        return
    started = time.perf_counter()
    folder = output_path.parent
    write_atomic(folder / "model.onnx", lambda p: _export(module, inputs, p))
    meta = {
        "opset": OPSET,
        "exporter": "torch.onnx.export (TorchScript-based)",
        "torch": torch.__version__,
        "export_s": time.perf_counter() - started,
        "inputs": list(inputs),
    }
    write_atomic(folder / "model.json", lambda p: p.write_text(json.dumps(meta)))


def _export(module: torch.nn.Module, inputs: dict[str, torch.Tensor], path: Path) -> None:
    import torch

    dynamic = {name: {0: "batch"} for name in inputs}
    dynamic["output"] = {0: "batch"}
    torch.onnx.export(
        module,
        tuple(inputs.values()),
        str(path),
        input_names=list(inputs),
        output_names=["output"],
        dynamic_axes=dynamic,
        opset_version=OPSET,
        dynamo=False,
    )


def main(argv: list[str] | None = None) -> int:
    # a torch process as a torch worker is: the other frameworks, and the libraries
    # transformers imports only because they are installed, hidden
    block_other_frameworks("torch")
    parser = argparse.ArgumentParser(description="build a reference artifact (internal)")
    parser.add_argument("request", help="JSON: kind (output or onnx) and the inputs")
    document = json.loads(parser.parse_args(argv).request)
    request = from_dict(ReferenceRequest, document, "the builder's request")
    _build_here(request.kind, request.inputs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
