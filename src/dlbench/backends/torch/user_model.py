"""Loading a user's torch model file safely: TorchScript, or weights_only unpickling.

Nothing here unpickles an untrusted file: torch files load as TorchScript
(whose archive loader rebuilds tensors only) or with weights_only=True. What
would need full unpickling is refused with a message naming --trust-model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.backends.base import REFUSED, load_error
from dlbench.errors import CaseError
from dlbench.workloads.user_model import InputSpec


def load_torch_model(path: str, trust: bool) -> tuple[Any, str]:
    """A runnable module: TorchScript, or (only with trust) a pickled nn.Module."""
    import torch

    name = Path(path).name
    try:
        return torch.jit.load(path, map_location="cpu"), "torchscript"
    except Exception as jit_error:  # not TorchScript: find out what it is, safely
        reason = load_error(jit_error)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        if "Weights only load failed" not in str(exc):
            raise CaseError(
                f"cannot read {name}: not a TorchScript or torch file ({reason})"
            ) from None
        if not trust:
            raise CaseError(REFUSED.format(name=name, why="it is not TorchScript and needs full "
                                           "unpickling")) from None  # fmt: skip
        loaded = torch.load(path, map_location="cpu", weights_only=False)  # the user vouched
    if isinstance(loaded, torch.nn.Module):
        return loaded, "pickled nn.Module (--trust-model)"
    raise CaseError(
        f"{name} holds {type(loaded).__name__}, not a model (weights only?); "
        "save a module with torch.jit.save(torch.jit.script(model), ...)"
    )


def torch_signature(module: Any) -> list[InputSpec]:
    """TorchScript records argument names but no shapes: --input must give them."""
    import inspect

    if hasattr(module, "forward") and hasattr(module.forward, "schema"):
        names = [a.name for a in module.forward.schema.arguments[1:]]
    else:
        names = list(inspect.signature(module.forward).parameters)
    return [InputSpec(name, None, "float32") for name in names]
