"""Nothing dlbench writes or prints can be turned against its reader: runs from
elsewhere (imported files, a hand-edited store) are data, never markup,
formulas, paths or numbers that are not numbers."""

from __future__ import annotations

import io
from dataclasses import replace

from conftest import cli
from factories import timed_run
from rich.console import Console

from dlbench.cli.terminal import comparison_table
from dlbench.report.compare import compare_runs
from dlbench.results.files import write_json

MARKUP = "[bold red]x[/]"


def test_strings_from_runs_are_printed_as_text_never_as_markup(tmp_path):
    for run_id, median in (("a", 1.0), ("b", 1.1)):
        run = timed_run(run_id, median, 1, host=MARKUP)
        run.suite = "[/]"
        case = replace(run.results[0].case, scenario="[/]", options=(("k", MARKUP),))
        run.results[0].case = case
        write_json(run, tmp_path / f"{run_id}.json")
        assert cli("import", str(tmp_path / f"{run_id}.json")).returncode == 0
    for args in (
        ("show", "a"),
        ("runs",),
        ("compare", "a", "b"),
        ("compare", "a", "b", "--by", "machine", "--baseline", "[/]"),
        ("compare", "a", "b", "--by", "compile"),
    ):
        proc = cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "[/]" in proc.stdout and "Traceback" not in proc.stderr, args


def test_a_run_id_holding_markup_is_printed_as_it_is():
    """`compare` crashed in rich on an imported id `[/]` (ids are checked on import now,
    and the table escapes them still)."""
    a, b = timed_run("a", 1.0, 1), timed_run("b", 1.1, 2)
    table = comparison_table(compare_runs(a, b, "latency"), "latency", "[/]", MARKUP)
    console = Console(file=io.StringIO(), width=400)
    console.print(table)
    assert f"A = [/], B = {MARKUP}" in console.file.getvalue()
