"""Terminal tables: numbers formatted for people, strings from results kept inert."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from types import MappingProxyType

from factories import sample_run, with_result
from rich.console import Console

from dlbench.report.table import fmt, rate_column, readable, run_table
from dlbench.results.env import Ceilings


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


def test_readable_reads_a_records_tuples_and_read_only_mappings_as_lists_and_dicts():
    versions = MappingProxyType({"torch": "2.13.0", "vllm": None})
    assert readable(versions) == readable(dict(versions)) == "torch: 2.13.0\nvllm: none"
    assert readable(("H200", "H100")) == readable(["H200", "H100"]) == "H200, H100"
    for empty in (None, [], (), {}, MappingProxyType({})):
        assert readable(empty) == "none", empty
    assert readable(0) == "0" and readable("") == "" and readable(False) == "no"


def test_rate_column_leads_with_the_workloads_primary_metric():
    run = sample_run()
    result = replace(run.results[0], gflops=95.0, gbps=1.1, primary_metric="gflops")
    assert rate_column(result, run) == "95.0 GFLOP/s"
    result = replace(result, primary_metric="gbps")
    assert rate_column(result, run) == "1.10 GB/s"
    # with ceilings in the run, the share of this machine's ceiling, computed when read
    run = replace(run, env=replace(run.env, ceilings=Ceilings("roof", {"cpu|memory": 2.2})))
    assert rate_column(result, run) == "1.10 GB/s (50%)"


def test_table_shows_failures_in_full_and_escapes_markup():
    run = sample_run()
    run = with_result(run, 1, replace(run.results[1], error="[bold red]not markup[/bold red] boom"))
    console = Console(width=250, record=True)
    console.print(run_table(run))
    text = console.export_text()
    assert "[bold red]not markup[/bold red] boom" in text
    assert "failed: gemm size=64 / torch [script] infer" in text


def busy_run():
    """A run whose rows hold long labels, big numbers and several flags: what squeezed
    the 13-column table to a 6-character case column at 120 columns."""
    from factories import make_result, make_run

    from dlbench.measure.stats import summarize

    results = [
        make_result(
            workload="bert-large", framework="torch", compile=compile_mode, mode="train",
            device="cuda:0", precision="amp-bf16", batch_size=256, threads=16,
            params=(("seq", 128),), latency_ms=summarize([0.238] * 20), throughput=170_412.5,
            gflops=279_669.0, first_call_ms=2_224.0, cpu_percent=100.0, peak_rss_mb=2_311.0,
            flags=["throttled:power", "low-n-p99", "interference"],
        )
        for compile_mode in ("eager", "reduce-overhead")
    ]  # fmt: skip
    return make_run(results, id="20261127-181237-afba25", env={"hostname": "h100-reference"})


def rendered(run, width, wide=False) -> str:
    from dlbench.cli.terminal import PIPED_WIDTH

    console = Console(width=width or PIPED_WIDTH, record=True)
    console.print(run_table(run, width, wide))
    return console.export_text()


def test_the_table_fits_100_and_120_columns_with_nothing_cut():
    run = busy_run()
    for width in (100, 120):
        text = rendered(run, width)
        assert "…" not in text, text
        assert max(map(len, text.splitlines())) <= width
        for whole in ("170,412", "238", "throttled:power,", "low-n-p99", "interference",
                      "median ms", "samples/s", "reduce-overhead]"):  # fmt: skip
            assert whole in text, (width, whole, text)
        table, more = text.split("more columns")
        # the wide columns are named under the table, those holding nothing nowhere
        assert "p99 ms" not in table and "p99 ms" in more and "J/sample" not in text
        assert "dlbench show 20261127-181237-afba25 --wide" in " ".join(more.split())
    # under --wide, a column the terminal has no room for is shown through a pager,
    # which gets every column (a pipe), not by asking for --wide again
    wide = " ".join(rendered(run, 60, wide=True).split("more columns")[1].split())
    assert "dlbench show 20261127-181237-afba25 --wide | less -S" in wide
    # at 60 columns the rate goes, then the device all rows share (named in the title)
    narrow = rendered(run, 60)
    assert "GFLOP/s" not in narrow and "device cuda:0" in narrow and "…" not in narrow
    assert max(map(len, narrow.splitlines())) <= 60


def test_a_long_flag_and_a_long_label_wrap_between_words_never_inside_one():
    """The two wrapping columns are sized here: left to rich, at one width each they
    were shrunk with every other column, and compile-built-headers broke mid-word."""
    from factories import make_result, make_run

    from dlbench.measure.stats import summarize
    from dlbench.results.flags import COMPILE_BUILT_HEADERS

    compiled = make_result(
        workload="mlp", framework="torch", compile="compile", latency_ms=summarize([0.486] * 20),
        throughput=1_995_457.0, gflops=146.0, first_call_ms=15_969.0, cpu_percent=199.0,
        peak_rss_mb=418.0, flags=[COMPILE_BUILT_HEADERS],
    )  # fmt: skip
    run = make_run([compiled], id="20261129-062455-14dd73")
    for width in (100, 120):
        text = rendered(run, width)
        assert max(map(len, text.splitlines())) <= width
        table = text.split("compile-built-headers:")[0]  # the legend's line apart
        for whole in ("compile-built-headers", "[compile]", "1,995,457", "median ms",
                      "samples/s", "status"):  # fmt: skip
            assert whole in table, (width, whole, text)


def test_piped_output_keeps_every_column_one_row_per_case():
    run = busy_run()
    text = rendered(run, None)
    table_rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(table_rows) == len(run.results)
    for header in ("p99 ms", "IQR/med", "CPU %", "RSS MB", "1st call ms", "rate"):
        assert header in text


def test_every_flag_shown_is_explained_under_the_table():
    from dlbench.results.flags import MEANINGS

    text = rendered(busy_run(), 120)
    for flag in ("throttled:power", "low-n-p99", "interference"):
        assert f"{flag}: " in text
    assert MEANINGS["interference"].split()[0] in text


def test_every_flag_the_rules_can_set_has_a_meaning():
    import inspect

    from dlbench.results import flags

    source = inspect.getsource(flags)
    for name in re.findall(r'found\.append\("([a-z0-9:-]+)"\)', source):
        assert name in flags.MEANINGS, name
    for constant in ("NOISY", "LOW_N_P99", "HOST_BOUND"):
        assert getattr(flags, constant) in flags.MEANINGS


def test_list_support_and_frameworks_fit_100_columns_with_every_name_whole():
    from dlbench.cli.info_commands import frameworks_table, support_table
    from dlbench.spec.registry import FRAMEWORKS

    for table in (support_table(), frameworks_table()):
        console = Console(width=100, record=True)
        console.print(table)
        text = console.export_text()
        assert "…" not in text
        words = set(re.findall(r"[\w.-]+", text))
        assert set(FRAMEWORKS) <= words, set(FRAMEWORKS) - words
    # an install hint's extras are text, not markup swallowed whole
    console = Console(width=100, record=True)
    console.print(frameworks_table())
    assert (
        '.[llm-llama-cpp]"' in console.export_text().replace("\n", "")
        or FRAMEWORKS["llama-cpp"].installed_version()
    )
