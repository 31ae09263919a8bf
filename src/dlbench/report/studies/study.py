"""Study reports: the seed articles' tables, rebuilt from stored results.

A report reads results only. Every table compares cases of one scenario: a
per-sample loop is never ranked against a batched call, except in the table
that reproduces an article's own (flawed) method, which says so in its title.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlbench.report.charts.model import Bar, BarChart
from dlbench.results.metrics import METRICS, Metric, read
from dlbench.results.records import Result, Run


@dataclass(frozen=True)
class Row:
    """One bar or table row: a label, a value and where its spread lies."""

    label: str
    value: float | None  # None: no value to show (the note says why)
    relative: float | None
    spread: tuple[float, float] | None = None  # (low, high) for error bars
    note: str = ""
    # the same case's values of the table's `columns`, in order (None: not measured)
    extra: tuple[float | None, ...] = ()
    # a table of picks mixes measures: the row's own (its unit is shown beside it)
    metric: Metric | None = None


@dataclass(frozen=True)
class StudyTable:
    title: str
    metric: Metric
    rows: tuple[Row, ...]
    # other metrics of each row's case, shown beside the main one
    columns: tuple[Metric, ...] = ()

    def bar_chart(self) -> BarChart:
        """The table as bars: a row's spread as its error bar, and above it its value
        relative to the baseline ("none" for a row without a value)."""
        return BarChart(self.title, self.metric.unit, tuple(_bar(row) for row in self.rows))


def _bar(row: Row) -> Bar:
    mark = "none" if row.value is None else None
    if row.relative is not None:
        mark = f"{row.relative:.2f}x"
    low, high = row.spread if row.spread else (None, None)
    return Bar(row.label, row.value or 0.0, low, high, mark)


# The axes that name a study row; its table fixes the others.
ROW_AXES = ("framework", "compile", "precision", "threads")


def case_label(result: Result) -> str:
    """A study row: framework, compile mode, precision and threads name it."""
    return result.case.label(only=ROW_AXES)


def relative_rows(
    entries: Sequence[tuple[str, float, tuple[float, float] | None, str]],
    baseline_label: str | None,
) -> tuple[Row, ...]:
    """Rows with a column relative to the baseline row (None where it is missing)."""
    base = next((value for label, value, _, _ in entries if label == baseline_label), None)
    return tuple(
        Row(label, value, value / base if base else None, spread, note)
        for label, value, spread, note in entries
    )


def ok_results(run: Run, workload: str) -> list[Result]:
    return [
        r for r in run.results if r.ok and r.case.workload == workload and r.case.mode == "infer"
    ]


def baseline_label(results: Sequence[Result], baseline: str) -> str | None:
    """The baseline framework's case in this group: fp32 and its default compile mode
    first, at the most threads."""
    from dlbench.spec.registry import framework_info

    of_framework = [r for r in results if r.case.framework == baseline]
    if not of_framework:
        return None
    default = framework_info(baseline).default_compile
    chosen = min(
        of_framework,
        key=lambda r: (r.case.precision != "fp32", r.case.compile != default, -r.case.threads),
    )
    return case_label(chosen)


def int8_cost(result: Result) -> str | None:
    """What int8 cost against fp32, as its check measured it: the SQNR that decides,
    and the agreement beside it (None: not an int8 result)."""
    agreement = read(METRICS["agreement"], result)
    if agreement is None:
        return None
    check = result.details.check
    measure = check.measure if check and check.measure is not None else "agreement"
    sqnr = read(METRICS["sqnr"], result)
    if sqnr is not None:
        loss = f"SQNR {sqnr:.1f} dB"
    elif check is not None and check.min_sqnr_db is not None:
        loss = "no noise: outputs equal fp32's"
    else:  # integer outputs, or a result written before SQNR was measured
        loss = "SQNR not measured"
    return f"{loss}, {agreement:.3f} {measure}"
