"""Dataclass records to JSON objects and back, checked against their type hints.

The one serialisation path: a run, its settings, its planned cases, each result,
its case, latency statistics and every typed part of its details (results.details),
and the worker's request, go to JSON and come back through these two functions. A
new field is one line in its dataclass: its JSON key is its name, and a file that
holds the wrong type for it is refused when read (a ValueError naming where, as a
path in the JSON such as `results[2].case.batch_size`, which Run.from_dict turns
into one clear UserError), not met deep in a report.

A field equal to its default is left out of the JSON, so a result that has
no LoadGen test or no energy counter does not carry a page of nulls; a record
that sets WRITES_EVERY_FIELD (a case, a result, a run: the shapes their files have
always had) writes every field. A tuple of (name, value) pairs (a case's params)
is a JSON object, any other tuple a list. A field annotated `Mapping[str, X]` is
a JSON object read into a read-only `types.MappingProxyType` (its keys in the
file's order). A field marked with REST_FIELD gathers the keys its record does not
name (a quantizer's own metadata, the metric values of a --repeat process keyed by
the metrics table) and writes them back beside the named ones.

A record may define its own `to_dict()` and `from_dict(data, where)` that call these
two and add what it documents (a result's `noisy`, the `ddp` of a case written
before the field); a record nested in another is written and read through its own.

A field marked FLATTENED holds an optional record whose fields are written beside
its parent's own, under their own names (a case's user model: `model`, `inputs` and
the rest, keys every case file has had), and read back into it: the record is there
where one of those keys holds a value other than its field's default. Its fields'
names are the parent's too: flat_fields lists them in JSON order. A flattened field
may hold one of several records (`A | B | None`, marked `flattened_union(choose)`): its
keys are every member's, each once, in the members' order (a field two members share
is one key), written whatever the member; `choose` says from the parent's JSON which
member it holds, and a key of another member holding a value is refused. A field
marked WRITTEN_AFTER is written after the key it names (where files have had it).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from functools import cache
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, TypeVar, Union  # noqa: TID251  # hints compared with Any

from dlbench.untyped import JSONObject, JSONValue

if TYPE_CHECKING:
    from _typeshed import DataclassInstance  # what dataclasses.fields takes (typeshed's)

R = TypeVar("R", bound="DataclassInstance")
REST = "rest"
# The metadata of a dict field that holds the keys its record does not name, spread
# back beside the named ones in its JSON: field(default_factory=dict, metadata=REST_FIELD)
REST_FIELD = {REST: True}
# The metadata of a field with a default that a stored record must still carry (a case's
# thread count: its default is the reading machine's, not the measuring one's)
REQUIRED = "required"
# The metadata of a field holding an optional record written flat (see above):
# field(default=None, metadata=FLATTENED)
FLATTEN = "flattened"
FLATTENED = {FLATTEN: True}
CHOOSE = "choose"
# The metadata of a field written after another key, where the files have it: {WRITTEN_AFTER: key}
WRITTEN_AFTER = "written_after"
# The class attribute (a ClassVar, True) of a record whose JSON holds every field,
# defaults too: the files of cases, results and runs have always had that shape.
WRITES_EVERY_FIELD = "WRITES_EVERY_FIELD"
SCALARS = (str, int, float, bool)
# The Python types JSON's reader gives for each scalar annotation (1 and 1.0 are both
# numbers; true is no integer)
JSON_TYPES: dict[type, tuple[type, ...]] = {
    str: (str,),
    int: (int,),
    float: (float, int),
    bool: (bool,),
}


class Absent(Enum):
    """The default of a field whose JSON may lack its key, told apart from one holding
    null: a machine fact a run written before it was recorded does not have, against
    one it recorded as unknown (no CPU quota). Left out of the JSON, as it was."""

    ABSENT = "absent"


ABSENT = Absent.ABSENT


def flattened_union(choose: Callable[[Mapping[str, object]], type | None]) -> dict[str, object]:
    """The metadata of a field holding one of several records, written flat; `choose`:
    the member a parent's JSON (or its flat values) holds, None for none."""
    return {FLATTEN: True, CHOOSE: choose}


