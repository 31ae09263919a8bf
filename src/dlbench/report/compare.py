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

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

from dlbench.results.env import FRAMEWORKS_FACT, UNKNOWN
from dlbench.results.env import context as env_context
from dlbench.results.flags import ABOVE_CEILING, disturbed
from dlbench.results.limits import limit_text
from dlbench.results.metrics import Metric, metric, read
from dlbench.results.records import Result, Run
from dlbench.results.repeats import processes
from dlbench.spec.case import Case
from dlbench.untyped import JSONValue

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
MIN_EFFECT = 0.01  # changes under 1% are never called a regression
FAR_FACTOR = 2.0  # single-process verdicts only beyond this (see the module doc)
# fact -> (its value in A, in B), for each fact that differs
Context = dict[str, tuple[JSONValue, JSONValue]]
INCONCLUSIVE_SINGLE = "inconclusive (1 process per side: rerun with --repeat)"


class _Processes(TypedDict):
    """How many processes gave each side's values (CaseComparison's fields)."""

    processes_a: int
    processes_b: int


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
    # the sides whose result was disturbed while measured ("A: interference"), so that
    # no verdict or gate decision reads as clean where it is not
    flagged: str = ""
    # what limits each side of a generation or serving case (results.limits), and a
    # side whose figures are above its ceiling: "A: memory-bound (...); B: client-bound"
    limits: str = ""

    @property
    def replicated(self) -> bool:
        """Evidence from several processes on both sides (what the gate needs)."""
        return self.processes_a >= 2 and self.processes_b >= 2

    @property
    def gateable(self) -> bool:
        """Tested, with enough processes that the test could reach ALPHA: a case the
        gate could fail on. One process a side, 2 and 2, 3 and 3 never can."""
        return (
            self.replicated
            and self.p_value is not None
            and _smallest_p(self.processes_a, self.processes_b) < ALPHA
        )


def process_values(result: Result, chosen: Metric) -> list[float]:
    """One value of the metric per process that made the result's headline."""
    if chosen.process_key is not None:
        listed = [p for p in processes(result) if p.used]
        values = [p.values.get(chosen.process_key) for p in listed]
        numbers = [float(v) for v in values if isinstance(v, int | float)]
        if listed and len(numbers) == len(values):
            return numbers
    value = read(chosen, result)
    return [] if value is None else [value]


def compare_case(a: Result, b: Result, chosen: Metric) -> CaseComparison:
    """The case's comparison, with the side(s) flagged as disturbed named on it, and
    what limits each side."""
    return replace(_compared(a, b, chosen), flagged=disturbed_sides(a, b),
                   limits=limit_sides(a, b))  # fmt: skip


def limit_sides(a: Result, b: Result) -> str:
    """ "A: memory-bound: decode MBU 62% ...; B: client-bound: ...": each side's verdict,
    and `impossible` for a side above its ceiling (never a clean comparison)."""
    sides = []
    for side, result in (("A", a), ("B", b)):
        words = limit_text(result.details.limit)
        if ABOVE_CEILING in result.flags:
            words = f"impossible, above its ceiling{'; ' + words if words else ''}"
        if words:
            sides.append(f"{side}: {words}")
    return "; ".join(sides)


def disturbed_sides(a: Result, b: Result) -> str:
    """ "A: interference; B: noisy": each side whose result was disturbed as measured."""
    sides = []
    for side, result in (("A", a), ("B", b)):
        marks = [mark for mark in result.flags if disturbed(mark)]
        if marks:
            sides.append(f"{side}: {', '.join(marks)}")
    return "; ".join(sides)


def _compared(a: Result, b: Result, chosen: Metric) -> CaseComparison:
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
    counts = _Processes(processes_a=len(values_a), processes_b=len(values_b))
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

    def ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
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
    # labels of the measured cases with no measured case of the same key on the other
    # side; one the other run has but did not measure says "(not measured in B)"
    only_a: list[str]
    only_b: list[str]
    context: Context
    # why unmatched cases did not match: each key axis whose values differ between the
    # cases either run lacks altogether, as (A's values, B's values)
    apart: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)


def compare_runs(a: Run, b: Run, metric_key: str = "latency") -> RunComparison:
    chosen = metric(metric_key)
    index_a, index_b = _measured(a), _measured(b)
    shared = [k for k in index_a if k in index_b]
    context = context_differences(a, b, [(index_a[k], index_b[k]) for k in shared])
    keys_a, keys_b = {r.case.key() for r in a.results}, {r.case.key() for r in b.results}
    absent_a = [r.case for k, r in index_a.items() if k not in keys_b]
    absent_b = [r.case for k, r in index_b.items() if k not in keys_a]
    return RunComparison(
        cases=[compare_case(index_a[k], index_b[k], chosen) for k in shared],
        only_a=[_unmatched(r, keys_b, "B") for k, r in index_a.items() if k not in index_b],
        only_b=[_unmatched(r, keys_a, "A") for k, r in index_b.items() if k not in index_a],
        context=context,
        apart=axes_apart(absent_a, absent_b) if absent_a and absent_b else {},
    )


def _measured(run: Run) -> dict[str, Result]:
    """The run's results that have numbers to compare, by case key (Case.key)."""
    return {r.case.key(): r for r in run.results if r.ok and r.samples_ms}


def _unmatched(result: Result, other_keys: set[str], other: str) -> str:
    label = result.case.label()
    return f"{label} (not measured in {other})" if result.case.key() in other_keys else label


