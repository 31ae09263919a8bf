"""Read-only mappings that a record can hold and still be pickled and copied.

A record's mapping fields hold a `types.MappingProxyType` (results.details.Immutable,
spec.record_dict), which Python cannot pickle or deep-copy: a loaded Run could not be
sent to another process (multiprocessing, Ray) or copied. Registered here, once for
every process that imports dlbench (the package imports this module), a proxy pickles
as a read-only proxy of a copy of its contents. Written by hand because the standard
library has no picklable read-only mapping, and a frozendict package for one reducer
is a dependency for nothing.
"""

from __future__ import annotations

import copyreg
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def read_only(values: Mapping[K, V]) -> MappingProxyType[K, V]:
    """A read-only proxy of a copy of `values`; one already read-only is kept (a record
    read back, or copied by replace()). What a record's mapping field holds
    (results.details.Immutable, measure.power_regime) and what a pickled proxy is read
    back as."""
    if isinstance(values, MappingProxyType):
        return values
    return MappingProxyType(dict(values))


def _reduced(
    proxy: MappingProxyType[K, V],
) -> tuple[Callable[[Mapping[K, V]], MappingProxyType[K, V]], tuple[dict[K, V]]]:
    return read_only, (dict(proxy),)


copyreg.pickle(MappingProxyType, _reduced)