def to_dict(record: DataclassInstance) -> JSONObject:
    """The record as a JSON object: nested records as objects, defaults left out
    (unless the record writes every field)."""
    data: JSONObject = {}
    _write(record, type(record), getattr(type(record), WRITES_EVERY_FIELD, False), data)
    if _moved(type(record)):
        order = _key_order(type(record))
        data = dict(sorted(data.items(), key=lambda item: order.get(item[0], len(order))))
    return data


def _write(
    record: DataclassInstance | None, kind: type[DataclassInstance], every: bool, data: JSONObject
) -> None:
    """`record`'s fields into `data` (a flattened record's into its parent's; None: its
    defaults, where every field is written)."""
    if record is None and not every:
        return
    hints = _hints(kind)
    for f in dataclasses.fields(kind):
        if record is None:
            value = _default(f)
            value = None if value is dataclasses.MISSING else value
        else:
            value = getattr(record, f.name)
        if f.metadata.get(FLATTEN):
            _write_flattened(value, _members(hints[f.name]), every, data)
        elif f.metadata.get(REST):
            data.update(value)  # type: ignore[call-overload]
        elif every or f.metadata.get(REQUIRED) or value != _default(f):
            data[f.name] = plain(value, hints[f.name])


def _write_flattened(
    value: object, members: tuple[type[DataclassInstance], ...], every: bool, data: JSONObject
) -> None:
    """A flattened field's keys: its record's fields, and where it may hold one of
    several, every member's (a field the record has not at its default)."""
    if len(members) == 1:
        _write(value, members[0], every, data)  # type: ignore[arg-type]
        return
    if value is None and not every:
        return
    own = {f.name for f in dataclasses.fields(value)} if value is not None else set()  # type: ignore[arg-type]
    for name, f, hint in _union_entries(members):
        default = _default(f)
        field_value = getattr(value, name) if name in own else default
        if every or field_value != default:
            data[name] = plain(None if field_value is dataclasses.MISSING else field_value, hint)


def from_dict(record: type[R], data: JSONValue, where: str | None = None) -> R:
    """The record read from a JSON object; ValueError where a value has the wrong type
    or a field without a default (or marked REQUIRED) is missing. `where` names the
    object in messages (a path such as "results[2].case"; "" for the document itself;
    by default the record's name)."""
    at = record.__name__ if where is None else where
    if not isinstance(data, dict):
        raise ValueError(f"{at or record.__name__}: expected an object")
    hints = _hints(record)
    values: dict[str, object] = {}
    spare: str | None = None
    missing = []
    for f in dataclasses.fields(record):
        if f.metadata.get(FLATTEN) and f.metadata.get(CHOOSE):
            values[f.name] = _read_chosen(f, _members(hints[f.name]), data, at)
        elif f.metadata.get(FLATTEN):
            values[f.name] = _read_flattened(_flattened(hints[f.name]), data, at)
        elif f.metadata.get(REST):
            spare = f.name
        elif f.name in data:
            values[f.name] = _read(hints[f.name], data[f.name], f"{at}.{f.name}" if at else f.name)
        elif _default(f) is dataclasses.MISSING or f.metadata.get(REQUIRED):
            missing.append(f.name)
    if missing:
        raise ValueError(f"{at or record.__name__}: missing {', '.join(missing)}")
    if spare is not None:
        named = _flat_hints(record)
        rest = {k: v for k, v in data.items() if k not in named}
        values[spare] = types.MappingProxyType(rest) if _is_mapping(hints[spare]) else rest
    return record(**values)


def _read_flattened(
    kind: type[DataclassInstance], data: JSONObject, at: str
) -> DataclassInstance | None:
    """The flattened record `data` holds beside its parent's fields; None where each of
    its keys is missing or holds its field's default (null for one without a default).
    Any other value is read, and type-checked, as the record's."""
    hints = _hints(kind)
    if all(
        f.name not in data or holds_default(data[f.name], plain(_default(f), hints[f.name]))
        for f in dataclasses.fields(kind)
    ):
        return None
    own = {f.name for f in dataclasses.fields(kind)}
    return from_dict(kind, {k: v for k, v in data.items() if k in own}, at)


