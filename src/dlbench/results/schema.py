"""Shape checks for run data read back from files or the store.

A run file is user input: before it becomes a Run, every field is checked to
have the type the code relies on, so a malformed file ends in one clear
UserError instead of an AttributeError deep in a report.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypeAlias

from dlbench.errors import UserError
from dlbench.measure.stats import LatencyStats
from dlbench.results.run_ids import run_id_problem
from dlbench.spec import JSONObject, JSONValue
from dlbench.spec.case import PAIR_FIELDS, Case, Settings

if TYPE_CHECKING:
    from _typeshed import DataclassInstance  # what dataclasses.fields takes (typeshed's)

NUMBER = "number"
OPTIONAL_NUMBER = "number or null"
# The Python types a JSON value may have, or OPTIONAL_NUMBER (any number, or null)
Allowed: TypeAlias = "tuple[type, ...] | str"
# field -> allowed Python types (None allowed where listed)
RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "started_at": (str,),
    "suite": (str,),
    "settings": (dict,),
    "env": (dict,),
    "results": (list,),
    "command": (list,),
    "plan": (list,),
    "finished_at": (str, type(None)),
}
# What each Python annotation of a record's field may be in JSON.
JSON_TYPES: dict[str, Allowed] = {
    "str": (str,),
    "str | None": (str, type(None)),
    "int": (int,),
    "int | None": (int, type(None)),
    "bool": (bool,),
    "bool | None": (bool, type(None)),
    "float": OPTIONAL_NUMBER,  # JSON has no float type: 1 and 1.0 are both numbers
    "float | None": OPTIONAL_NUMBER,
    "LatencyStats | None": (dict, type(None)),
    "Case": (dict,),
    "Details": (dict,),  # its parts are checked as they are read (results.record_dict)
}


def json_shape(record: type[DataclassInstance]) -> tuple[dict[str, Allowed], tuple[str, ...]]:
    """A dataclass's fields as JSON types, and those that must be present (no default).

    Read from the dataclass itself, so a field added to Result or Case is
    checked without a second list to keep in step.
    """
    shape: dict[str, Allowed] = {}
    required = []
    for f in dataclasses.fields(record):
        annotation = str(f.type)
        if annotation.startswith(("dict[", "dict ")):
            shape[f.name] = (dict,)
        elif annotation.startswith(("list[", "tuple[")):
            shape[f.name] = (dict,) if f.name in PAIR_FIELDS else (list,)
        else:
            shape[f.name] = JSON_TYPES[annotation]
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if no_default or f.metadata.get("required"):
            required.append(f.name)
    return shape, tuple(required)


LATENCY_KEYS = tuple(f.name for f in dataclasses.fields(LatencyStats))
# Keys a result's JSON carries beside its record's fields: `noisy`, a field before
# flags were recorded and written since for readers of older files (results.records).
# And `derived`: the values computed with the run, for readers other than dlbench
# (results.files.run_json); dlbench computes them again and ignores these.
EXTRA_RESULT_KEYS: dict[str, tuple[type, ...]] = {"noisy": (bool, type(None)), "derived": (dict,)}
STATUSES = ("ok", "failed", "skipped")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_ok(value: JSONValue, allowed: Allowed) -> bool:
    if isinstance(allowed, str):  # OPTIONAL_NUMBER
        return value is None or _is_number(value)
    if isinstance(value, bool) and bool not in allowed:
        return False  # JSON true is not an integer here
    return isinstance(value, allowed)


def _check_record(
    data: JSONValue, record: type[DataclassInstance], source: str, where: str
) -> None:
    if not isinstance(data, dict):
        raise not_valid(source, where, "expected an object")
    shape, required = json_shape(record)
    missing = [name for name in required if name not in data]
    if missing:
        raise not_valid(source, where, f"missing {', '.join(missing)}")
    for name, allowed in shape.items():
        if name in data and not _type_ok(data[name], allowed):
            raise not_valid(source, f"{where}.{name}", f"unexpected {type(data[name]).__name__}")


def not_valid(source: str, where: str, problem: str) -> UserError:
    """The one message for a run that cannot be read: its source, where, and what is wrong."""
    return UserError(f"{source}: not a valid dlbench run ({where}: {problem})")


def check_run_shape(data: JSONObject, source: str, result_record: type[DataclassInstance]) -> None:
    """Check a run's fields, its settings, its planned cases, and each result's against
    `result_record` (the Result class)."""
    for name, allowed in RUN_FIELDS.items():
        if name in data and not _type_ok(data[name], allowed):
            raise not_valid(source, name, f"unexpected {type(data[name]).__name__}")
    problem = run_id_problem(data["id"])  # files and folders are named after it
    if problem is not None:
        raise not_valid(source, "id", problem)
    _check_record(data["settings"], Settings, source, "settings")  # --resume and rerun use them
    for index, planned in enumerate(data.get("plan", [])):  # what --resume runs
        _check_case(planned, source, f"plan[{index}]")
    for index, result in enumerate(data["results"]):
        check_result_shape(result, source, f"results[{index}]", result_record)


def check_result_shape(
    result: JSONValue, source: str, where: str, result_record: type[DataclassInstance]
) -> None:
    _check_record(result, result_record, source, where)
    for name, allowed in EXTRA_RESULT_KEYS.items():
        if name in result and not _type_ok(result[name], allowed):
            raise not_valid(source, f"{where}.{name}", f"unexpected {type(result[name]).__name__}")
    _check_case(result["case"], source, f"{where}.case")
    if result["status"] not in STATUSES:
        raise not_valid(source, f"{where}.status", f"{result['status']!r} is not one of {STATUSES}")
    for name in ("samples_ms", "warmup_ms"):
        if not all(_is_number(v) for v in result.get(name, [])):
            raise not_valid(source, f"{where}.{name}", "expected a list of numbers")
    latency = result.get("latency_ms")
    if latency is not None and not all(_is_number(latency.get(k)) for k in LATENCY_KEYS):
        raise not_valid(
            source, f"{where}.latency_ms", f"expected numbers {', '.join(LATENCY_KEYS)}"
        )


def _check_case(case: JSONValue, source: str, where: str) -> None:
    _check_record(case, Case, source, where)
    if not all(isinstance(k, str) and _is_number(v) for k, v in case.get("params", {}).items()):
        raise not_valid(source, f"{where}.params", "expected names mapped to numbers")
    for name in ("options", "inputs"):
        if not all(isinstance(v, str) for v in case.get(name, {}).values()):
            raise not_valid(source, f"{where}.{name}", "expected names mapped to strings")
    if not all(isinstance(v, str) for v in case.get("torchrun_args", [])):
        raise not_valid(source, f"{where}.torchrun_args", "expected a list of strings")
