"""Did the framework run the case where it was asked to? Checked, never assumed.

Each backend records where its tensors or sessions actually landed, in the
framework's own words and as a device kind (backends.base.placement, or
backends.placement.placement_of_each over every input, variable, output or
node). A case that asked for a GPU and ran on the CPU, or the reverse, or put
part of its work on each, fails with the facts in the message instead of
reporting the wrong device.
"""

from __future__ import annotations

from dlbench.backends.placement import MIXED
from dlbench.errors import CaseError
from dlbench.results.details import Details


def placement_error(asked: str, details: Details) -> str | None:
    """Why the recorded placement contradicts `asked` (a resolved device), or None."""
    placed = details.placement
    if placed is None:
        return None  # nothing placed anywhere (the null backend)
    wanted = asked.split(":")[0]
    if placed.kind == MIXED:
        return (
            f"asked for {asked}, but {placed.by} put part of the work on another device "
            f"({placed.reported}): refusing a mislabelled number"
        )
    if placed.kind != wanted:
        return (
            f"asked for {asked}, but {placed.by} ran on {placed.kind} "
            f"({placed.reported}): refusing a mislabelled number"
        )
    return None


def require_placement(asked: str, details: Details) -> None:
    """Fail the case (CaseError) if the work landed somewhere other than `asked`."""
    problem = placement_error(asked, details)
    if problem:
        raise CaseError(problem)


def require_device_kind(framework: str, requested: str, resolved: str) -> None:
    """Fail the case (CaseError) where the framework resolved an asked device to
    another kind (`mps` to `cuda:0`): the result would name a device not asked for."""
    kind = resolved.split(":")[0]
    if requested != "auto" and requested.split(":")[0] != kind:
        raise CaseError(
            f"device {requested!r} asked for, but {framework} has no such device and "
            f"would run on {resolved}; use --device {kind}, cpu or auto"
        )
