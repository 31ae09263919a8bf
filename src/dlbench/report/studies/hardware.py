"""The first seed article's hardware table, and the ceilings table of `dlbench roofline`.

The article listed "hardware, it/s" for an add it timed together with
allocation and a host-to-device copy, unsynchronised, and could not say why
one GPU ran at a fifth of its speed. Here each row is one machine's device
with it/s, GB/s, the fraction of that machine's measured memory bandwidth,
and the throttle verdict of its GPU telemetry. The ceilings table shows a GPU's
burst and sustained figures (results.ceilings) with the SM clock and power
seen during each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table

from dlbench.measure.power_regime import BURST_S
from dlbench.report.leaderboard import hardware
from dlbench.report.studies.study import StudyTable, relative_rows
from dlbench.report.table import escape_markup, fmt
from dlbench.results.ceilings import BURST, SUSTAINED, CeilingKey, efficiency_in_run
from dlbench.results.env import Ceilings, RegimeConditions
from dlbench.results.metrics import METRICS
from dlbench.results.records import Run

ADD_WORKLOAD = "add"


@dataclass(frozen=True)
class HardwareRow:
    hardware: str
    case: str
    its: float
    gbps: float | None
    efficiency: float | None
    throttle: str | None
    run_id: str


def hardware_rows(runs: Sequence[Run], workload: str = ADD_WORKLOAD) -> list[HardwareRow]:
    """One row per (machine device, compile mode) of `workload`, fastest first."""
    rows = []
    for run in runs:
        for result in run.results:
            if result.case.workload != workload or not result.ok or result.latency_ms is None:
                continue
            details = result.details
            efficiency = efficiency_in_run(result, run) or {}
            case = f"{result.case.framework} [{result.case.compile}] {result.case.device}"
            if (details.transfer or "").startswith("inside"):
                case += " (h2d copy timed)"
            rows.append(
                HardwareRow(
                    hardware=hardware(run, result),
                    case=case,
                    its=1000.0 / result.latency_ms.median,
                    gbps=result.gbps,
                    efficiency=efficiency.get("fraction"),
                    throttle=details.timeline.throttle if details.timeline else None,
                    run_id=run.id,
                )
            )
    return sorted(rows, key=lambda row: -row.its)


def hardware_table(runs: Sequence[Run], workload: str = ADD_WORKLOAD) -> Table:
    table = Table(
        title=f"{workload}: hardware table (it/s as the article; GB/s and efficiency beside it)",
        title_justify="left",
    )
    for name in ("hardware", "case", "it/s", "GB/s", "of measured bandwidth", "throttled", "run"):
        table.add_column(name, justify="right" if name in ("it/s", "GB/s") else "left")
    for row in hardware_rows(runs, workload):
        table.add_row(
            escape_markup(row.hardware),
            escape_markup(row.case),
            fmt(row.its),
            fmt(row.gbps),
            f"{100 * row.efficiency:.0f}%" if row.efficiency is not None else "- (no roofline)",
            escape_markup(row.throttle or "no"),
            escape_markup(row.run_id),
        )
    return table


def ceilings_table(run: Run) -> Table:
    """The ceilings a run holds (measured in it, or copied from the newest roofline):
    a GPU's burst and sustained figures each with the SM clock and power seen during
    it; a CPU's (or an older run's) one figure."""
    ceilings = run.env.ceilings_or_none or Ceilings(source_run="-", values={})
    source = escape_markup(str(ceilings.source_run))  # an imported run's env
    table = Table(title=f"ceilings (from run {source})", title_justify="left")
    for name in ("device", "ceiling", "regime", "value", "SM clock", "power", "measured"):
        table.add_column(name, justify="right" if name in NUMBER_COLUMNS else "left")
    for key, value in sorted(ceilings.values.items()):
        parsed = CeilingKey.parse(key)
        seen = ceilings.conditions.get(key) or RegimeConditions()
        unit = "GFLOP/s" if parsed.kind == "gflops" else "GB/s"
        clock, power = seen.sm_clock_mhz, seen.power_w
        table.add_row(
            escape_markup(parsed.device),
            escape_markup(parsed.what()),
            escape_markup(parsed.regime or "one figure"),
            f"{fmt(value)} {unit}",
            f"{clock:.0f} MHz" if clock is not None else "-",
            f"{power:.0f} W" if power is not None else "-",
            escape_markup(_how_measured(parsed, seen)),
        )
    return table


NUMBER_COLUMNS = ("value", "SM clock", "power")


def _how_measured(key: CeilingKey, seen: RegimeConditions) -> str:
    """When in the run a figure was taken, from a cool start or not, and (memory, the
    best of several kernels) by which kernel."""
    if key.regime == BURST:
        start: dict[bool | None, str] = {
            True: ", cool start",
            False: ", not a cool start (a clock limit held)",
        }
        when = f"first {1000 * BURST_S:.0f} ms{start.get(seen.cool_start, '')}"
    elif key.regime == SUSTAINED:
        when = f"median window after {seen.after_s or 0.0:.0f} s"
    else:
        return "-"
    kernel = seen.kernel
    return f"{when}; best of kernels: {kernel}" if key.kind == "memory" and kernel else when


def seed_add_tables(run: Run, baseline: str = "torch") -> list[StudyTable]:
    """The seed-add run's own tables: it/s as the article, GB/s and efficiency beside it."""
    metrics = tuple(METRICS[key] for key in ("its", "gbps", "efficiency"))
    rows = hardware_rows([run])
    values = {
        "its": [(row.case, row.its) for row in rows],
        "gbps": [(row.case, row.gbps) for row in rows if row.gbps is not None],
        "efficiency": [(row.case, row.efficiency) for row in rows if row.efficiency is not None],
    }
    tables = []
    for metric in metrics:
        entries = [(label, value, None, "") for label, value in values[metric.key]]
        title = (
            f"add {metric.title} ({metric.unit}) - synchronised in every step; "
            "host-to-device copy outside the timing unless labelled"
        )
        tables.append(StudyTable(title, metric, relative_rows(entries, None)))
    return [t for t in tables if t.rows]
