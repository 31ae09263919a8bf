"""What LoadGen concluded, read from its detail log (mlperf_log_detail.txt).

Each line of that log is `:::MLLOG {json}` with a "key" and a "value".
LoadGen's own numbers (validity, rates, latency percentiles) are kept as it
wrote them, converted to milliseconds, in a LoadGenOutcome: each value it has
is of the type LoadGen logs it as, or None where the log lacks it (or holds
something else there).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from dlbench.results.details import Immutable
from dlbench.untyped import JSONObject, JSONValue

DETAIL_LOG = "mlperf_log_detail.txt"
PREFIX = ":::MLLOG "
PERCENTILE_KEY = re.compile(r"result_(\d+\.\d+)_percentile_latency_ns")
PER_QUERY_KEY = re.compile(r"result_(\d+\.\d+)_percentile_per_query_latency_ns")
# use_token_latencies: first-token latency and time per output token (LoadGen's
# names; its TPOT minimum, maximum and mean keys carry no unit)
TTFT_KEY = re.compile(r"result_first_token_(\d+\.\d+)_percentile_latency_ns")
TPOT_KEY = re.compile(r"result_time_per_output_token_(\d+\.\d+)_percentile_ns")
# The samples-per-second figure LoadGen reports in each scenario.
RATE_KEYS = {
    "single-stream": "result_qps_with_loadgen_overhead",
    "server": "result_completed_samples_per_sec",
    "offline": "result_samples_per_second",
}


@dataclass(frozen=True)
class LoadGenOutcome(Immutable):
    """One LoadGen test's verdict, rates and latency percentiles (ms), from its detail
    log: the fields of results.details.LoadGen (and of a --find-peak try) that LoadGen
    gives, under the same names, so its JSON (spec.record_dict.to_dict) spreads into
    that record's. The fields without a default are in every test's outcome; the
    others only in some scenarios' (None, and left out of the JSON, elsewhere)."""

    verdict: str | None  # result_validity: "VALID" or "INVALID"
    # result_invalid_reason, with why early stopping was not met where it was not
    invalid_reason: str | None
    perf_constraints_met: bool | None
    early_stopping: str | None  # early_stopping_result, LoadGen's sentences
    queries: int | None  # result_query_count
    samples_per_s: float | None  # the scenario's rate (RATE_KEYS), or multi-stream's
    latency_ms: Mapping[str, float]  # "50" ... "99.9", "min", "max", "mean"
    errors: tuple[str, ...]  # each entry LoadGen marked is_error, as "key: value"
    version: str | None  # loadgen_version: "6.0.17 @ d6147c7eb7"
    # the server scenario's
    scheduled_samples_per_s: float | None = None
    over_bound: int | None = None  # result_overlatency_query_count
    # multi-stream's: each query's latency (its samples together)
    per_query_latency_ms: Mapping[str, float] | None = None
    # a server with token latencies (use_token_latencies): TTFT and TPOT percentiles
    ttft_percentiles_ms: Mapping[str, float] | None = None
    tpot_percentiles_ms: Mapping[str, float] | None = None
    tokens_per_s: float | None = None  # result_completed_tokens_per_second


def read_entries(path: Path) -> JSONObject:
    """Every key of the detail log and its last value; errors gathered under "errors"."""
    entries: JSONObject = {}
    errors: list[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith(PREFIX):
            continue
        try:
            record = json.loads(line[len(PREFIX) :])
        except json.JSONDecodeError:
            continue
        key = record.get("key")
        if not isinstance(key, str):
            continue
        entries[key] = record.get("value")
        if (record.get("metadata") or {}).get("is_error"):
            errors.append(f"{key}: {record.get('value')}")
    entries["errors"] = errors
    return entries


def loadgen_outcome(path: Path, scenario: str, batch_size: int) -> LoadGenOutcome:
    """LoadGen's verdict, rate and latency percentiles (ms) for one test."""
    entries = read_entries(path)
    early = (_text(entries.get("early_stopping_result")) or "").strip()
    reason = (_text(entries.get("result_invalid_reason")) or "").strip()
    if entries.get("early_stopping_met") is False:  # LoadGen leaves it out of the reason
        reason = f"{reason} Early stopping not met: {early}".strip()
    server = scenario == "server"
    tokens = server and "result_first_token_mean_latency_ns" in entries
    first, rest = "result_first_token_{}_latency_ns", "result_time_to_output_token_{}"
    completed = entries.get("result_completed_tokens_per_second")
    return LoadGenOutcome(
        verdict=_text(entries.get("result_validity")),
        invalid_reason=reason or None,
        perf_constraints_met=_flag(entries.get("result_perf_constraints_met")),
        early_stopping=early or None,
        queries=_count(entries.get("result_query_count")),
        samples_per_s=_rate(entries, scenario, batch_size),
        latency_ms=_percentiles(entries, PERCENTILE_KEY, "result_{}_latency_ns"),
        errors=tuple(entries["errors"]),
        version=_text(entries.get("loadgen_version")),
        scheduled_samples_per_s=_value(entries.get("result_scheduled_samples_per_sec"))
        if server
        else None,
        over_bound=_count(entries.get("result_overlatency_query_count")) if server else None,
        per_query_latency_ms=_percentiles(entries, PER_QUERY_KEY, "result_{}_query_latency_ns")
        if scenario == "multi-stream"
        else None,
        ttft_percentiles_ms=_percentiles(entries, TTFT_KEY, first) if tokens else None,
        tpot_percentiles_ms=_percentiles(entries, TPOT_KEY, rest) if tokens else None,
        tokens_per_s=float(completed) if tokens and _positive(completed) else None,
    )


def _rate(entries: JSONObject, scenario: str, batch_size: int) -> float | None:
    """Samples per second: LoadGen's figure, or a query's samples over its mean latency
    (multi-stream, where LoadGen reports latencies only)."""
    if scenario == "multi-stream":
        mean_ns = entries.get("result_mean_query_latency_ns")
        return batch_size * 1e9 / mean_ns if _positive(mean_ns) else None
    value = entries.get(RATE_KEYS[scenario])
    return float(value) if _positive(value) else None


def _percentiles(entries: JSONObject, pattern: re.Pattern[str], stat: str) -> dict[str, float]:
    """{"50": ms, ..., "99.9": ms, "min": ms, "max": ms, "mean": ms} from LoadGen's ns."""
    found: dict[str, float] = {}
    for key, value in entries.items():
        match = pattern.fullmatch(key)
        if match and _number(value):
            found[f"{float(match.group(1)):g}"] = value / 1e6
    for name in ("min", "max", "mean"):
        value = entries.get(stat.format(name))
        if _number(value):
            found[name] = value / 1e6
    return found


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _value(value: JSONValue) -> float | None:
    """A number as LoadGen wrote it (an integer stays one in the JSON), else None."""
    return value if _number(value) else None


def _count(value: JSONValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(value: JSONValue) -> bool | None:
    return value if isinstance(value, bool) else None


def _text(value: JSONValue) -> str | None:
    return value if isinstance(value, str) else None


def _positive(value: object) -> TypeGuard[float]:
    return _number(value) and value > 0
