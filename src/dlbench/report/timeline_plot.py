"""A case's resource timeline as a PNG, drawn like a system monitor's CPU history.

Top: every core's busy % (thin) with the system total (bold) and the worker's
share of the machine (dashed). Where a GPU was watched, two panels: its
utilisation with the clock-event (throttle) reasons NVML gave, named where
they occur; then its SM clock, with board power and temperature on a twin
axis. Bottom: the worker's memory, with the load average on a twin axis.
The measured region is shaded and training epochs end at thin lines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from dlbench.measure.gpu_telemetry import GpuTelemetryReading
from dlbench.measure.timeline import TimelinePoint
from dlbench.report.charts.model import slug
from dlbench.report.charts.png import pyplot, save_png, wrapped
from dlbench.report.run_charts import CPU_AXIS, timeline_worth_drawing, worker_share_of_all_cores
from dlbench.report.table import case_name
from dlbench.results.details import Details
from dlbench.results.records import Result, Run
from dlbench.results.run_ids import run_path

if TYPE_CHECKING:  # matplotlib is imported where a chart is drawn (charts.png.pyplot)
    from matplotlib.axes import Axes
    from matplotlib.typing import LegendLocType


class _LegendPlace(TypedDict):
    """Where a panel's legend goes, and how it looks: Axes.legend's keyword arguments."""

    loc: LegendLocType
    bbox_to_anchor: tuple[float, float]
    fontsize: int
    frameon: bool


CORE_COLOR = "#4c72b0"
TOTAL_COLOR = "#1b2a49"
WORKER_COLOR = "#dd8452"
MEMORY_COLOR = "#55a868"
LOAD_COLOR = "#8172b3"
WINDOW_COLOR = "#fdd9a0"
# Above the panel, right-aligned: inside it, a legend would hide the 100% lines.
LEGEND: _LegendPlace = {
    "loc": "lower right",
    "bbox_to_anchor": (1.0, 1.0),
    "fontsize": 7,
    "frameon": False,
}


def timeline_of(result: Result) -> Sequence[TimelinePoint]:
    """The result's timeline points, or a ValueError saying there are none."""
    timeline = result.details.timeline
    if timeline is None or not timeline.points:
        raise ValueError(
            f"{case_name(result)} has no resource timeline (details.timeline): it was "
            "measured by a dlbench that did not record one, or its worker never started"
        )
    return timeline.points


def write_timeline_png(result: Result, path: Path, title: str | None = None) -> Path:
    """Draw `result`'s timeline into `path` (PNG); ValueError if it has none."""
    points = timeline_of(result)
    plt = pyplot()
    has_gpu = any(p.gpu for p in points)
    panels = 4 if has_gpu else 2
    figure, axes = plt.subplots(
        panels,
        1,
        sharex=True,
        figsize=(10, 2.6 * panels + 0.6),
        gridspec_kw={"height_ratios": [2, 1, 1, 1] if has_gpu else [2, 1]},
    )
    times = [float(p.t) for p in points]
    _cpu_panel(axes[0], points, times)
    if has_gpu:
        _gpu_panel(axes[1], points, times)
        _gpu_clock_panel(axes[2], points, times)
    _memory_panel(axes[-1], points, times)
    axes[-1].set_xlabel("seconds since the worker started")
    _mark_phases(list(axes), result.details)
    figure.suptitle(wrapped(title or case_name(result), 110), fontsize=10)
    figure.tight_layout()
    return save_png(figure, path)


def write_timeline_pngs(runs: Sequence[Run], folder: Path) -> list[Path]:
    """One timeline PNG per result that has a timeline, named from run id and case."""
    written: list[Path] = []
    taken: set[Path] = set()
    for run in runs:
        for result in run.results:
            if not timeline_worth_drawing(result):
                continue
            stem = f"-{slug(case_name(result))}-timeline"
            path = run_path(folder, run.id, f"{stem}.png")
            repeat = 2
            while path in taken:  # the same case measured twice in one run
                path = run_path(folder, run.id, f"{stem}-{repeat}.png")
                repeat += 1
            taken.add(path)
            written.append(write_timeline_png(result, path, f"{case_name(result)} - run {run.id}"))
    return written


def _cpu_panel(axis: Axes, points: Sequence[TimelinePoint], times: list[float]) -> None:
    cores = [p.cpu_cores for p in points]
    count = max((len(c) for c in cores), default=0)
    for core in range(count):
        series = [c[core] if core < len(c) else None for c in cores]
        label = "each core" if core == 0 else None
        axis.plot(times, _line(series), color=CORE_COLOR, linewidth=0.6, alpha=0.45, label=label)
    total = [p.system_cpu_percent for p in points]
    axis.plot(times, _line(total), color=TOTAL_COLOR, linewidth=2.2, label="all cores")
    if count:
        # The worker's percent is of one core; divided by the core count it
        # shares the 0..100 scale of the system line it is part of.
        worker = [worker_share_of_all_cores(p) for p in points]
        axis.plot(
            times, _line(worker), color=WORKER_COLOR, linewidth=1.4, linestyle="--", label="worker"
        )
    axis.set_ylim(0, 105)
    axis.set_ylabel(CPU_AXIS)
    axis.legend(**LEGEND, ncol=3)
    axis.grid(alpha=0.3)


