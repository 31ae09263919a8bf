"""Nothing dlbench writes or prints can be turned against its reader: runs from
elsewhere (imported files, a hand-edited store) are data, never markup,
formulas, paths or numbers that are not numbers."""

from __future__ import annotations

import io
import json
import math
import sqlite3
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import cli
from factories import timed_run, with_result
from rich.console import Console

from dlbench.cli.terminal import comparison_table
from dlbench.errors import UserError
from dlbench.launch.session import Outputs, case_files
from dlbench.report.compare import compare_runs
from dlbench.results.files import read_json, run_json, write_json
from dlbench.results.run_ids import RUN_ID, inside, new_run_id, run_path
from dlbench.results.store import open_store

MARKUP = "[bold red]x[/]"
REPOSITORY = Path(__file__).parent.parent


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
        run = replace(timed_run(run_id, median, 1, host=MARKUP), suite="[/]")
        case = replace(run.results[0].case, scenario="[/]", options=(("k", MARKUP),))
        run = with_result(run, 0, replace(run.results[0], case=case))
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


ESCAPES = "\x1b]0;retitled\x07\x1b[2J"  # set the window title, clear the screen


def test_terminal_control_characters_from_runs_are_spelt_out_never_sent(tmp_path):
    for run_id, median in (("a", 1.0), ("b", 1.1)):
        run = timed_run(run_id, median, 1, host=ESCAPES)
        case = replace(run.results[0].case, options=(("k", ESCAPES),))
        run = with_result(run, 0, replace(run.results[0], case=case))
        run = with_result(
            run, len(run.results), replace(run.results[0], status="failed", error=ESCAPES)
        )
        write_json(run, tmp_path / f"{run_id}.json")
        assert cli("import", str(tmp_path / f"{run_id}.json")).returncode == 0
    for args in (
        ("show", "a"),
        ("runs",),
        ("compare", "a", "b"),
        ("compare", "a", "b", "--by", "machine"),
    ):
        proc = cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "\x1b" not in proc.stdout + proc.stderr and "\\x1b]0;retitled" in proc.stdout, args
    missing = cli("import", str(tmp_path / f"{ESCAPES}.json"))  # a user error quoting a path
    assert missing.returncode == 2 and "\x1b" not in missing.stderr and "\\x1b" in missing.stderr


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
    run = replace(timed_run("ok", 1.0, 1), id=bad_id)
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
    run = replace(run, plan=(run.results[0].case,), results=[])
    with open_store(isolated_store) as store:
        store.import_run(run)
    with sqlite3.connect(isolated_store) as db:  # as an older dlbench stored it
        db.execute("UPDATE runs SET id='../../../somewhere'")
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
    run = replace(timed_run("ok", 1.0, 1), id="../../../somewhere")
    with open_store(isolated_store) as store:
        with pytest.raises(UserError, match="is not allowed"):
            case_files(run, Outputs(), store, 0, None)
        with pytest.raises(UserError, match="is not allowed: a run id is"):
            store.begin_run(run)  # a run made or imported by any code, not only the CLI
    assert stored(isolated_store) == (0, 0)


RAW = "@raw@"  # a value written into the JSON text as it stands (1e400, a 5,000-digit number)


def valid_run_data() -> dict:
    run = timed_run("ok", 1.0, 1)
    run = replace(run, plan=(run.results[0].case,))
    return json.loads(json.dumps(run_json(run)))


def put(data: dict, path: str, value: object) -> None:
    """Set `value` at a dotted path (`results.0.case.batch_size`) of the run's JSON."""
    *parents, last = path.split(".")
    for part in parents:
        data = data[int(part)] if isinstance(data, list) else data.setdefault(part, {})
    if isinstance(data, list):
        data[int(last)] = value
    else:
        data[last] = value


BAD_VALUES = [
    (
        "results.0.case.batch_size",
        -5,
        "case.batch_size: expected an integer from 1 to 2147483647, got -5",
    ),
    (
        "results.0.case.batch_size",
        0,
        "case.batch_size: expected an integer from 1 to 2147483647, got 0",
    ),
    ("results.0.case.threads", 0, "case.threads: expected an integer from 1 to 1024"),
    ("results.0.case.params", {"size": -1}, "case.params.size: expected an integer > 0, got -1"),
    # a load's field on a case of the kind that has it (a time-to-train case, a DDP one)
    (
        "results.0.case",
        {
            **valid_run_data()["results"][0]["case"],
            "workload": "mnist-train",
            "mode": "train",
            "target_accuracy": 1.5,
        },
        "target_accuracy: expected a fraction in (0, 1]",
    ),
    (
        "results.0.case",
        {**valid_run_data()["results"][0]["case"], "mode": "train", "nproc": -2, "ddp": True},
        "case.nproc: expected an integer from 1 to 1024",
    ),
    # and on one of another kind, which has no place for it
    ("results.0.case.nproc", 2, "results[0].case.nproc: given, but no record is held here"),
    ("plan.0.batch_size", -1, "plan[0].batch_size: expected an integer from 1 to"),
    ("settings.repeat", 0, "settings.repeat: expected an integer from 1 to 100"),
    ("settings.min_time_s", -1.0, "settings.min_time_s: expected a number from 0 to 86400"),
    ("settings.seed", "1", "settings.seed: expected int, not str"),
    ("results.0.case.params", {"size": "4"}, "case.params.size: expected int, not str"),
    ("results.0.samples_ms", "1", "results[0].samples_ms: expected a list"),
    ("results.0.latency_ms.n", 2.5, "results[0].latency_ms.n: expected int, not float"),
    ("plan.0.torchrun_args", [1], "plan[0].torchrun_args[0]: expected str, not int"),
    ("results.0.throughput", math.nan, "results[0].throughput: nan is not finite"),
    ("results.0.latency_ms.median", math.inf, "latency_ms.median: inf is not finite"),
    ("results.0.samples_ms.3", RAW, "samples_ms[3]: inf is not finite"),  # 1e400
    ("results.0.details.loop_wall_s", -math.inf, "details.loop_wall_s: -inf is not finite"),
    ("env.ram_gb", math.nan, "env.ram_gb: nan is not finite"),
    ("results.0.throughput", -1.0, "throughput: -1.0 is negative"),
    ("results.0.samples_ms.0", -0.5, "samples_ms[0]: -0.5 is negative"),
    ("results.0.latency_ms.n", -3, "latency_ms.n: -3 is negative"),
    ("bogus", 1, "the run: unknown key 'bogus' (the keys of a run are id, "),
    ("results.0.bogus", 1, "results[0]: unknown key 'bogus' (not a key of a result"),
    ("results.0.case.bogus", 1, "results[0].case: unknown key 'bogus'"),
    (
        "results.0.latency_ms.bogus",
        1,
        "latency_ms: unknown key 'bogus' (the keys of latency statistics are median",
    ),
    ("settings.bogus", 1, "settings: unknown key 'bogus' (the keys of the settings are"),
    ("plan.0.bogus", 1, "plan[0]: unknown key 'bogus'"),
    ("results.0.details.bogus", 1, "details: unknown key 'bogus' (not a field of Details)"),
    ("results.0.details.check", {"note": "x", "bogus": 1}, "details.check: unknown key 'bogus'"),
    ("plan.0", [], "plan[0]: expected an object"),
    (
        "results.0.cpu_percent",
        RAW,
        "not a dlbench run (a number of thousands of digits)",
    ),  # 5,000 digits
]


