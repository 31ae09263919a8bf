"""What LoadGen concluded, read from its detail log (mlperf_log_detail.txt).

Each line of that log is `:::MLLOG {json}` with a "key" and a "value".
LoadGen's own numbers (validity, rates, latency percentiles) are kept as it
wrote them, converted to milliseconds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TypeGuard

from dlbench.untyped import JSONObject

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


def loadgen_outcome(path: Path, scenario: str, batch_size: int) -> JSONObject:
    """LoadGen's verdict, rate and latency percentiles (ms) for one test."""
    entries = read_entries(path)
    early = (entries.get("early_stopping_result") or "").strip()
    reason = (entries.get("result_invalid_reason") or "").strip()
    if entries.get("early_stopping_met") is False:  # LoadGen leaves it out of the reason
        reason = f"{reason} Early stopping not met: {early}".strip()
    outcome: JSONObject = {
        "verdict": entries.get("result_validity"),
        "invalid_reason": reason or None,
        "perf_constraints_met": entries.get("result_perf_constraints_met"),
        "early_stopping": early or None,
        "queries": entries.get("result_query_count"),
        "samples_per_s": _rate(entries, scenario, batch_size),
        "latency_ms": _percentiles(entries, PERCENTILE_KEY, "result_{}_latency_ns"),
        "errors": entries["errors"],
        "version": entries.get("loadgen_version"),
    }
    if scenario == "server":
        outcome["scheduled_samples_per_s"] = entries.get("result_scheduled_samples_per_sec")
        outcome["over_bound"] = entries.get("result_overlatency_query_count")
    if scenario == "multi-stream":
        outcome["per_query_latency_ms"] = _percentiles(
            entries, PER_QUERY_KEY, "result_{}_query_latency_ns"
        )
    if scenario == "server" and "result_first_token_mean_latency_ns" in entries:
        first, rest = "result_first_token_{}_latency_ns", "result_time_to_output_token_{}"
        outcome["ttft_percentiles_ms"] = _percentiles(entries, TTFT_KEY, first)
        outcome["tpot_percentiles_ms"] = _percentiles(entries, TPOT_KEY, rest)
        tokens = entries.get("result_completed_tokens_per_second")
        outcome["tokens_per_s"] = float(tokens) if _positive(tokens) else None
    return outcome


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


def _positive(value: object) -> TypeGuard[float]:
    return _number(value) and value > 0
