"""Terminal tables: numbers formatted for people, strings from results kept inert."""

from __future__ import annotations

import math

from factories import sample_run
from rich.console import Console

from dlbench.report.table import fmt, rate_column, run_table


def test_fmt_three_significant_digits():
    assert [fmt(0.012345), fmt(1.2345), fmt(123.45), fmt(12345.6)] == [
        "0.0123",
        "1.23",
        "123",
        "12,346",
    ]
    assert fmt(None) == "-" and fmt(0) == "0"
    # a missing value (nan) reads as missing, like None; infinities stay visible
    assert fmt(math.nan) == "-" and fmt(math.inf) == "inf"


def test_rate_column_leads_with_the_workloads_primary_metric():
    run = sample_run()
    result = run.results[0]
    result.gflops, result.gbps = 95.0, 1.1
    result.primary_metric = "gflops"
    assert rate_column(result, run) == "95.0 GFLOP/s"
    result.primary_metric = "gbps"
    assert rate_column(result, run) == "1.10 GB/s"
    # with ceilings in the run, the share of this machine's ceiling, computed when read
    run.env["ceilings"] = {"source_run": "roof", "values": {"cpu|memory": 2.2}}
    assert rate_column(result, run) == "1.10 GB/s (50%)"


def test_table_shows_failures_in_full_and_escapes_markup():
    run = sample_run()
    run.results[1].error = "[bold red]not markup[/bold red] boom"
    console = Console(width=250, record=True)
    console.print(run_table(run))
    text = console.export_text()
    assert "[bold red]not markup[/bold red] boom" in text
    assert "failed: gemm size=64 / torch [script] infer" in text
