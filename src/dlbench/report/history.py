"""A metric over stored runs, and where it changed: `dlbench history`.

A series is one case (Case.key) across runs: one point per run in time order,
or one per label (`run --label`) in label order, where the runs sharing a
label are one point, their median. A result's value is the one compare reads
(the median of its processes' values), so history and the regression gate
agree on what a case measured.

Change points come from Apache Otava (`otava.analysis.compute_change_points`):
E-divisive means (Matteson and James, 2014) split over sliding windows, then
Hunter's merge step (Fleming et al., 2023) keeps a change only where Student's
t-test between the segments on either side gives p below the max p-value and
the change is larger than the minimum. Otava is installed apart, with --no-deps (INSTALL).
"""

from __future__ import annotations

import importlib.metadata
import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from dlbench.errors import UserError
from dlbench.report.compare import MIN_EFFECT, process_values
from dlbench.results.metrics import Metric
from dlbench.results.records import Result, Run

if TYPE_CHECKING:  # Otava is imported where change points are found (_otava)
    from otava.analysis import TTestStats
    from otava.change_point_divisive.base import ChangePoint

    # Otava's change points, and the weak ones it returns beside them (for a later call)
    ComputeChangePoints = Callable[
        ..., tuple[list[ChangePoint[TTestStats]], list[ChangePoint[TTestStats]] | None]
    ]

ORDERS = ("time", "label")
# Otava's own defaults (otava.series.AnalysisOptions: window_len, max_pvalue).
DEFAULT_WINDOW = 50
DEFAULT_MAX_PVALUE = 0.001
# Otava's min_magnitude is 0 by default; dlbench never calls a change under compare's
# MIN_EFFECT (1%), the same bar as a verdict between two runs.
DEFAULT_MIN_CHANGE = MIN_EFFECT
# --no-deps: Otava 0.8 pins numpy to 2.2.0, which would replace the frameworks' numpy;
# otava.analysis needs only the numpy and scipy already installed
INSTALL = "pip install --no-deps 'apache-otava>=0.8,<0.9'"


@dataclass(frozen=True)
class ChangeMethod:
    """Otava's parameters: how many points one E-divisive pass sees, the p-value a
    change must be below, and the relative change it must be above (a fraction)."""

    window: int = DEFAULT_WINDOW
    max_pvalue: float = DEFAULT_MAX_PVALUE
    min_change: float = DEFAULT_MIN_CHANGE

    def describe(self) -> str:
        """The method and its parameters, as the output and the HTML page state them."""
        return (
            f"change points: E-divisive means, Apache Otava {_otava_version()} "
            f"(window {self.window}, max p-value {self.max_pvalue:g}, "
            f"min change {100 * self.min_change:g}%; p: Student's t-test of the "
            "segments either side)"
        )


@dataclass(frozen=True)
class Point:
    """One value of a series: a run's, or the median of the runs sharing a label."""

    value: float
    run_ids: tuple[str, ...]  # in time order
    started_at: str  # the first run's
    label: str | None

    def runs_text(self) -> str:
        """The runs it is made of, for a line or a cell: the first, and how many more."""
        more = len(self.run_ids) - 1
        return self.run_ids[0] + (f" and {more} more" if more else "")


@dataclass(frozen=True)
class Change:
    """A change of level: the points from `index` on differ from those before."""

    index: int  # the first point of the new level
    mean_before: float  # the segment's mean since the previous change
    mean_after: float  # up to the next change
    p_value: float

    @property
    def relative(self) -> float:
        """after / before - 1 (nan where the level before is 0)."""
        return self.mean_after / self.mean_before - 1 if self.mean_before else math.nan


@dataclass(frozen=True)
class Series:
    key: str  # Case.key
    name: str  # Case.label
    points: tuple[Point, ...]
    changes: tuple[Change, ...]
    machines: tuple[str, ...]  # hostnames of its runs: a change may be a change of machine


@dataclass(frozen=True)
class History:
    target: str
    metric: Metric
    order: str
    method: ChangeMethod
    series: tuple[Series, ...]
    skipped: int  # results of these cases that failed or have no value of the metric
    unlabelled: tuple[str, ...]  # runs left out of label order (no --label)


# (run, result, its value) of one case
Measured = tuple[Run, Result, float]


def value_of(result: Result, metric: Metric) -> float | None:
    """The result's value as compare reads it: the median of its processes' values (one
    process: its own); None for a failed result or one without the metric."""
    values = process_values(result, metric) if result.ok else []
    return statistics.median(values) if values else None


