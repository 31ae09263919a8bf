"""The HTML report's charts as PNG files (matplotlib), for slides and papers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dlbench.report.curves import slug
from dlbench.report.html import CHART_AXES, groups
from dlbench.report.plots import pyplot
from dlbench.report.study import quartiles
from dlbench.results.metrics import METRICS, read
from dlbench.results.records import Run


def write_run_plots(runs: Sequence[Run], folder: Path) -> list[Path]:
    """Per run and chart group: median latency bars with interquartile error bars."""
    plt = pyplot()
    latency = METRICS["latency"]
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for run in runs:
        for key, results in groups(run).items():
            labels = [r.case.label(only=CHART_AXES) for r in results]
            medians = [read(latency, r) or 0.0 for r in results]
            spreads = [quartiles(r) or (m, m) for r, m in zip(results, medians, strict=True)]
            errors = [
                [m - lo for m, (lo, _) in zip(medians, spreads, strict=True)],
                [hi - m for m, (_, hi) in zip(medians, spreads, strict=True)],
            ]
            figure, axis = plt.subplots(figsize=(max(5, 1.2 * len(labels)), 4.5))
            axis.bar(range(len(labels)), medians, yerr=errors, capsize=4, color="#4c72b0")
            axis.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
            axis.set_ylabel(f"{latency.title} ({latency.unit})")
            axis.set_title(f"{key} - run {run.id}", fontsize=9)
            figure.tight_layout()
            path = folder / f"{slug(run.id)}-{slug(key)}.png"
            figure.savefig(path, dpi=110)
            plt.close(figure)
            written.append(path)
    return written
