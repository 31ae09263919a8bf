"""Did the framework run the case where it was asked to? Checked, never assumed.

Backends record where their tensors or sessions actually landed (torch's
tensor device, TensorFlow's placement string, JAX's device, ONNX Runtime's
providers). A case that asked for a GPU and ran on the CPU, or the reverse,
fails with both facts in the message instead of reporting the wrong device.
"""

from __future__ import annotations

from typing import Any

from dlbench.errors import CaseError


def _kind(device: str) -> str:
    return device.split(":")[0]


def placement_error(asked: str, details: dict[str, Any]) -> str | None:
    """Why the recorded placement contradicts `asked` (a resolved device), or None."""
    wanted = _kind(asked)
    found: list[tuple[str, str]] = []  # (what recorded it, device kind it shows)
    if "torch_device" in details:
        found.append(("torch tensors", _kind(str(details["torch_device"]))))
    if "tf_device" in details:
        placed = str(details["tf_device"]).upper()
        found.append(("TensorFlow", "cuda" if "GPU" in placed else "cpu"))
    if "jax_device" in details:
        placed = str(details["jax_device"]).lower()
        found.append(("JAX", "cuda" if ("cuda" in placed or "gpu" in placed) else "cpu"))
    if details.get("providers"):
        first = str(details["providers"][0])
        found.append(("ONNX Runtime", "cuda" if first.startswith("CUDA") else "cpu"))
    for source, kind in found:
        if kind != wanted:
            return f"asked for {asked}, but {source} ran on {kind}: refusing a mislabelled number"
    return None


def require_placement(asked: str, details: dict[str, Any]) -> None:
    """Fail the case (CaseError) if the work landed somewhere other than `asked`."""
    problem = placement_error(asked, details)
    if problem:
        raise CaseError(problem)
