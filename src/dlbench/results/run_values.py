"""Value checks for run data read back from files or the store.

The shape check (results.schema) makes sure every field has the type the code
relies on; this one that every value is one dlbench could have written, so a
run from elsewhere cannot make a report say what was not measured:

- every number, anywhere in the run, is finite. Python's JSON reader takes
  NaN and Infinity (and reads 1e400 as infinity); an infinite median made
  compare say "slower, beyond 2x". dlbench writes null for a value that is not
  finite (spec.record_dict.finite);
- a case's numbers and the settings' pass the reader of their `dlbench run`
  option (spec.cli_options): a batch size is an integer > 0, a target
  accuracy a fraction. What the command line refuses, a file cannot bring in;
- a result's measured numbers (times, rates, sizes, shares) are not negative;
- every key is one dlbench knows: the run's, a result's, its case's, its
  latency statistics', the settings', the planned cases', and those of each
  typed part of its details. Free-form by design, and not checked for keys:
  `env`'s keys beyond its facts (newer versions add facts), `details.extra`
  and the other `JSONObject` parts (a framework's own), `derived`
  (computed again on read).
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Collection

from dlbench.measure.stats import LatencyStats
from dlbench.results.details import Details
from dlbench.results.run_ids import shown
from dlbench.results.schema import EXTRA_RESULT_KEYS, not_valid
from dlbench.spec.case import Case, Settings
from dlbench.spec.record_dict import flat_fields, unknown_keys, without_none
from dlbench.untyped import JSONObject, JSONValue

# A record's keys are listed in a message when there are this few; else named by kind
LISTED_KEYS = 12
PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,40}")
LATENCY_FIELDS = dataclasses.fields(LatencyStats)


def check_run_values(data: JSONObject, source: str, run_record: type, result_record: type) -> None:
    """Check the values of a run whose shape is checked (`run_record` and `result_record`
    are the Run and Result classes, which are read from these checks)."""
    _check_finite(data, source)
    _check_keys(data, run_record, source, "the run", "a run")
    _check_keys(data["settings"], Settings, source, "settings", "the settings")
    _check_by_options(data["settings"], Settings, source, "settings")
    for index, planned in enumerate(data.get("plan", [])):
        _check_case(planned, source, f"plan[{index}]")
    result_keys = [f.name for f in dataclasses.fields(result_record)] + list(EXTRA_RESULT_KEYS)
    for index, result in enumerate(data["results"]):
        where = f"results[{index}]"
        _check_keys(result, result_keys, source, where, "a result")
        if result.get("latency_ms") is not None:
            latency = result["latency_ms"]
            _check_keys(latency, LatencyStats, source, f"{where}.latency_ms", "latency statistics")
        _check_case(result["case"], source, f"{where}.case")
        _check_measured(result, result_record, source, where)
        for at, key, record in unknown_keys(Details, result.get("details", {}), "details"):
            raise not_valid(
                source, f"{where}.{at}", f"unknown key {shown(key)} (not a field of {record})"
            )


def _check_finite(data: JSONValue, source: str) -> None:
    # A loop, not recursion: the document may be nested as deep as the JSON reader allows.
    pending: list[tuple[str, JSONValue]] = [("", data)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise not_valid(
                source, where, f"{value} is not finite; every number in a run is finite"
            )
        if isinstance(value, dict):
            pending.extend(
                (f"{where}.{_key(k)}" if where else _key(k), v) for k, v in value.items()
            )
        elif isinstance(value, list):
            pending.extend((f"{where}[{i}]", v) for i, v in enumerate(value))


def _key(key: str) -> str:
    """A key from the file as a message shows it: quoted unless plain and short."""
    return key if PLAIN_KEY.fullmatch(key) else shown(key)


def _check_keys(
    data: JSONObject, known: type | Collection[str], source: str, where: str, noun: str
) -> None:
    names = [name for name, _ in flat_fields(known)] if isinstance(known, type) else known
    for key in data:
        if key not in names:
            allowed = (
                f"the keys of {noun} are {', '.join(names)}"
                if len(names) <= LISTED_KEYS
                else f"not a key of {noun}; the results format lists them"
            )
            raise not_valid(source, where, f"unknown key {shown(key)} ({allowed})")


def _check_case(case: JSONObject, source: str, where: str) -> None:
    _check_keys(case, Case, source, where, "a case")
    _check_by_options(case, Case, source, where)


def _check_by_options(values: JSONObject, record: type, source: str, where: str) -> None:
    """Each number (and each workload parameter) as the field's option reads it, typed."""
    for name, f in flat_fields(record):
        option = f.metadata.get("cli")
        value = values.get(name)
        if option is None or option.parse is None:
            continue
        at = f"{where}.{name}"
        if name == "params" and isinstance(value, dict):  # each as --param takes it
            typed = [(f"{at}.{_key(k)}", f"{k}={number!r}") for k, number in value.items()]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            typed = [(at, repr(value))]
        else:
            continue
        for place, text in typed:
            try:
                option.parse(text)
            except ValueError as exc:
                raise not_valid(source, place, str(exc)) from None


def _measured(hint: object) -> bool:
    """Whether a result's field of this annotation holds measured numbers (a number, or
    a list of them): none of them is ever negative."""
    hint = without_none(hint)
    if typing.get_origin(hint) in (list, tuple):  # tuple[float, ...]: samples, warm-up
        hint = typing.get_args(hint)[0]
    return hint in (int, float)


def _check_measured(result: JSONObject, result_record: type, source: str, where: str) -> None:
    numbers = []
    hints = typing.get_type_hints(result_record)
    for f in dataclasses.fields(result_record):
        value = result.get(f.name)
        if _measured(hints[f.name]) and isinstance(value, list):
            numbers += [(f"{where}.{f.name}[{i}]", number) for i, number in enumerate(value)]
        elif _measured(hints[f.name]):
            numbers.append((f"{where}.{f.name}", value))
    latency = result.get("latency_ms") or {}
    numbers += [(f"{where}.latency_ms.{f.name}", latency.get(f.name)) for f in LATENCY_FIELDS]
    for name, number in numbers:
        if number is not None and number < 0:
            raise not_valid(source, name, f"{number} is negative; a measured value is >= 0")
