"""`dlbench history --html`: one self-contained page, a chart per series with its
change points ringed, and a table of the changes.

Drawn with the HTML report's curve chart (charts.svg) and page conventions
(report.html): inline CSS and SVG, no request, every string from a run escaped.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from dlbench.atomic import write_atomic
from dlbench.report.charts.model import Curve, CurveChart, Point, slug
from dlbench.report.charts.svg import curve_chart
from dlbench.report.history import Change, History, Series
from dlbench.report.html import COUNT_SCRIPT, STYLE
from dlbench.report.table import fmt


def x_title(history: History) -> str:
    """What a point's position counts, in either order."""
    return "run, in time order" if history.order == "time" else "label, in label order"


def chart(history: History, series: Series) -> str:
    """The series as a curve: point n is the n-th run (or label); each change's first
    point ringed, with its size beside it."""
    starts = {change.index: change for change in series.changes}
    points = tuple(
        Point(
            x=index + 1,
            y=point.value,
            label=f"{100 * starts[index].relative:+.1f}%" if index in starts else "",
            marked=index in starts,
        )
        for index, point in enumerate(series.points)
    )
    metric = history.metric
    return curve_chart(
        CurveChart(
            name=slug(series.name),
            title=f"{metric.title} - {series.name}",
            x_title=x_title(history),
            y_title=metric.unit,
            curves=(Curve(series.name, points),),
        )
    )


def changes_table(history: History, series: Series) -> str:
    if not series.changes:
        return "<p>no change point</p>"
    head = ("begins at run", "label", "started", "before", "after", "change", "p-value")
    rows = [
        "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in change_cells(series, c)) + "</tr>"
        for c in series.changes
    ]
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    unit = escape(history.metric.unit)
    return f"<table><tr>{header}</tr>{''.join(rows)}</table><p>before and after in {unit}</p>"


def change_cells(series: Series, change: Change) -> tuple[str, ...]:
    """A change as table cells: where it began, the levels either side, its size, its p."""
    point = series.points[change.index]
    return (
        point.runs_text(),
        point.label or "-",
        point.started_at,
        fmt(change.mean_before),
        fmt(change.mean_after),
        f"{100 * change.relative:+.1f}%",
        f"{change.p_value:.2g}",
    )


def section(history: History, series: Series) -> str:
    machines = ", ".join(series.machines)
    count = "runs" if history.order == "time" else "labels"
    return (
        f"<section><h2>{escape(series.name)}</h2>"
        f"<p>{len(series.points)} {count}; machines: {escape(machines)}</p>"
        f"{chart(history, series)}{changes_table(history, series)}</section>"
    )


def render(history: History) -> str:
    title = f"dlbench history - {history.target} - {history.metric.title}"
    notes = [history.method.describe()]
    if history.skipped:
        notes.append(f"skipped {history.skipped} result(s): failed or without {history.metric.key}")
    if history.unlabelled:
        notes.append(f"left out {len(history.unlabelled)} run(s) without a label")
    body = "".join(f"<p>{escape(note)}</p>" for note in notes)
    body += "\n".join(section(history, series) for series in history.series)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}"
        f"{COUNT_SCRIPT}</body></html>\n"
    )


def write_history_html(history: History, path: Path) -> None:
    write_atomic(path, render(history))
