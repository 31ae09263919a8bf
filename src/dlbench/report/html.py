"""One self-contained HTML page for one or more runs.

Built from stored results only. Everything is inline (CSS, SVG charts): the
page makes no network request. Every string that comes from a result goes
through html.escape, so a hostile workload label or host name is shown as
text. Charts compare like with like: one bar chart per workload, mode and
scenario.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from dlbench.atomic import write_atomic
from dlbench.measure.stats import NOISE_THRESHOLD
from dlbench.report.charts.model import BarChart
from dlbench.report.charts.svg import bar_chart, box_plot, curve_chart, line_chart
from dlbench.report.run_charts import (
    CHART_AXES,
    CPU_AXIS,
    groups,
    latency_bars,
    timeline_worth_drawing,
    worker_share_of_all_cores,
)
from dlbench.report.server_side import server_html
from dlbench.report.studies.study import StudyTable
from dlbench.report.studies.study_output import DEFAULT_BASELINE, curve_charts, studies_for
from dlbench.report.table import (
    case_name,
    flags,
    fmt,
    no_energy,
    number_cell,
    number_header,
    readable,
)
from dlbench.results.flags import meaning
from dlbench.results.limits import MEANINGS as LIMIT_MEANINGS
from dlbench.results.limits import VERDICTS, limit_text
from dlbench.results.metrics import METRICS
from dlbench.results.records import Run

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
td.num { text-align: right; }
.flag { color: #b35900; font-weight: bold; }
.failed { color: #b00020; }
svg.chart { display: block; margin: 1em 0; max-width: 100%; height: auto; }
div.wide { max-width: 100%; overflow-x: auto; }
dl.legend { font-size: 13px; } dl.legend dt { font-weight: bold; color: #b35900; }
dl.legend dd { margin: 0 0 0.4em 1.5em; }
@media (max-width: 600px) { body { margin: 0.5em; } table { font-size: 11px; } }
"""
# Counts the charts once the page has loaded; the browser test reads it.
COUNT_SCRIPT = (
    "<script>document.body.dataset.charts = "
    "String(document.querySelectorAll('svg.chart').length);</script>"
)


def _td(value: object, numeric: bool = False) -> str:
    css = ' class="num"' if numeric else ""
    return f"<td{css}>{escape(str(value))}</td>"


def env_table(run: Run) -> str:
    """The machine and the settings, each value as people read it (report.table.readable),
    one line per entry of a mapping."""

    def row(key: object, value: object) -> str:
        lines = "<br>".join(escape(line) for line in readable(value).splitlines())
        return f"<tr><th>{escape(str(key))}</th><td>{lines}</td></tr>"

    rows = "".join(row(k, v) for k, v in run.env.to_dict().items())
    settings = "".join(row(k, v) for k, v in run.settings.to_dict().items())
    return (
        f'<h3>Environment</h3><div class="wide"><table>{rows}</table></div>'
        f'<h3>Settings</h3><div class="wide"><table>{settings}</table></div>'
    )


# The numbers of an HTML results row: metric keys (results.metrics) or table.DERIVED.
HTML_LAYOUT = (
    "latency",
    "p99",
    "iqr",
    "throughput",
    "rate",
    "energy",
    "power",
    "cpu",
    "memory",
    "max_abs_diff",
)


def results_table(run: Run) -> str:
    head = (
        "case",
        "scenario",
        "device",
        "batch",
        *map(number_header, HTML_LAYOUT),
        "flags",
        "what limits it",
        "status",
    )
    rows = []
    for r in run.results:
        status = "ok" if r.ok else f"{r.status}: {r.error or ''}"
        cells = [
            _td(case_name(r)),
            _td(r.case.scenario or "-"),
            _td(r.case.device),
            _td(r.case.batch_size),
            *(_td(number_cell(name, r, run), True) for name in HTML_LAYOUT),
        ]
        marks = flags(r, noisy=f"noisy (IQR > {NOISE_THRESHOLD:.0%} of median)", separator="; ")
        cells.append(f'<td class="flag">{escape(marks)}</td>')
        cells.append(_td(limit_text(r.details.limit) or "-"))
        cells.append(f'<td class="{"" if r.ok else "failed"}">{escape(status)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    notes = "".join(
        f'<p class="note">energy: unmeasurable ({escape(reason)})</p>' for reason in no_energy(run)
    )
    # a wide table scrolls inside the page, never widens it (a phone's screen)
    return f'<div class="wide"><table><tr>{header}</tr>{"".join(rows)}</table></div>{notes}'


