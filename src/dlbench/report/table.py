"""A run as a terminal table, and numbers formatted for people."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dlbench.results.records import STATUS_SKIPPED, Result, Run

NULL_LABEL = "null (harness)"


def fmt(value: float | None, digits: int = 3) -> str:
    """Three significant digits, no scientific notation for everyday sizes."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 10**digits:
        return f"{value:,.0f}"
    decimals = max(0, digits - 1 - int(f"{magnitude:e}".split("e")[1]))
    return f"{value:.{decimals}f}"


def escape_markup(text: str) -> str:
    """Strings from results are data: never let them act as rich markup."""
    return escape(text)


def params_label(params: dict[str, int]) -> str:
    """Workload parameters as they follow a workload's name: " size=4096"."""
    return "".join(f" {k}={v}" for k, v in sorted(params.items()))


def case_name(result: Result) -> str:
    framework = NULL_LABEL if result.framework == "null" else result.framework
    params = params_label(result.params)
    precision = "" if result.precision == "fp32" else f" {result.precision}"
    ranks = f" x{result.nproc} procs" if result.nproc > 1 else ""
    return (
        f"{result.workload}{params} / {framework} [{result.compile}] {result.mode}"
        f"{precision}{ranks}"
    )


def rate_column(result: Result) -> str:
    """The workload's primary rate (GB/s for memory-bound ones, GFLOP/s otherwise),
    with the fraction of this machine's measured ceiling where a roofline exists."""
    details = result.details if isinstance(result.details, dict) else {}
    efficiency = details.get("efficiency") or {}
    share = f" ({100 * efficiency['fraction']:.0f}%)" if "fraction" in efficiency else ""
    if result.primary_metric == "gbps" and result.gbps is not None:
        return f"{fmt(result.gbps)} GB/s{share}"
    if result.gflops is not None:
        return f"{fmt(result.gflops)} GFLOP/s{share}"
    return "-"


def flags(result: Result, noisy: str = "noisy", separator: str = ", ") -> str:
    """What a reader must know beside the number: noise, and GPU clocks held down."""
    details = result.details if isinstance(result.details, dict) else {}
    marks = [noisy] if result.noisy else []
    if details.get("throttle"):
        marks.append(f"throttled: {details['throttle']}")
    return separator.join(marks)


def iqr_percent(result: Result) -> str:
    stats = result.latency_ms
    if stats is None or stats.median <= 0:
        return "-"
    return f"{100.0 * stats.iqr / stats.median:.1f}%"


COLUMNS = (
    "case",
    "device",
    "batch",
    "median ms",
    "p99 ms",
    "IQR/med",
    "samples/s",
    "rate",
    "CPU %",
    "RSS MB",
    "1st call ms",
    "status",
)
NUMERIC = frozenset(COLUMNS[3:11])


def run_table(run: Run) -> RenderableType:
    """The results table, with each failure's error listed under it in full."""
    title = f"run {run.id} - suite {run.suite} - {run.env.get('hostname', '?')}"
    table = Table(title=escape_markup(title))
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in NUMERIC else "left")
    for result in run.results:
        table.add_row(*result_row(result))
    failures = [
        Text(
            f"{r.status}: {case_name(r)}: {r.error or 'no reason recorded'}",
            style="yellow" if r.status == STATUS_SKIPPED else "red",
        )
        for r in run.results
        if not r.ok
    ]
    return Group(table, *failures)


def result_row(result: Result) -> list[str]:
    batch = result.batch_size if result.batch_size is not None else "default"
    identity = [escape_markup(str(c)) for c in (case_name(result), result.device, batch)]
    stats = result.latency_ms
    if result.status == STATUS_SKIPPED:
        return [*identity, *["-"] * 8, "[yellow]skipped[/yellow]"]
    if not result.ok or stats is None:
        return [*identity, *["-"] * 8, "[red]failed[/red]"]
    marks = flags(result)
    status = f"[yellow]{escape_markup(marks)}[/yellow]" if marks else "ok"
    return [
        *identity,
        fmt(stats.median),
        fmt(stats.p99),
        iqr_percent(result),
        fmt(result.throughput),
        rate_column(result),
        fmt(result.cpu_percent),
        fmt(result.peak_rss_mb),
        fmt(result.first_call_ms),
        status,
    ]
