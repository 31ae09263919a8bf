"""The `export` compile mode: torch.export, then AOTInductor, the deployment path.

TorchScript is deprecated in torch 2.13; what torch users now ship is an
ExportedProgram compiled ahead of time by AOTInductor into a package (a
shared library and its weights) that runs without Python's interpreter in
the model's loop. Compiling takes tens of seconds, so packages are cached
like the ONNX exports, keyed by what went into them; the time it took is
reported apart (details.export), never inside a step.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dlbench.atomic import write_atomic
from dlbench.errors import CaseError, cause_summary
from dlbench.reference.builtin import cache_dir
from dlbench.untyped import JSONObject

if TYPE_CHECKING:  # torch is imported where a package is compiled
    import torch
    from torch._inductor.package import AOTICompiledModel


def aoti_runner(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: Sequence[object],  # tensors, and a user's model's plain values
    identity: JSONObject,
) -> tuple[AOTICompiledModel, JSONObject]:
    """(the loaded AOTInductor package, details) for a module or ExportedProgram.

    `identity` names what was compiled (model, input shapes, device, torch
    version are added here); an equal identity reuses the cached package.
    """
    import torch

    key = {**identity, "shapes": [list(getattr(a, "shape", ())) for a in args],
           "device": str(getattr(args[0], "device", "cpu")) if args else "cpu",
           "torch": torch.__version__}  # fmt: skip
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    package = cache_dir() / "aoti" / digest[:16] / "model.pt2"
    details: JSONObject = {
        "method": "torch.export + AOTInductor",
        "device": key["device"],  # the package runs only there
        "cached": package.exists(),
    }
    if not package.exists():
        started = time.perf_counter()
        try:
            program = model if isinstance(model, torch.export.ExportedProgram) else (
                torch.export.export(model, tuple(args)))  # fmt: skip
            write_atomic(
                package,
                lambda path: torch._inductor.aoti_compile_and_package(
                    program, package_path=str(path)
                ),
            )
        except Exception as exc:
            raise CaseError(
                f"torch.export/AOTInductor failed: {cause_summary(exc, limit=300)}",
                detail=str(exc),
            ) from None
        details["export_s"] = round(time.perf_counter() - started, 3)
    runner = torch._inductor.aoti_load_package(str(package))
    return runner, details