def flag_legend(run: Run) -> str:
    """What each flag shown in the run's table means (results.flags.MEANINGS), and each
    verdict of what limits a case (results.limits.MEANINGS)."""
    shown = {mark: meaning(mark) for r in run.results for mark in r.flags}
    verdicts = {r.details.limit.verdict for r in run.results if r.details.limit is not None}
    shown |= {f"limit: {v}": LIMIT_MEANINGS[v] for v in VERDICTS if v in verdicts}
    if not shown:
        return ""
    items = "".join(
        f"<dt>{escape(mark)}</dt><dd>{escape(text)}</dd>" for mark, text in shown.items()
    )
    return f'<dl class="legend">{items}</dl>'


def study_section(run: Run) -> str:
    """The run's study tables (its suite's; an LLM run's engines and which to pick),
    each with its quantity and unit in the header and which way is better."""
    tables = studies_for(run)
    return "".join(study_table(table) for table in tables)


def study_table(table: StudyTable) -> str:
    metric = table.metric
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    head = [
        "case",
        f"{metric.title} ({metric.unit})",
        f"relative to {DEFAULT_BASELINE} ({direction})",
        *(f"{column.title} ({column.unit})" for column in table.columns),
        "note",
    ]
    rows = []
    for row in table.rows:
        relative = f"{row.relative:.2f}x" if row.relative is not None else "-"
        cells = [_td(row.label), _td(fmt(row.value), True), _td(relative, True)]
        cells += [_td(fmt(value), True) for value in row.extra]
        cells.append(_td(row.note))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    return (
        f'<h3>{escape(table.title)}</h3><div class="wide"><table><tr>{header}</tr>'
        f"{''.join(rows)}</table></div>"
    )


def charts(run: Run) -> str:
    latency = METRICS["latency"]
    parts = []
    for key, results in groups(run).items():
        title = f"{latency.title} (error bars: 25th-75th pct) - {key}"
        parts.append(bar_chart(BarChart(title, latency.unit, latency_bars(results))))
        boxes = [(r.case.label(only=CHART_AXES), r.samples_ms) for r in results]
        parts.append(box_plot(f"latency distribution - {key}", latency.unit, boxes))
    parts += [curve_chart(chart) for chart in curve_charts(run)]
    return "\n".join(p for p in parts if p)


def timelines(run: Run) -> str:
    """Resource timelines (details.timeline) of training cases and long cases."""
    parts = []
    for r in run.results:
        if not timeline_worth_drawing(r):
            continue
        timeline = r.details.timeline.points if r.details.timeline else []
        cpu = [(p.t, worker_share_of_all_cores(p)) for p in timeline]
        rss = [(p.t, p.rss_mb) for p in timeline if p.rss_mb is not None]
        parts.append(line_chart(f"CPU over time - {case_name(r)}", CPU_AXIS, [("worker", cpu)]))
        parts.append(line_chart(f"memory over time - {case_name(r)}", "MB", [("rss", rss)]))
    return "\n".join(p for p in parts if p)


def run_section(run: Run) -> str:
    title = f"Run {run.id} - suite {run.suite} - {run.env.shown('hostname')}"
    return (
        f"<section><h2>{escape(title)}</h2>"
        f"<p>started {escape(run.started_at)}, finished {escape(str(run.finished_at))}; "
        f"{len(run.results)} cases, {run.failures} failed</p>"
        f"{results_table(run)}{flag_legend(run)}{server_html(run)}{study_section(run)}{charts(run)}"
        f"{timelines(run)}{env_table(run)}</section>"
    )


def render(runs: Sequence[Run]) -> str:
    body = "\n".join(run_section(run) for run in runs)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>dlbench report</title>"
        f"<style>{STYLE}</style></head><body><h1>dlbench report</h1>{body}"
        f"{COUNT_SCRIPT}</body></html>\n"
    )


def write_html(runs: Sequence[Run], path: Path) -> None:
    write_atomic(path, render(runs))
