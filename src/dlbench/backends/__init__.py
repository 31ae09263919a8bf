"""Backends: one package per framework behind the small `Backend` interface.

Each package (null, torch, tensorflow, jax, onnxruntime, openvino) keeps its
model builders, lookup tables and special cases to itself; the registry
names its Backend class, and only the worker imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from dlbench.spec.registry import framework_info, imported_target

if TYPE_CHECKING:
    from dlbench.backends.base import Backend


def load_backend(name: str) -> type[Backend]:
    """Import and return the backend class; call only inside a worker."""
    return cast("type[Backend]", imported_target(framework_info(name).target))
