"""Shape checks for run data read back from files or the store.

A run file is user input: before it becomes a Run, every field is checked to
have the type the code relies on, so a malformed file ends in one clear
UserError instead of an AttributeError deep in a report.
"""

from __future__ import annotations

from typing import Any

from dlbench.errors import UserError

NUMBER = "number"
OPTIONAL_NUMBER = "number or null"
# field -> allowed Python types (None allowed where listed)
RUN_FIELDS: dict[str, tuple[Any, ...]] = {
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
REQUIRED_RESULT_FIELDS = (
    "workload",
    "framework",
    "compile",
    "mode",
    "device",
    "batch_size",
    "precision",
    "threads",
    "interop_threads",
    "status",
)
RESULT_FIELDS: dict[str, tuple[Any, ...] | str] = {
    "workload": (str,),
    "framework": (str,),
    "compile": (str,),
    "mode": (str,),
    "device": (str,),
    "requested_device": (str,),
    "precision": (str,),
    "status": (str,),
    "threads": (int,),
    "interop_threads": (int,),
    "nproc": (int,),
    "batch_size": (int, type(None)),
    "error": (str, type(None)),
    "error_detail": (str, type(None)),
    "framework_version": (str, type(None)),
    "started_at": (str, type(None)),
    "primary_metric": (str, type(None)),
    "scenario": (str, type(None)),
    "noisy": (bool, type(None)),
    "params": (dict,),
    "details": (dict,),
    "case": (dict,),
    "latency_ms": (dict, type(None)),
    "warmup_ms": (list,),
    "samples_ms": (list,),
}
for _name in (
    "throughput",
    "gflops",
    "gbps",
    "flops_per_sample",
    "bytes_per_sample",
    "first_call_ms",
    "cpu_percent",
    "peak_rss_mb",
    "load_avg_before",
    "load_avg_after",
    "import_s",
    "setup_s",
    "max_abs_diff",
    "duration_s",
):
    RESULT_FIELDS[_name] = OPTIONAL_NUMBER
LATENCY_KEYS = ("median", "mean", "p90", "p99", "std", "iqr", "min", "max", "n")
STATUSES = ("ok", "failed", "skipped")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_ok(value: Any, allowed: tuple[Any, ...] | str) -> bool:
    if allowed == OPTIONAL_NUMBER:
        return value is None or _is_number(value)
    if isinstance(value, bool) and bool not in allowed:
        return False  # JSON true is not an integer here
    return isinstance(value, allowed)


def _fail(source: str, where: str, problem: str) -> UserError:
    return UserError(f"{source}: not a valid dlbench run ({where}: {problem})")


def check_run_shape(data: dict[str, Any], source: str) -> None:
    for name, allowed in RUN_FIELDS.items():
        if name in data and not _type_ok(data[name], allowed):
            raise _fail(source, name, f"unexpected {type(data[name]).__name__}")
    for index, result in enumerate(data["results"]):
        check_result_shape(result, source, f"results[{index}]")


def check_result_shape(result: Any, source: str, where: str) -> None:
    if not isinstance(result, dict):
        raise _fail(source, where, "expected an object")
    missing = [name for name in REQUIRED_RESULT_FIELDS if name not in result]
    if missing:
        raise _fail(source, where, f"missing {', '.join(missing)}")
    for name, allowed in RESULT_FIELDS.items():
        if name in result and not _type_ok(result[name], allowed):
            raise _fail(source, f"{where}.{name}", f"unexpected {type(result[name]).__name__}")
    if result["status"] not in STATUSES:
        raise _fail(source, f"{where}.status", f"{result['status']!r} is not one of {STATUSES}")
    if not all(isinstance(k, str) and _is_number(v) for k, v in result.get("params", {}).items()):
        raise _fail(source, f"{where}.params", "expected names mapped to numbers")
    for name in ("samples_ms", "warmup_ms"):
        if not all(_is_number(v) for v in result.get(name, [])):
            raise _fail(source, f"{where}.{name}", "expected a list of numbers")
    latency = result.get("latency_ms")
    if latency is not None and not all(_is_number(latency.get(k)) for k in LATENCY_KEYS):
        raise _fail(source, f"{where}.latency_ms", f"expected numbers {', '.join(LATENCY_KEYS)}")