def _read_chosen(
    f: dataclasses.Field[object],
    members: tuple[type[DataclassInstance], ...],
    data: JSONObject,
    at: str,
) -> DataclassInstance | None:
    """The member of a flattened union the parent's JSON holds (its field's `choose`
    says which: made even where its keys hold defaults, since the member itself says
    something), read from its keys; a ValueError where another member's key holds a
    value."""
    chosen = f.metadata[CHOOSE](data)
    own = {g.name for g in dataclasses.fields(chosen)} if chosen is not None else set()
    for name, g, hint in _union_entries(members):
        if name in own or name not in data:
            continue
        where = f"{at}.{name}" if at else name
        _read(hint, data[name], where)  # a value of the wrong type is refused as such
        if not holds_default(data[name], plain(_default(g), hint)):
            held = f"{chosen.__name__} has no such field" if chosen else "no record is held here"
            raise ValueError(f"{where}: given, but {held}")
    if chosen is None:
        return None
    return from_dict(chosen, {k: v for k, v in data.items() if k in own}, at)


def holds_default(value: object, default: object) -> bool:
    """Whether `value` is a field's `default` (MISSING: a field without one, which null
    stands for): equal and of the same kind, so that 0 is not False and null is not
    "completions"; a list is the tuple it holds, and an empty object no pairs."""
    if default is dataclasses.MISSING or value is None or default is None:
        return value is None and default in (None, dataclasses.MISSING)
    if isinstance(value, list | tuple) and isinstance(default, list | tuple):
        return list(value) == list(default)
    if isinstance(value, dict) and isinstance(default, list | tuple | dict):
        return not value and not default
    return type(value) is type(default) and value == default


def _flattened(hint: object) -> type[DataclassInstance]:
    """The record type of a FLATTENED field (annotated `Record | None`)."""
    inner = without_none(hint)
    if not (dataclasses.is_dataclass(inner) and isinstance(inner, type)):
        raise TypeError(f"{hint!r}: a flattened field holds an optional record")
    return inner


@cache
def _members(hint: object) -> tuple[type[DataclassInstance], ...]:
    """The records a FLATTENED field may hold (`A | None`, or `A | B | ... | None`)."""
    if typing.get_origin(hint) not in (Union, types.UnionType):
        return (_flattened(hint),)
    members = tuple(a for a in typing.get_args(hint) if a is not type(None))
    if not all(dataclasses.is_dataclass(m) and isinstance(m, type) for m in members):
        raise TypeError(f"{hint!r}: a flattened field holds records")
    return typing.cast("tuple[type[DataclassInstance], ...]", members)


@cache
def _union_entries(
    members: tuple[type[DataclassInstance], ...],
) -> tuple[tuple[str, dataclasses.Field[object], object], ...]:
    """Each key of a flattened field's members once, in the members' order; a TypeError
    where two members give one key different types or defaults (it is written, and read
    back, with the first's)."""
    entries: dict[str, tuple[str, dataclasses.Field[object], object]] = {}
    for member in members:
        for name, f, hint in _flat_entries(member):
            if name in entries:
                first = entries[name]
                if first[2] != hint or _default(first[1]) != _default(f):
                    raise TypeError(f"{name!r}: two members give it another type or default")
            entries.setdefault(name, (name, f, hint))
    return tuple(entries.values())


@cache
def flat_fields(
    record: type[DataclassInstance],
) -> tuple[tuple[str, dataclasses.Field[object]], ...]:
    """(JSON key, field) for each field of `record` in JSON order, a flattened record's
    fields in its place (made once per record type: a case's key and every case read
    walk it)."""
    _flat_hints(record)  # one field a key
    return tuple((name, f) for name, f, _ in _ordered_entries(record))


@cache
def _flat_hints(record: type[DataclassInstance]) -> dict[str, object]:
    """The annotation of the field behind each JSON key of `record` (a flattened
    record's keys too); a TypeError where two fields would write one key."""
    hints: dict[str, object] = {}
    for name, _, hint in _ordered_entries(record):
        if name in hints:
            raise TypeError(f"{record.__name__}: two fields write the JSON key {name!r}")
        hints[name] = hint
    return hints


def _flat_entries(
    record: type[DataclassInstance],
) -> Iterator[tuple[str, dataclasses.Field[object], object]]:
    hints = _hints(record)
    for f in dataclasses.fields(record):
        if f.metadata.get(FLATTEN):
            yield from _union_entries(_members(hints[f.name]))
        elif not f.metadata.get(REST):
            yield f.name, f, hints[f.name]