def axes_apart(
    cases_a: Sequence[Case], cases_b: Sequence[Case]
) -> dict[str, tuple[list[str], list[str]]]:
    """The key axes on which two sets of cases take different values: what kept them
    from matching (a baseline at --threads 2 against a run at --threads 1: threads)."""
    values_a, values_b = _axis_values(cases_a), _axis_values(cases_b)
    return {
        axis: (sorted(values_a.get(axis, set())), sorted(values_b.get(axis, set())))
        for axis in sorted(values_a.keys() | values_b.keys())
        if values_a.get(axis) != values_b.get(axis)
    }


def _axis_values(cases: Sequence[Case]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for case in cases:
        for axis, value in json.loads(case.key()).items():
            found.setdefault(axis, set()).add(
                value if isinstance(value, str) else json.dumps(value)
            )
    return found


def context_differences(a: Run, b: Run, pairs: Sequence[tuple[Result, Result]] = ()) -> Context:
    """Every fact that can change a number and differs between the runs, shown, never
    hidden: the machine's (results.env.context: CPUs available, quota, governor, GPUs,
    Python, ...), the settings, and per framework of the matched `pairs` its version
    and device."""
    facts_a, facts_b = env_context(a.env), env_context(b.env)
    diff = {k: (facts_a[k], facts_b[k]) for k in facts_a if facts_a[k] != facts_b[k]}
    settings_a, settings_b = a.settings.to_dict(), b.settings.to_dict()
    for key in sorted(settings_a):  # by name, as compare has always listed them
        if settings_a[key] != settings_b[key]:
            diff[f"settings.{key}"] = (settings_a[key], settings_b[key])
    for in_a, in_b in pairs:
        framework = in_a.case.framework
        per_case = {
            f"{framework} version": (_version(a, in_a), _version(b, in_b)),
            f"{framework} device": (in_a.case.device, in_b.case.device),  # a GPU's index
        }
        for name, (value_a, value_b) in per_case.items():
            if value_a != value_b:
                diff.setdefault(name, (value_a, value_b))
    return diff


def _version(run: Run, result: Result) -> JSONValue:
    """The framework's version as its worker found it, else as the run's fingerprint has it
    installed: only the frameworks the compared cases use are context."""
    if result.framework_version is not None:
        return result.framework_version
    installed = run.env.value_of(FRAMEWORKS_FACT)
    found = installed.get(result.case.framework) if isinstance(installed, dict) else None
    return UNKNOWN if found is None else found


def shown(value: JSONValue) -> str:
    """A context fact's value in a line: text as it is, None as none, the rest as JSON."""
    if isinstance(value, str):
        return value
    return "none" if value is None else json.dumps(value, sort_keys=True, default=str)


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


# How compare pairs cases, for messages: Case.key holds every axis that changes what
# is measured, and each of them that is not at its usual value is in the label.
MATCH_RULE = "a case matches the case whose key is equal: every axis its label shows"
# A one-line message names this many labels of a list, then counts the rest.
NAMED_IN_A_LINE = 3


def listed(labels: Sequence[str], limit: int = NAMED_IN_A_LINE) -> str:
    """The first `limit` labels, and how many more: a message stays one line."""
    named = ", ".join(labels[:limit])
    return named if len(labels) <= limit else f"{named} and {len(labels) - limit} more"


def unmatched_text(comparison: RunComparison) -> str:
    """The unmatched cases of each side, and the axes that kept them apart."""
    parts = []
    if comparison.only_a:
        parts.append(f"only in A: {listed(comparison.only_a)}")
    if comparison.only_b:
        parts.append(f"only in B: {listed(comparison.only_b)}")
    if comparison.apart:
        axes = [
            f"{axis} {'/'.join(a) or '-'} vs {'/'.join(b) or '-'}"
            for axis, (a, b) in comparison.apart.items()
        ]
        parts.append(f"they differ in {listed(axes)}")
    return "; ".join(parts)


def nothing_to_gate(comparison: RunComparison) -> str | None:
    """Why a regression gate over this comparison would judge nothing (no case of A
    matches one of B: a baseline at --threads 2 against a run at --threads 1), or None.
    Passing such a gate would say nothing; it is the user's set-up to fix."""
    if comparison.cases:
        return None
    if not comparison.only_a and not comparison.only_b:
        return "--fail-on-regression: neither run has a measured case to compare"
    return (
        f"--fail-on-regression: no case of A matches one of B, so nothing was gated "
        f"({MATCH_RULE}); {unmatched_text(comparison)}"
    )


def flagged_text(case: CaseComparison) -> str:
    """What a verdict or a gate decision must say beside it where a side was disturbed."""
    return f"disturbed while measured ({case.flagged}): measure again to confirm"


def gate_warnings(comparison: RunComparison) -> list[str]:
    """What a gate that judged some cases leaves out: the unmatched cases, and the
    matched ones it cannot fail on (too few processes). Said, not failed: a suite
    that grew or lost a case still gates the rest."""
    found = []
    if comparison.only_a or comparison.only_b:
        found.append(
            f"warning: --fail-on-regression judged the {len(comparison.cases)} matched "
            f"case(s) only; not gated: {unmatched_text(comparison)}"
        )
    untested = [c for c in comparison.cases if not c.gateable]
    reasons = {
        "too few processes to test (--repeat 4 or more on both runs)": [
            c.label for c in untested if not c.verdict.startswith("n/a")
        ],
        "no value per process to test": [c.label for c in untested if c.verdict.startswith("n/a")],
    }
    for reason, labels in reasons.items():
        if labels:
            found.append(
                f"warning: --fail-on-regression cannot fail on {len(labels)} of "
                f"{len(comparison.cases)} matched case(s), {reason}: {listed(labels)}"
            )
    flagged = [c for c in comparison.cases if c.flagged]
    if flagged:
        named = listed([f"{c.label} ({c.flagged})" for c in flagged])
        found.append(
            f"warning: --fail-on-regression judged {len(flagged)} case(s) whose results "
            f"were disturbed while measured: {named}"
        )
    return found
