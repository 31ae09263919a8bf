"""Nothing dlbench writes or prints can be turned against its reader: runs from
elsewhere (imported files, a hand-edited store) are data, never markup,
formulas, paths or numbers that are not numbers."""

from __future__ import annotations

import io
import sqlite3
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import cli
from factories import timed_run
from rich.console import Console

from dlbench.cli.terminal import comparison_table
from dlbench.errors import UserError
from dlbench.launch.session import Outputs, case_files
from dlbench.report.compare import compare_runs
from dlbench.results.files import write_json
from dlbench.results.run_ids import RUN_ID, inside, new_run_id, run_path
from dlbench.results.store import Store

MARKUP = "[bold red]x[/]"


def stored(db: Path) -> tuple[int, int]:
    """(runs, results) in the store; a store never opened holds none."""
    if not db.exists():
        return 0, 0
    with sqlite3.connect(db) as check:
        runs = check.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        return runs, check.execute("SELECT COUNT(*) FROM results").fetchone()[0]


def assert_refused(proc: subprocess.CompletedProcess[str], says: str) -> None:
    """A user error: exit 2, one line on stderr naming the problem, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("dlbench: error: ") and proc.stderr.count("\n") == 1
    assert says in proc.stderr and "Traceback" not in proc.stderr and not proc.stdout


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


BAD_IDS = [
    "",
    "a" * 100_000,
    "a" * 65,
    "../../../somewhere",
    "..",
    "a/b",
    "a\\b",
    ".hidden",
    "-rf",
    "[/]",
    "=1+1",
    "a b",
    "a\nb",
    "\x1b[31mred",
    "caf\u00e9",
]


@pytest.mark.parametrize("bad_id", BAD_IDS, ids=range(len(BAD_IDS)))
def test_an_imported_run_id_outside_the_rule_is_refused(tmp_path, isolated_store, bad_id):
    run = timed_run("ok", 1.0, 1)
    run.id = bad_id
    write_json(run, tmp_path / "run.json")
    assert_refused(cli("import", str(tmp_path / "run.json")), "is not allowed: a run id is 1 to 64")
    assert stored(isolated_store) == (0, 0)


def test_ids_dlbench_makes_and_has_made_follow_the_rule():
    made = {new_run_id() for _ in range(20)}
    earlier = ["20261124-002144-7fd5b5", "crafted", "old-run", "r1", "a", "x" * 64]
    assert all(RUN_ID.fullmatch(run_id) for run_id in [*made, *earlier])


def test_resuming_a_stored_run_whose_id_leaves_its_folder_is_refused(tmp_path, isolated_store):
    """An older dlbench imported `../../../somewhere`, and `run --resume` wrote LoadGen's
    logs outside run-files/; reading that run now refuses it before any case runs."""
    run = timed_run("x", 1.0, 1)
    run.id, run.plan, run.results = "../../../somewhere", [run.results[0].case.to_dict()], []
    with Store(isolated_store) as store:
        store.import_run(run)  # as an older dlbench stored it: Store takes a Run as it is
    proc = cli("run", "--resume", "../../../somewhere")
    assert_refused(proc, "id: '../../../somewhere' is not allowed")
    assert stored(isolated_store) == (1, 0)
    assert not (isolated_store.parent / "run-files" / run.id).resolve().exists()


def test_every_path_named_after_a_run_stays_in_its_folder(tmp_path, isolated_store):
    folder = tmp_path / "run-files"
    assert run_path(folder, "20261124-002144-7fd5b5", "-x.png") == folder / (
        "20261124-002144-7fd5b5-x.png"
    )
    with pytest.raises(UserError, match=r"run id '\.\./x' is not allowed"):
        run_path(folder, "../x")
    with pytest.raises(UserError, match="would be written outside"):
        run_path(folder, "a", "/../../b")
    with pytest.raises(UserError, match="would be written outside"):
        inside(folder, "..")
    folder.mkdir()
    (folder / "linked").symlink_to(tmp_path)  # a link out of the folder is followed, and refused
    with pytest.raises(UserError, match="would be written outside"):
        run_path(folder, "linked")
    run = timed_run("ok", 1.0, 1)
    run.id = "../../../somewhere"
    with Store(isolated_store) as store, pytest.raises(UserError, match="is not allowed"):
        case_files(run, Outputs(), store, 0, None)