@pytest.mark.parametrize(("path", "value", "says"), BAD_VALUES, ids=range(len(BAD_VALUES)))
def test_an_imported_run_is_validated_by_value(tmp_path, isolated_store, path, value, says):
    data = valid_run_data()
    put(data, path, value)
    raw = "1e400" if "samples_ms" in path else "9" * 5000
    (tmp_path / "run.json").write_text(json.dumps(data).replace(f'"{RAW}"', raw))
    assert_refused(cli("import", str(tmp_path / "run.json")), says)
    assert stored(isolated_store) == (0, 0)


def test_the_valid_run_the_bad_values_start_from_imports(tmp_path, isolated_store):
    (tmp_path / "run.json").write_text(json.dumps(valid_run_data()))
    assert cli("import", str(tmp_path / "run.json")).returncode == 0
    assert stored(isolated_store) == (1, 1)


RUN_FILES = sorted(
    [
        *(REPOSITORY / "results").glob("*/*.json"),
        *(REPOSITORY / "tests" / "fixtures").glob("*/*.json"),
    ]
)


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_and_older_run_files_still_import(path, isolated_store):
    proc = cli("import", str(path))
    assert proc.returncode == 0, proc.stderr
    assert stored(isolated_store)[0] == 1


def test_a_value_a_run_measured_but_that_is_not_finite_is_written_as_null(tmp_path):
    """A diverged loss and an output check of mismatched shapes (max_abs_diff inf) are
    written as null, so dlbench's own files import again."""
    run = timed_run("diverged", 1.0, 1)
    diverged = replace(run.results[0].details, final_loss=math.nan)
    run = with_result(run, 0, replace(run.results[0], max_abs_diff=math.inf, details=diverged))
    write_json(run, tmp_path / "run.json")
    assert "NaN" not in (tmp_path / "run.json").read_text()
    assert cli("import", str(tmp_path / "run.json")).returncode == 0
    assert cli("export", "diverged", "--json", str(tmp_path / "again.json")).returncode == 0
    again = read_json(tmp_path / "again.json").results[0]
    assert again.max_abs_diff is None and again.details.final_loss is None


BAD_ROWS = [  # (table, column, an SQL value, what the line says)
    ("results", "data", "'{not json'", "result 0: not valid JSON (Expecting property name"),
    ("results", "data", "CAST(x'ff' AS TEXT)", "result 0: not valid JSON (Expecting value"),
    ("results", "data", "x'00'", "result 0: not valid JSON (Expecting value"),  # a blob
    ("results", "data", "'[]'", "not a valid dlbench run (results[0]: expected an object)"),
    ("runs", "settings", "''", "its settings: not valid JSON (Expecting value at character 0)"),
    ("runs", "env", f"'{'9' * 5000}'", "its env: not valid JSON (a str dlbench cannot read"),
    ("runs", "plan", "'[{'", "its plan: not valid JSON"),
    ("runs", "command", "CAST(x'5bff' AS TEXT)", "its command: not valid JSON"),
]


@pytest.mark.parametrize(("table", "column", "value", "says"), BAD_ROWS, ids=range(len(BAD_ROWS)))
def test_a_store_row_holding_bad_json_is_one_clear_line(
    tmp_path, isolated_store, table, column, value, says
):
    write_json(timed_run("ok", 1.0, 1), tmp_path / "run.json")
    assert cli("import", str(tmp_path / "run.json")).returncode == 0
    with sqlite3.connect(isolated_store) as db:  # a damaged store, or a hand edit
        db.execute(f"UPDATE {table} SET {column}={value}")
    for command in (("show", "ok"), ("export", "ok", "--json", str(tmp_path / "out.json"))):
        proc = cli(*command)
        assert_refused(proc, says)
        assert proc.stderr.startswith(f"dlbench: error: store {isolated_store}, run 'ok'")
    assert stored(isolated_store) == (1, 1) and not (tmp_path / "out.json").exists()
