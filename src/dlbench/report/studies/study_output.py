"""Which studies a run gets, and their output: tables to the terminal, to CSV,
and PNG bar charts; the curve charts of any run (PNG here, inline SVG in the
HTML report)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.table import Table

from dlbench.atomic import write_atomic
from dlbench.report.charts.model import CurveChart
from dlbench.report.studies.cpu_inference import study_tables as cpu_inference_tables
from dlbench.report.studies.hardware import seed_add_tables
from dlbench.report.studies.llm import llm_charts, llm_tables
from dlbench.report.studies.llm_serving import llm_serving_charts, llm_serving_tables
from dlbench.report.studies.serving import serving_charts, serving_tables
from dlbench.report.studies.study import StudyTable
from dlbench.report.studies.sweeps import sweep_charts
from dlbench.report.studies.training_studies import mnist_tables, pt2_tables
from dlbench.report.table import case_name, escape_markup, fmt
from dlbench.results.files import CSV_LINE_END, csv_cell
from dlbench.results.records import Run
from dlbench.results.run_ids import inside

# suite name -> the study report its runs get
STUDIES: dict[str, Callable[[Run, str], list[StudyTable]]] = {
    "cpu-inference": cpu_inference_tables,
    "llm": llm_tables,
    "llm-serving": llm_serving_tables,
    "mnist": mnist_tables,
    "pt2-training": pt2_tables,
    "seed-add": seed_add_tables,
    "serving": serving_tables,
}
# Studies that also draw each case's resource timeline (the article's CPU-use screenshots)
TIMELINE_STUDIES = ("mnist",)
# Every chart of one measure against another, for any run's results: a builder
# returns no chart for a run without its results.
CURVE_BUILDERS: tuple[Callable[[Run], list[CurveChart]], ...] = (
    serving_charts,
    sweep_charts,
    llm_charts,
    llm_serving_charts,
)


# the framework the relative columns divide by, where the reader names none
DEFAULT_BASELINE = "torch"


def studies_for(run: Run, baseline: str = DEFAULT_BASELINE) -> list[StudyTable]:
    """The run's study tables: its suite's, or, for a run of no study's suite that
    generated text (an ad-hoc -w llm-* run), the engines side by side and which to
    pick, as the llm suite's."""
    if run.suite in STUDIES:
        return STUDIES[run.suite](run, baseline)
    return llm_tables(run, baseline)


def curve_charts(run: Run) -> list[CurveChart]:
    """The run's curve charts, from every builder."""
    return [chart for build in CURVE_BUILDERS for chart in build(run)]


def rich_table(table: StudyTable, baseline: str) -> Table:
    out = Table(title=escape_markup(table.title), title_justify="left")
    # numbers are never cut (no_wrap: a narrow terminal wraps the case and the note,
    # at their spaces, instead); a header wraps between its words
    out.add_column("case", overflow="fold")
    out.add_column(table.metric.column, justify="right", no_wrap=True)  # "TTFT ms", not "ms"
    direction = "higher" if table.metric.higher_is_better else "lower"
    out.add_column(
        escape_markup(f"relative to {baseline} ({direction} is better)"),  # as typed
        justify="right",
        no_wrap=True,
    )
    for column in table.columns:
        out.add_column(column.column, justify="right", no_wrap=True)
    out.add_column("note", overflow="fold")
    for row in table.rows:
        relative = f"{row.relative:.2f}x" if row.relative is not None else "-"
        extra = [fmt(value) for value in row.extra]
        value = fmt(row.value) + (f" {row.metric.unit}" if row.metric else "")
        out.add_row(escape_markup(row.label), value, relative, *extra, escape_markup(row.note))
    return out


def startup_table(run: Run) -> Table:
    """Import, load/compile and first-call costs, kept apart from steady state."""
    out = Table(title="Start-up costs (not part of any latency above)", title_justify="left")
    for name in ("case", "scenario", "import s", "load+compile s", "1st call ms", "median ms"):
        text = name in ("case", "scenario")
        out.add_column(name, justify="left" if text else "right", no_wrap=not text)
    for r in run.results:
        if r.ok and r.latency_ms is not None:
            out.add_row(
                escape_markup(case_name(r)),
                escape_markup(r.case.scenario or "-"),
                fmt(r.import_s),
                fmt(r.setup_s),
                fmt(r.first_call_ms),
                fmt(r.latency_ms.median),
            )
    return out


def study_csv(tables: Sequence[StudyTable]) -> str:
    """The study tables as CSV, each text cell neutralised as the run's CSV is (csv_cell)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=CSV_LINE_END)
    writer.writerow(["table", "metric", "unit", "case", "value", "relative", "note"])
    for table in tables:
        for row in table.rows:
            metric = row.metric or table.metric
            cells = [table.title, metric.key, metric.unit, row.label]
            writer.writerow(map(csv_cell, [*cells, row.value, row.relative, row.note]))
            # a companion column is a row of its own metric: the file stays one value a row
            for column, value in zip(table.columns, row.extra, strict=True):
                companion = [table.title, column.key, column.unit, row.label, value, "", ""]
                writer.writerow(map(csv_cell, companion))
    return buffer.getvalue()


def write_study_files(run: Run, tables: Sequence[StudyTable], folder: Path) -> list[Path]:
    """A bar-chart PNG per metric (all of its tables as panels) and the tables' CSV."""
    from dlbench.report.charts.png import bar_panels, curve_chart

    written = []
    charted = [t for t in tables if not any(row.metric for row in t.rows)]  # one unit a chart
    for metric_key in dict.fromkeys(t.metric.key for t in charted):
        panels = [t.bar_chart() for t in charted if t.metric.key == metric_key]
        metric = next(t.metric for t in charted if t.metric.key == metric_key)
        title = f"{run.suite}: {metric.title} - run {run.id}"
        # a study's suite is one of STUDIES' names, yet it is read from the run
        path = inside(folder, f"{run.suite}-{metric_key}.png")
        written.append(bar_panels(panels, path, title))
    for chart in curve_charts(run):
        written.append(curve_chart(chart, folder / f"{chart.name}.png"))
    if tables:
        csv_path = inside(folder, f"{run.suite}-tables.csv")
        write_atomic(csv_path, study_csv(tables))
        written.append(csv_path)
    if run.suite in TIMELINE_STUDIES:
        from dlbench.report.timeline_plot import write_timeline_pngs

        written.extend(write_timeline_pngs([run], folder))
    return written
