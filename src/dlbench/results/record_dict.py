"""Dataclass records to JSON objects and back, checked against their type hints.

Every typed part of a result's details (results.details) and the measure/
types it stores (an energy reading) go through these two functions, so a
new field is one line in its dataclass: its JSON key is its name, and a file
that holds the wrong type for it is refused when read (a ValueError, which
Run.from_dict turns into one clear UserError), not met deep in a report.

A field equal to its default is left out of the JSON, so a result that has
no LoadGen test or no energy counter does not carry a page of nulls. A field
marked with REST_FIELD gathers the keys its record does not name (a quantizer's own
metadata, the metric values of a --repeat process keyed by the metrics
table) and writes them back beside the named ones.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar, Union

from dlbench.spec import JSONObject, JSONValue

if TYPE_CHECKING:
    from _typeshed import DataclassInstance  # what dataclasses.fields takes (typeshed's)

R = TypeVar("R", bound="DataclassInstance")
REST = "rest"
# The metadata of a dict field that holds the keys its record does not name, spread
# back beside the named ones in its JSON: field(default_factory=dict, metadata=REST_FIELD)
REST_FIELD = {REST: True}


def to_dict(record: DataclassInstance) -> JSONObject:
    """The record as a JSON object: nested records as objects, defaults left out."""
    data: JSONObject = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.metadata.get(REST):
            data.update(value)
        elif value != _default(f):
            data[f.name] = _plain(value)
    return data


def from_dict(record: type[R], data: JSONValue) -> R:
    """The record read from a JSON object; ValueError where a value has the wrong type."""
    if not isinstance(data, dict):
        raise ValueError(f"{record.__name__}: expected an object, not {type(data).__name__}")
    hints = _hints(record)
    values: dict[str, object] = {}
    spare: str | None = None
    for f in dataclasses.fields(record):
        if f.metadata.get(REST):
            spare = f.name
        elif f.name in data:
            values[f.name] = _read(hints[f.name], data[f.name], f"{record.__name__}.{f.name}")
    if spare is not None:
        values[spare] = {k: v for k, v in data.items() if k not in values}
    return record(**values)


def unknown_keys(
    record: type[DataclassInstance], data: JSONValue, where: str
) -> Iterator[tuple[str, str, str]]:
    """(where, key, record's name) for each key of `data` (the JSON of `record`), and of
    the records inside it, that no field names. A record with a REST field takes any
    key, and a `dict[str, Any]` field is free-form; a value of the wrong type is passed
    over here (from_dict refuses it)."""
    if not isinstance(data, dict):
        return
    hints, fields = _hints(record), dataclasses.fields(record)
    named = {f.name for f in fields if not f.metadata.get(REST)}
    takes_any = len(named) < len(fields)
    for key, value in data.items():
        if key in named:
            yield from _unknown_in(hints[key], value, f"{where}.{key}")
        elif not takes_any:
            yield where, key, record.__name__


def _unknown_in(hint: object, value: JSONValue, where: str) -> Iterator[tuple[str, str, str]]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        for inner in (a for a in args if a is not type(None)):
            yield from _unknown_in(inner, value, where)
    elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
        yield from unknown_keys(hint, value, where)
    elif origin is list and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unknown_in(args[0], item, f"{where}[{index}]")
    elif origin is dict and isinstance(value, dict):
        for key, item in value.items():
            yield from _unknown_in(args[1], item, f"{where}.{key}")


def finite(value: JSONValue) -> JSONValue:
    """`value` (JSON data) with every number that is not finite made null.

    JSON has no NaN or Infinity (Python writes them, most readers refuse them, and
    dlbench refuses them on import), yet a run can measure one: a loss that diverged,
    an output check of mismatched shapes (max_abs_diff inf). The result's error says
    what it was; its JSON holds null, as for a value not measured."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def _plain(value: object) -> JSONValue:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _default(f: dataclasses.Field[object]) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING  # a required field is always written


@cache
def _hints(record: type[DataclassInstance]) -> dict[str, object]:
    return typing.get_type_hints(record)


def _read(hint: object, value: JSONValue, where: str) -> object:
    """`value` as `hint` says: records built, containers walked, scalars checked."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]  # records use `X | None` only
        return _read(inner, value, where)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return from_dict(hint, value)
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list")
        return [_read(args[0], v, where) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object")
        return {k: _read(args[1], v, where) for k, v in value.items()}
    if not isinstance(hint, type):
        raise TypeError(f"{where}: {hint!r} is no type a record's field can hold")
    if not _scalar_ok(hint, value):
        raise ValueError(f"{where}: expected {hint.__name__}, not {type(value).__name__}")
    return value


def _scalar_ok(hint: type, value: JSONValue) -> bool:
    if hint is float:  # JSON has one number type: 1 and 1.0 are both numbers
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)