def _gpu_panel(axis: Axes, points: Sequence[TimelinePoint], times: list[float]) -> None:
    indices = sorted({d.index for p in points for d in p.gpu or ()})
    for index in indices:
        readings = [_device(p, index) for p in points]
        util = [d.gpu_util_percent if d else None for d in readings]
        axis.plot(times, _line(util), linewidth=1.4, label=f"GPU {index} util")
        throttled = [
            (t, d.throttle) for t, d in zip(times, readings, strict=True) if d and d.throttle
        ]
        if throttled:
            axis.plot(
                [t for t, _ in throttled],
                [102] * len(throttled),
                "v",
                color="#c44e52",
                markersize=4,
                label=f"GPU {index} clocks limited",
            )
            # each reason named where it starts, not at every sample
            previous: tuple[str, ...] = ()
            for t, reasons in throttled:
                if reasons != previous:
                    axis.annotate(", ".join(reasons), (t, 96), fontsize=6, color="#c44e52")
                previous = reasons
    axis.set_ylim(0, 105)
    axis.set_ylabel("GPU util %")
    axis.legend(**LEGEND, ncol=2)
    axis.grid(alpha=0.3)


def _gpu_clock_panel(axis: Axes, points: Sequence[TimelinePoint], times: list[float]) -> None:
    """SM clock on the left axis; board power and temperature on the right."""
    twin = axis.twinx()
    indices = sorted({d.index for p in points for d in p.gpu or ()})
    lines = []
    for index in indices:
        readings = [_device(p, index) for p in points]
        clock = _line([d.sm_clock_mhz if d else None for d in readings])
        power = _line([d.power_w if d else None for d in readings])
        temperature = _line([d.temperature_c if d else None for d in readings])
        lines += axis.plot(times, clock, linewidth=1.4, label=f"GPU {index} MHz")
        lines += twin.plot(times, power, linewidth=1.0, linestyle="--", label=f"GPU {index} W")
        lines += twin.plot(
            times, temperature, linewidth=1.0, linestyle=":", label=f"GPU {index} °C"
        )
    axis.set_ylabel("SM clock (MHz)")
    axis.set_ylim(bottom=0)
    twin.set_ylabel("power W / temp °C")
    twin.set_ylim(bottom=0)
    axis.legend(handles=lines, **LEGEND, ncol=3)
    axis.grid(alpha=0.3)


def _memory_panel(axis: Axes, points: Sequence[TimelinePoint], times: list[float]) -> None:
    rss = [p.rss_mb for p in points]
    axis.plot(times, _line(rss), color=MEMORY_COLOR, linewidth=1.6, label="worker RSS")
    axis.set_ylabel("RSS (MiB)", color=MEMORY_COLOR)
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    load = [p.load1 for p in points]
    if any(v is not None for v in load):
        twin = axis.twinx()
        twin.plot(times, _line(load), color=LOAD_COLOR, linewidth=1.0, label="load avg (1 min)")
        twin.set_ylabel("load average", color=LOAD_COLOR)
        twin.set_ylim(bottom=0)


def _mark_phases(axes: list[Axes], details: Details) -> None:
    """Shade the measured region and draw a line at the end of each epoch."""
    origin = details.timeline.origin_epoch_s if details.timeline else None
    if origin is None:
        return
    window = details.measured_wall
    if window is not None and len(window) == 2:
        start, end = window
        for index, axis in enumerate(axes):
            label = "measured" if index == 0 else None
            axis.axvspan(start - origin, end - origin, color=WINDOW_COLOR, alpha=0.4, lw=0,
                         label=label)  # fmt: skip
        # named in the panel's legend, above it: a label in the panel crossed its lines
        axes[0].legend(**LEGEND, ncol=4)
    for epoch in details.training.epochs if details.training else ():
        epoch_end = epoch.end_epoch_s
        if epoch_end is not None:
            for axis in axes:
                axis.axvline(epoch_end - origin, color="#666666", linewidth=0.7, linestyle=":")


def _device(point: TimelinePoint, index: int) -> GpuTelemetryReading | None:
    return next((device for device in point.gpu or () if device.index == index), None)


def _line(values: Sequence[float | None]) -> list[float]:
    """A series for Axes.plot: a missing reading as NaN, a gap in the line (as matplotlib
    draws a None, which its annotations do not admit)."""
    return [math.nan if value is None else value for value in values]