@cache
def _ordered_entries(
    record: type[DataclassInstance],
) -> tuple[tuple[str, dataclasses.Field[object], object], ...]:
    """_flat_entries with each of `record`'s own fields marked WRITTEN_AFTER moved after
    the key it names (to_dict orders a record's keys so: see _moved)."""
    entries = list(_flat_entries(record))
    own = [f for f in dataclasses.fields(record) if f.metadata.get(WRITTEN_AFTER)]
    for entry in [e for e in entries if any(e[1] is f for f in own)]:
        entries.remove(entry)
        after = [name for name, _, _ in entries].index(entry[1].metadata[WRITTEN_AFTER])
        entries.insert(after + 1, entry)
    return tuple(entries)


@cache
def _key_order(record: type[DataclassInstance]) -> dict[str, int]:
    """Each JSON key of `record` and its place (flat_fields' order), made once per record
    type: a case's key() writes it for every comparison."""
    return {name: index for index, (name, _) in enumerate(flat_fields(record))}


@cache
def _moved(record: type[DataclassInstance]) -> bool:
    """Whether a field of `record` is written after another key (WRITTEN_AFTER)."""
    return any(f.metadata.get(WRITTEN_AFTER) for f in dataclasses.fields(record))


def unknown_keys(
    record: type[DataclassInstance], data: JSONValue, where: str
) -> Iterator[tuple[str, str, str]]:
    """(where, key, record's name) for each key of `data` (the JSON of `record`), and of
    the records inside it, that no field names. A record with a REST field takes any
    key, and a `dict[str, JSONValue]` or `Mapping[str, JSONValue]` field is free-form; a
    value of the wrong type is passed over here (from_dict refuses it)."""
    if not isinstance(data, dict):
        return
    named = _flat_hints(record)
    takes_any = any(f.metadata.get(REST) for f in dataclasses.fields(record))
    for key, value in data.items():
        if key in named:
            yield from _unknown_in(named[key], value, f"{where}.{key}")
        elif not takes_any:
            yield where, key, record.__name__


def _unknown_in(hint: object, value: JSONValue, where: str) -> Iterator[tuple[str, str, str]]:
    if not _holds_records(hint):  # a number, a string, free-form JSON: no keys to check
        return
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        for inner in (a for a in args if a is not type(None)):
            yield from _unknown_in(inner, value, where)
    elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
        yield from unknown_keys(hint, value, where)
    elif origin in (list, tuple) and args and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unknown_in(args[0], item, f"{where}[{index}]")
    elif origin in (dict, Mapping) and isinstance(value, dict):
        for key, item in value.items():
            yield from _unknown_in(args[1], item, f"{where}.{key}")


@cache
def _holds_records(hint: object) -> bool:
    """Whether a value of `hint` may hold a record (whose keys unknown_keys checks): once
    per annotation, as a run's thousands of timeline points each ask it of every field."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return True
    return any(_holds_records(arg) for arg in typing.get_args(hint) if arg is not Ellipsis)


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


def plain(value: object, hint: object = Any) -> JSONValue:
    """`value` as JSON holds it; `hint`, its annotation, tells pairs from a list."""
    if value is None or type(value) in SCALARS:  # most values: a timeline's numbers
        return value
    hint = without_none(hint)
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)  # a record's own adds what it documents
        return own() if own is not None else to_dict(value)
    if isinstance(value, tuple) and is_pairs(hint):
        (pair,) = args[:1]
        return {k: plain(v, typing.get_args(pair)[1]) for k, v in value}
    if isinstance(value, list | tuple):
        item = args[0] if typing.get_origin(hint) in (list, tuple) and args else Any
        if item in SCALARS:  # a result's samples: thousands, already JSON's
            return list(value)
        return [plain(v, item) for v in value]
    if isinstance(value, Mapping):  # a dict, or a record's read-only MappingProxyType
        item = args[1] if typing.get_origin(hint) in (dict, Mapping) and len(args) == 2 else Any
        return {k: plain(v, item) for k, v in value.items()}
    if isinstance(value, PurePath):  # a path the worker writes to: its text
        return str(value)
    return value


def pair_fields(record: type[DataclassInstance]) -> tuple[str, ...]:
    """The fields of `record` that hold (name, value) pairs (a JSON object each)."""
    return tuple(name for name, hint in _flat_hints(record).items() if is_pairs(hint))


def without_none(hint: object) -> object:
    """`X` for `X | None`, `X | Absent` and `X | None | Absent`, the unions records use
    (any other `hint` as it is)."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None) and a is not Absent]
        return inner[0] if len(inner) == 1 else hint
    return hint


