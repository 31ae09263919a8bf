"""Workloads: framework-free descriptions of what is computed.

A workload owns its shapes, its FLOPs and bytes per sample, its seeded
reference weights and its synthetic inputs, all as NumPy arrays, so every
backend computes the same thing from the same numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from dlbench.errors import UserError
from dlbench.spec.registry import WORKLOADS, imported_target

if TYPE_CHECKING:
    from dlbench.workloads.base import Workload


def get_workload(name: str) -> Workload:
    """The workload object for `name` (pure Python: imports no framework)."""
    try:
        target = WORKLOADS[str(name)]
    except KeyError:
        raise UserError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None
    return cast("Workload", imported_target(target))
