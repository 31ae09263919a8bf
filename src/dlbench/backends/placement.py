"""Where a framework put every piece of a case's work, as one placement record.

A backend names each thing it can ask its framework about (every input, every
variable, every output, every graph node that ran) with the device the
framework reports for it, and `placement_of_each` makes of them the one
`Placement` the worker checks (worker.placement): their shared device kind, or
MIXED, naming the pieces that landed elsewhere. Looking at one tensor, or at a
session's first provider, would miss a variable left on the host or a node
that fell back to the CPU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from dlbench.errors import CaseError
from dlbench.results.details import Placement

# The kind of a placement whose pieces are on more than one kind of device.
MIXED = "mixed"
# Pieces named per device in the record; the rest are counted.
NAMED = 3


def placement_of_each(
    reported_by: str, placed: Mapping[str, str], kind_of: Callable[[str], str]
) -> Placement:
    """One record of where each named piece is (`placed`: name -> the framework's
    device string for it; `kind_of`: that string's device kind)."""
    if not placed:
        raise ValueError(f"{reported_by}: nothing to place")
    kinds = {kind_of(device) for device in placed.values()}
    kind = kinds.pop() if len(kinds) == 1 else MIXED
    return Placement(by=reported_by, reported=_described(placed), kind=kind)


def require_outputs_with(
    placement: Placement, outputs: Mapping[str, str], kind_of: Callable[[str], str]
) -> None:
    """A CaseError unless every output is on the kind of device the rest of the work
    was: for frameworks whose outputs exist only after a call, checked on the
    check's own call after measurement, so no timed step pays for it."""
    stray = {name: device for name, device in outputs.items() if kind_of(device) != placement.kind}
    if stray:
        raise CaseError(
            f"{placement.by} put its inputs and variables on {placement.kind} but outputs "
            f"elsewhere ({_described(stray)}): refusing a mislabelled number"
        )


def _described(placed: Mapping[str, str]) -> str:
    """ "12 on /GPU:0; 2 on /CPU:0: bias, scale": the device holding the most first,
    the others with their pieces named."""
    by_device: dict[str, list[str]] = {}
    for name, device in placed.items():
        by_device.setdefault(device, []).append(name)
    ranked = Counter({device: len(names) for device, names in by_device.items()}).most_common()
    parts = [f"{ranked[0][1]} on {ranked[0][0]}"]
    for device, count in ranked[1:]:
        names = by_device[device]
        more = f" and {count - NAMED} more" if count > NAMED else ""
        parts.append(f"{count} on {device}: {', '.join(names[:NAMED])}{more}")
    return "; ".join(parts)