def _is_mapping(hint: object) -> bool:
    """Whether `hint` is `Mapping[...]` (None and ABSENT aside): read-only where it is read."""
    return typing.get_origin(without_none(hint)) is Mapping


def is_pairs(hint: object) -> bool:
    """Whether `hint` is tuple[tuple[str, X], ...]: (name, value) pairs, a JSON object."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is not tuple or len(args) != 2 or args[1] is not Ellipsis:
        return False
    pair = typing.get_args(args[0])
    return typing.get_origin(args[0]) is tuple and len(pair) == 2 and pair[0] is str


def field_default(f: dataclasses.Field[object]) -> object:
    """A field's default (its factory's value), MISSING where it has none."""
    return _default(f)


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
    scalar = _scalar_hint(hint)
    if scalar is not None:  # most fields: checked at once (a timeline's thousands of points)
        kind, nullable = scalar
        if value is None and nullable:
            return None
        if not _scalar_ok(kind, value):
            raise ValueError(f"{where}: expected {kind.__name__}, not {type(value).__name__}")
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = without_none(hint)
        if inner is hint:
            raise TypeError(f"{where}: {hint!r} is no union a record's field can hold")
        return _read(inner, value, where)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        own = getattr(hint, "from_dict", None)  # a record's own fills what older files lack
        return own(value, where) if own is not None else from_dict(hint, value, where)
    if is_pairs(hint):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object of names and values")
        item = typing.get_args(args[0])[1]
        return tuple(sorted((k, _read(item, v, f"{where}.{k}")) for k, v in value.items()))
    if origin is list or origin is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list")
        if args[0] in SCALARS:  # a result's samples: thousands, checked without a path each
            _check_scalars(args[0], value, where)
            items = list(value)
        else:
            items = [_read(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict or origin is Mapping:
        if not isinstance(value, Mapping):  # a dict; a record built in a process: any mapping
            raise ValueError(f"{where}: expected an object")
        read = {k: _read(args[1], v, f"{where}.{k}") for k, v in value.items()}
        return read if origin is dict else types.MappingProxyType(read)
    if hint is Path:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a path (a string), not {type(value).__name__}")
        return Path(value)
    if not isinstance(hint, type):
        raise TypeError(f"{where}: {hint!r} is no type a record's field can hold")
    if not _scalar_ok(hint, value):
        raise ValueError(f"{where}: expected {hint.__name__}, not {type(value).__name__}")
    return value


@cache
def _scalar_hint(hint: object) -> tuple[type, bool] | None:
    """(S, whether null is read as None) for a hint that is a JSON scalar S, `S | None`,
    `S | Absent` or `S | None | Absent`; None for any other hint."""
    if hint in SCALARS:
        return typing.cast(type, hint), False
    if typing.get_origin(hint) not in (Union, types.UnionType):
        return None
    args = typing.get_args(hint)
    inner = [a for a in args if a is not type(None) and a is not Absent]
    if len(inner) != 1 or inner[0] not in SCALARS:
        return None
    return inner[0], type(None) in args


def _check_scalars(hint: type, values: list[JSONValue], where: str) -> None:
    exact = JSON_TYPES[hint]  # at once by exact type: JSON's reader makes no subclasses
    if all(type(v) in exact for v in values):
        return
    for index, value in enumerate(values):  # a record built in a process: NumPy's floats
        if not _scalar_ok(hint, value):
            raise ValueError(
                f"{where}[{index}]: expected {hint.__name__}, not {type(value).__name__}"
            )


def _scalar_ok(hint: type, value: JSONValue) -> bool:
    if hint is float:  # JSON has one number type: 1 and 1.0 are both numbers
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)
