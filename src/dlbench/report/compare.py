"""Compare two runs case by case, with a bootstrap confidence interval.

For each case present in both runs (matched by Case.key) the ratio
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

from dlbench.results.metrics import Metric, metric, read
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


def _statistic(name: str) -> Callable[[Any], Any]:
    import numpy as np

    if name == "median":
        return lambda a: np.median(a, axis=-1)
    return lambda a: np.percentile(a, 99, axis=-1)


def bootstrap_ratio(
    a_samples: Sequence[float],
    b_samples: Sequence[float],
    statistic: str = "median",
    seed: int = 0,
) -> tuple[float, tuple[float, float]]:
    """Point estimate and 95% interval of stat(B) / stat(A) over per-iteration samples."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a, b = (_subsample(np.asarray(x, dtype=np.float64), rng) for x in (a_samples, b_samples))
    stat = _statistic(statistic)
    point = float(stat(b) / stat(a))
    resampled_a = stat(a[rng.integers(0, len(a), (BOOTSTRAP_RESAMPLES, len(a)))])
    resampled_b = stat(b[rng.integers(0, len(b), (BOOTSTRAP_RESAMPLES, len(b)))])
    low, high = np.percentile(resampled_b / resampled_a, [2.5, 97.5])
    return point, (float(low), float(high))


def _subsample(values: Any, rng: Any) -> Any:
    return rng.choice(values, MAX_SAMPLES, replace=False) if len(values) > MAX_SAMPLES else values


def compare_case(a: Result, b: Result, metric: Metric) -> CaseComparison:
    label = a.case.label()
    value_a, value_b = read(metric, a), read(metric, b)
    if metric.samples is None:
        if value_a is None or value_b is None or value_a == 0:
            # a missing value (energy on a machine without counters) is shown as
            # missing, never as 0
            missing = float("nan")
            return CaseComparison(
                label,
                missing if value_a is None else value_a,
                missing if value_b is None else value_b,
                missing,
                None,
                "n/a (no value on one side)" if None in (value_a, value_b) else "n/a",
                None,
                None,
            )
        return CaseComparison(
            label, value_a, value_b, value_b / value_a, None, "n/a (one value per case)", None, None
        )
    ratio, (low, high) = bootstrap_ratio(metric.samples(a), metric.samples(b), metric.statistic)
    # as times (B over A, above 1 is slower), whichever way the metric points
    time_ratio, time_low, time_high = (
        (1 / ratio, 1 / high, 1 / low) if metric.higher_is_better else (ratio, low, high)
    )
    verdict = _verdict(time_ratio, time_low, time_high)
    return CaseComparison(
        label,
        value_a or 0.0,
        value_b or 0.0,
        ratio,
        (low, high),
        verdict,
        time_ratio - 1,
        time_low - 1,
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


def compare_runs(a: Run, b: Run, metric_key: str = "latency") -> RunComparison:
    chosen = metric(metric_key)
    index_a = {r.case.key(): r for r in a.results if r.ok and r.samples_ms}
    index_b = {r.case.key(): r for r in b.results if r.ok and r.samples_ms}
    shared = [k for k in index_a if k in index_b]
    context = context_differences(a, b)
    context.update(case_differences([(index_a[k], index_b[k]) for k in shared]))
    return RunComparison(
        cases=[compare_case(index_a[k], index_b[k], chosen) for k in shared],
        only_a=[index_a[k].case.label() for k in index_a if k not in index_b],
        only_b=[index_b[k].case.label() for k in index_b if k not in index_a],
        context=context,
    )


# Matched cases may still differ in these (a GPU's index, the framework's version).
CASE_CONTEXT = ("device", "framework_version")


def case_differences(pairs: Sequence[tuple[Result, Result]]) -> dict[str, tuple[Any, Any]]:
    """Per-case settings that differ between matched cases (the device index, versions)."""
    diff: dict[str, tuple[Any, Any]] = {}
    for a, b in pairs:
        for name in CASE_CONTEXT:
            in_a, in_b = _context_value(a, name), _context_value(b, name)
            if in_a != in_b:
                diff.setdefault(f"{a.case.framework} {name}", (in_a, in_b))
    return diff


def _context_value(result: Result, name: str) -> Any:
    return getattr(result.case, name) if hasattr(result.case, name) else getattr(result, name)


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
