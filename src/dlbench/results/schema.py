"""What a run read back must hold beyond its records' types.

A run file is user input. Its records' types are checked as they are read
(spec.record_dict, from the dataclasses themselves); this module checks the
few rules no type states, so a malformed file ends in one clear UserError
instead of an AttributeError deep in a report: the run's id (files and folders
are named after it), each result's status, and the keys a result's JSON holds
beside its record's fields.
"""

from __future__ import annotations

from dlbench.errors import UserError
from dlbench.results.run_ids import run_id_problem
from dlbench.untyped import JSONObject

# Keys a result's JSON carries beside its record's fields: `noisy`, a field before
# flags were recorded and written since for readers of older files (results.records).
# And `derived`: the values computed with the run, for readers other than dlbench
# (results.files.run_json); dlbench computes them again and ignores these.
EXTRA_RESULT_KEYS: dict[str, tuple[type, ...]] = {"noisy": (bool, type(None)), "derived": (dict,)}
STATUSES = ("ok", "failed", "skipped")


def not_valid(source: str, where: str, problem: str) -> UserError:
    """The one message for a run that cannot be read: its source, where, and what is wrong."""
    return UserError(f"{source}: not a valid dlbench run ({where}: {problem})")


def check_run_shape(data: JSONObject, source: str) -> None:
    """Check what a run's types do not say (its records are read already)."""
    problem = run_id_problem(data["id"])  # files and folders are named after it
    if problem is not None:
        raise not_valid(source, "id", problem)
    for index, result in enumerate(data["results"]):
        _check_result(result, source, f"results[{index}]")


def _check_result(result: JSONObject, source: str, where: str) -> None:
    for name, allowed in EXTRA_RESULT_KEYS.items():
        if name in result and not isinstance(result[name], allowed):
            raise not_valid(source, f"{where}.{name}", f"unexpected {type(result[name]).__name__}")
    if result["status"] not in STATUSES:
        raise not_valid(source, f"{where}.status", f"{result['status']!r} is not one of {STATUSES}")
