"""Compare two runs case by case, on process-level values.

The unit of replication is the worker process: iterations inside one
process share its allocation, caches and minute of the machine's life, so
resampling them (as dlbench once did) calls a +15-49% "regression" on
identical re-runs. For each case present in both runs (matched by
Case.key) each side contributes one value per process (`--repeat N`
processes; results.repeats keeps them), and scipy.stats decides:

- B/A is the ratio of the medians of the process values, with a 95%
  percentile-bootstrap interval over the processes.
- With at least two processes per side the verdict is "slower" or
  "faster" when a two-sided Mann-Whitney U test gives p < ALPHA and the
  change is at least MIN_EFFECT; else "no significant change". When the
  process counts are too few for the test ever to reach ALPHA (2 and 2, 3
  and 3), the verdict says so: inconclusive, asking for more processes.
- With one process on a side there is no evidence of significance: the
  verdict is "inconclusive (1 process per side: rerun with --repeat)",
  unless B/A in time is beyond FAR_FACTOR either way. Identical one-process
  re-runs on a shared 2-CPU machine differed by up to +49%, so only a change
  past 2x is called from single processes, and it never fails the gate.

Metrics that a process summary does not keep (memory) get a ratio and no
verdict.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dlbench.results.metrics import Metric, metric, read
from dlbench.results.records import Result, Run
from dlbench.results.repeats import processes

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
MIN_EFFECT = 0.01  # changes under 1% are never called a regression
FAR_FACTOR = 2.0  # single-process verdicts only beyond this (see the module doc)
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
INCONCLUSIVE_SINGLE = "inconclusive (1 process per side: rerun with --repeat)"


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
    processes_a: int = 1
    processes_b: int = 1
    p_value: float | None = None

    @property
    def replicated(self) -> bool:
        """Evidence from several processes on both sides (what the gate needs)."""
        return self.processes_a >= 2 and self.processes_b >= 2


def process_values(result: Result, chosen: Metric) -> list[float]:
    """One value of the metric per process that made the result's headline."""
    if chosen.process_key is not None:
        listed = [p for p in processes(result) if p.used]
        values = [p.values.get(chosen.process_key) for p in listed]
        if listed and all(isinstance(v, int | float) for v in values):
            return [float(v) for v in values]  # type: ignore[arg-type]
    value = read(chosen, result)
    return [] if value is None else [value]


def compare_case(a: Result, b: Result, chosen: Metric) -> CaseComparison:
    label = a.case.label()
    values_a, values_b = process_values(a, chosen), process_values(b, chosen)
    if not values_a or not values_b:
        missing = float("nan")
        value_a = statistics.median(values_a) if values_a else missing
        value_b = statistics.median(values_b) if values_b else missing
        return CaseComparison(
            label, value_a, value_b, missing, None, "n/a (no value on one side)", None, None
        )
    value_a, value_b = statistics.median(values_a), statistics.median(values_b)
    counts = {"processes_a": len(values_a), "processes_b": len(values_b)}
    if value_a == 0:
        return CaseComparison(label, value_a, value_b, math.nan, None, "n/a", None, None, **counts)
    ratio = value_b / value_a
    if chosen.process_key is None:
        verdict = "n/a (one value per case)"
        return CaseComparison(label, value_a, value_b, ratio, None, verdict, None, None, **counts)

    def in_time(r: float) -> float:  # B's time over A's, whichever way the metric points
        return 1 / r if chosen.higher_is_better else r

    time_ratio = in_time(ratio)
    if len(values_a) < 2 or len(values_b) < 2:
        verdict = _single_process_verdict(time_ratio)
        return CaseComparison(
            label, value_a, value_b, ratio, None, verdict, time_ratio - 1, time_ratio - 1, **counts
        )
    low, high = _bootstrap_interval(values_a, values_b)
    p_value = _mann_whitney(values_a, values_b)
    time_low = min(in_time(low), in_time(high))
    verdict = _verdict(time_ratio, p_value, len(values_a), len(values_b))
    return CaseComparison(
        label, value_a, value_b, ratio, (low, high), verdict, time_ratio - 1, time_low - 1,
        p_value=p_value, **counts,
    )  # fmt: skip


def _single_process_verdict(time_ratio: float) -> str:
    if time_ratio >= FAR_FACTOR:
        return f"slower (beyond {FAR_FACTOR:g}x with 1 process per side)"
    if time_ratio <= 1 / FAR_FACTOR:
        return f"faster (beyond {FAR_FACTOR:g}x with 1 process per side)"
    return INCONCLUSIVE_SINGLE


def _verdict(time_ratio: float, p_value: float, n_a: int, n_b: int) -> str:
    if _smallest_p(n_a, n_b) >= ALPHA:
        return (
            f"inconclusive ({n_a} and {n_b} processes cannot show a change at "
            f"{ALPHA:g}: --repeat 4 or more)"
        )
    if p_value < ALPHA and time_ratio - 1 >= MIN_EFFECT:
        return "slower"
    if p_value < ALPHA and 1 - time_ratio >= MIN_EFFECT:
        return "faster"
    return "no significant change"


def _smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided Mann-Whitney p-value these sample sizes allow."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def _mann_whitney(a: Sequence[float], b: Sequence[float]) -> float:
    from scipy.stats import mannwhitneyu

    if len(set(a) | set(b)) == 1:
        return 1.0  # all equal: no evidence of any difference
    return float(mannwhitneyu(b, a, alternative="two-sided").pvalue)


def _bootstrap_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """95% percentile-bootstrap interval of median(B) / median(A) over the processes."""
    import numpy as np
    from scipy.stats import bootstrap

    def ratio(x: Any, y: Any, axis: int = -1) -> Any:
        return np.median(y, axis=axis) / np.median(x, axis=axis)

    found = bootstrap(
        (np.asarray(a, dtype=float), np.asarray(b, dtype=float)),
        ratio,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(0),
    ).confidence_interval
    return float(found.low), float(found.high)


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
    """Cases slower by more than `percent` on replicated evidence: several processes
    per side, a significant Mann-Whitney test, and the estimated slowdown past
    `percent`. The test already bounds false alarms at ALPHA; asking the bootstrap
    interval's end to clear `percent` as well let one odd process in five hide a
    real 20% slowdown (bench/aa_calibration.py)."""
    return [
        c
        for c in comparison.cases
        if c.replicated
        and c.verdict == "slower"
        and c.slowdown is not None
        and c.slowdown * 100 > percent
    ]
