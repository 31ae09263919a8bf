"""Compare two runs case by case, with a bootstrap confidence interval.

For each case present in both runs (matched by Result.compare_key) the ratio
B/A of the chosen statistic is estimated from the raw samples, with a 95%
percentile-bootstrap interval. The verdict is "slower" or "faster" only when
the interval excludes 1 and the change is at least MIN_EFFECT; otherwise
"no significant change". Metrics without samples (CPU %, memory) get a ratio
and no verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dlbench.errors import UserError
from dlbench.report.table import params_label
from dlbench.results.records import Result, Run

BOOTSTRAP_RESAMPLES = 1000
MAX_SAMPLES = 2000  # subsample larger sets: the interval barely changes, the cost does
MIN_EFFECT = 0.01  # changes under 1% are never called a regression
CONTEXT_KEYS = (
    "hostname",
    "cpu_model",
    "cpu_logical",
    "ram_gb",
    "gpus",
    "os",
    "python",
    "dlbench",
    "frameworks",
    "thread_env",
)
# metric -> (statistic over latency samples, higher is better?)
SAMPLED = {"latency": ("median", False), "p99": ("p99", False), "throughput": ("median", True)}
SINGLE = {"cpu": lambda r: r.cpu_percent, "memory": lambda r: r.peak_rss_mb}
METRICS = (*SAMPLED, *SINGLE)


@dataclass(frozen=True)
class CaseComparison:
    label: str
    value_a: float
    value_b: float
    ratio: float  # B / A of the metric as reported (throughput: higher is better)
    interval: tuple[float, float] | None
    verdict: str
    slowdown: float | None  # B's time over A's time - 1 (positive: B is slower)
    slowdown_low: float | None  # the same at the favourable end of the interval


def compare_label(result: Result) -> str:
    params = params_label(result.params)
    scenario = f" {result.scenario}" if result.scenario else ""
    return (
        f"{result.workload}{params} / {result.framework} [{result.compile}] "
        f"{result.mode}{scenario} bs={result.batch_size}"
    )


def _statistic(name: str) -> Callable[[Any], Any]:
    import numpy as np

    if name == "median":
        return lambda a: np.median(a, axis=-1)
    return lambda a: np.percentile(a, 99, axis=-1)


def bootstrap_ratio(
    a_ms: Sequence[float], b_ms: Sequence[float], statistic: str = "median", seed: int = 0
) -> tuple[float, tuple[float, float]]:
    """Point estimate and 95% interval of stat(B) / stat(A) over latency samples."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a, b = (_subsample(np.asarray(x, dtype=np.float64), rng) for x in (a_ms, b_ms))
    stat = _statistic(statistic)
    point = float(stat(b) / stat(a))
    resampled_a = stat(a[rng.integers(0, len(a), (BOOTSTRAP_RESAMPLES, len(a)))])
    resampled_b = stat(b[rng.integers(0, len(b), (BOOTSTRAP_RESAMPLES, len(b)))])
    low, high = np.percentile(resampled_b / resampled_a, [2.5, 97.5])
    return point, (float(low), float(high))


def _subsample(values: Any, rng: Any) -> Any:
    return rng.choice(values, MAX_SAMPLES, replace=False) if len(values) > MAX_SAMPLES else values


def compare_case(a: Result, b: Result, metric: str) -> CaseComparison:
    label = compare_label(a)
    if metric in SINGLE:
        value_a, value_b = SINGLE[metric](a), SINGLE[metric](b)
        if value_a is None or value_b is None or value_a == 0:
            return CaseComparison(
                label, value_a or 0.0, value_b or 0.0, float("nan"), None, "n/a", None, None
            )
        return CaseComparison(
            label, value_a, value_b, value_b / value_a, None, "n/a (one value per case)", None, None
        )
    statistic, higher_is_better = SAMPLED[metric]
    time_ratio, (low, high) = bootstrap_ratio(a.samples_ms, b.samples_ms, statistic)
    verdict = _verdict(time_ratio, low, high)
    if higher_is_better:  # throughput = batch / time: invert ratio and interval
        ratio, interval = 1 / time_ratio, (1 / high, 1 / low)
        value_a, value_b = a.throughput or 0.0, b.throughput or 0.0
    else:
        ratio, interval = time_ratio, (low, high)
        value_a = getattr(a.latency_ms, statistic)
        value_b = getattr(b.latency_ms, statistic)
    return CaseComparison(
        label, value_a, value_b, ratio, interval, verdict, time_ratio - 1, low - 1
    )


def _verdict(time_ratio: float, low: float, high: float) -> str:
    if low > 1 and time_ratio - 1 >= MIN_EFFECT:
        return "slower"
    if high < 1 and 1 - time_ratio >= MIN_EFFECT:
        return "faster"
    return "no significant change"


@dataclass(frozen=True)
class RunComparison:
    cases: list[CaseComparison]
    only_a: list[str]
    only_b: list[str]
    context: dict[str, tuple[Any, Any]]


def compare_runs(a: Run, b: Run, metric: str = "latency") -> RunComparison:
    if metric not in METRICS:
        raise UserError(f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}")
    index_a = {r.compare_key(): r for r in a.results if r.ok and r.samples_ms}
    index_b = {r.compare_key(): r for r in b.results if r.ok and r.samples_ms}
    shared = [k for k in index_a if k in index_b]
    context = context_differences(a, b)
    context.update(case_differences([(index_a[k], index_b[k]) for k in shared]))
    return RunComparison(
        cases=[compare_case(index_a[k], index_b[k], metric) for k in shared],
        only_a=[compare_label(index_a[k]) for k in index_a if k not in index_b],
        only_b=[compare_label(index_b[k]) for k in index_b if k not in index_a],
        context=context,
    )


CASE_CONTEXT = ("threads", "interop_threads", "device", "framework_version")


def case_differences(pairs: Sequence[tuple[Result, Result]]) -> dict[str, tuple[Any, Any]]:
    """Per-case settings that differ between matched cases (threads, device, versions)."""
    diff: dict[str, tuple[Any, Any]] = {}
    for a, b in pairs:
        for name in CASE_CONTEXT:
            if getattr(a, name) != getattr(b, name):
                diff.setdefault(f"{a.framework} {name}", (getattr(a, name), getattr(b, name)))
    return diff


def context_differences(a: Run, b: Run) -> dict[str, tuple[Any, Any]]:
    """Environment and settings that differ between the runs (shown, never hidden)."""
    diff = {k: (a.env.get(k), b.env.get(k)) for k in CONTEXT_KEYS if a.env.get(k) != b.env.get(k)}
    for key in sorted(set(a.settings) | set(b.settings)):
        if a.settings.get(key) != b.settings.get(key):
            diff[f"settings.{key}"] = (a.settings.get(key), b.settings.get(key))
    return diff


def regressions(comparison: RunComparison, percent: float) -> list[CaseComparison]:
    """Cases significantly slower by more than `percent` (the interval's low end is past it)."""
    return [
        c
        for c in comparison.cases
        if c.verdict == "slower" and c.slowdown_low is not None and c.slowdown_low * 100 > percent
    ]