def collect(
    runs: Iterable[Run], wanted: Callable[[Result], bool], metric: Metric
) -> tuple[dict[str, list[Measured]], int]:
    """The wanted results with a value, by case key, and how many had none."""
    found: dict[str, list[Measured]] = {}
    skipped = 0
    for run in runs:
        for result in run.results:
            if not wanted(result):
                continue
            value = value_of(result, metric)
            if value is None:
                skipped += 1
            else:
                found.setdefault(result.case.key(), []).append((run, result, value))
    return found, skipped


def case_matcher(target: str) -> Callable[[Result], bool]:
    """A case named by its key (Case.key) or by its label (Case.label: what tables show)."""
    return lambda result: target in (result.case.key(), result.case.label())


def build_history(
    runs: Sequence[Run],
    target: str,
    wanted: Callable[[Result], bool],
    metric: Metric,
    order: str = "time",
    method: ChangeMethod | None = None,
) -> History:
    """Each wanted case's series over `runs`, with its change points."""
    method = method or ChangeMethod()
    found, skipped = collect(runs, wanted, metric)
    if not found:
        raise UserError(
            f"no result of {target} has a value of {metric.key} ({skipped} failed or have "
            "none); choose another --metric"
        )
    unlabelled = _unlabelled(found) if order == "label" else ()
    series = [
        _series(key, measured, order, method)
        for key, measured in found.items()
        if order == "time" or any(_label(run) is not None for run, _, _ in measured)
    ]
    if not series:
        raise UserError(
            f"no run of {target} has a label; give runs one (dlbench run --label TEXT) "
            "or use --order time"
        )
    series.sort(key=lambda s: s.name)
    return History(target, metric, order, method, tuple(series), skipped, unlabelled)


def _series(key: str, measured: list[Measured], order: str, method: ChangeMethod) -> Series:
    points = _by_label(measured) if order == "label" else _by_time(measured)
    changes = find_changes([p.value for p in points], method)
    machines = sorted({run.env.shown("hostname") for run, _, _ in measured})
    return Series(key, measured[0][1].case.label(), tuple(points), changes, tuple(machines))


def _unlabelled(found: dict[str, list[Measured]]) -> tuple[str, ...]:
    """The runs label order leaves out, in time order."""
    runs = {run.id: run for measured in found.values() for run, _, _ in measured}
    return tuple(r.id for r in sorted(runs.values(), key=_when) if _label(r) is None)


def _label(run: Run) -> str | None:
    label = run.settings.label
    return label if isinstance(label, str) and label else None


def _when(run: Run) -> tuple[float, str, str]:
    """A run's start as a sort key: its time in UTC where it parses (a file from
    elsewhere may carry another offset), then its text and id."""
    try:
        moment = datetime.fromisoformat(run.started_at)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        stamp = moment.timestamp()
    except ValueError:
        stamp = math.inf
    return stamp, run.started_at, run.id


def _by_time(measured: list[Measured]) -> list[Point]:
    ordered = sorted(measured, key=lambda m: _when(m[0]))
    return [Point(value, (run.id,), run.started_at, _label(run)) for run, _, value in ordered]


def _by_label(measured: list[Measured]) -> list[Point]:
    """One point per label, the median of its runs; runs without a label left out."""
    groups: dict[str, list[Measured]] = {}
    for each in sorted(measured, key=lambda m: _when(m[0])):
        label = _label(each[0])
        if label is not None:
            groups.setdefault(label, []).append(each)
    return [
        Point(
            statistics.median(value for _, _, value in group),
            tuple(run.id for run, _, _ in group),
            group[0][0].started_at,
            label,
        )
        for label, group in sorted(groups.items(), key=lambda item: label_order(item[0]))
    ]


def label_order(label: str) -> tuple[tuple[int, int, str], ...]:
    """Labels in natural order: runs of digits compare as numbers (v1.9 before v1.10,
    build 9 before build 10), the rest as text."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.split(r"(\d+)", label)
        if part
    )


def find_changes(values: Sequence[float], method: ChangeMethod) -> tuple[Change, ...]:
    """Otava's change points of `values`, in order."""
    compute = _otava()
    found, _weak = compute(
        [float(v) for v in values],
        window_len=method.window,
        max_pvalue=method.max_pvalue,
        min_magnitude=method.min_change,
    )
    return tuple(
        Change(
            index=int(point.index),
            mean_before=float(point.stats.mean_1),
            mean_after=float(point.stats.mean_2),
            p_value=float(point.stats.pvalue),
        )
        for point in sorted(found, key=lambda p: p.index)
    )


def _otava() -> ComputeChangePoints:
    """Otava's change-point function; a missing install is a user error naming the extra."""
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        raise UserError(
            f"dlbench history finds change points with Apache Otava: {INSTALL}"
        ) from None
    return compute_change_points


def _otava_version() -> str:
    try:
        return importlib.metadata.version("apache-otava")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"
