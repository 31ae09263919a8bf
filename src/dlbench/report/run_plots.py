"""The HTML report's latency charts as PNG files (matplotlib), for slides and papers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dlbench.report.charts.model import BarChart, slug
from dlbench.report.charts.png import bar_chart, pyplot
from dlbench.report.run_charts import groups, latency_bars
from dlbench.results.metrics import METRICS
from dlbench.results.records import Run
from dlbench.results.run_ids import run_path


def write_run_plots(runs: Sequence[Run], folder: Path) -> list[Path]:
    """Per run and chart group: median latency bars with interquartile error bars."""
    pyplot()  # without matplotlib, say so before drawing anything
    latency = METRICS["latency"]
    written = []
    for run in runs:
        for key, results in groups(run).items():
            unit = f"{latency.title} ({latency.unit})"
            chart = BarChart(f"{key} - run {run.id}", unit, latency_bars(results))
            written.append(bar_chart(chart, run_path(folder, run.id, f"-{slug(key)}.png")))
    return written
