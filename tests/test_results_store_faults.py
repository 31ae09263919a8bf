"""The store when the machine refuses: a mistyped --db, a read-only store, a lock held
by another process, damaged pages and rows, a full disk, and --plots where no file can
go. Each fault is real (tests/faults.py): every command exits 2 with one line naming
the store and what to do, no traceback, and the store holds what it held."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import cli, spawn_dlbench
from factories import make_case, make_result, make_run, timed_run
from faults import fill, garbage_tail, held_lock, read_only, refused, small_disk
from test_cli_store_commands import v1_store

from dlbench.errors import RunBroken, UserError
from dlbench.launch.session import resume_run, run_plan
from dlbench.results.files import write_json
from dlbench.results.store import Store, open_store
from dlbench.results.store_faults import LOCK_TIMEOUT_ENV
from dlbench.results.store_schema import STORE_SCHEMA_VERSION
from dlbench.spec.case import Settings

SUITE = (
    "settings: {min_time: 0, min_iters: 1, warmup: 0}\n"
    'cases: [{workload: mlp, framework: "null"}]\n'
)


def stored(path: Path, *runs) -> Path:
    """A store at `path` holding `runs` (one run "kept" if none is given)."""
    with open_store(path) as store:
        for run in runs or (timed_run("kept", 1.0, 1),):
            store.import_run(run)
    return path


def run_ids(path: Path) -> list[str]:
    with open_store(path, read_only=True) as store:
        return store.run_ids()


@pytest.fixture
def new_run_file(tmp_path: Path) -> Path:
    """A good run file to import, outside the store's folder."""
    path = tmp_path / "files" / "new.json"
    write_json(timed_run("new", 2.0, 2), path)
    return path


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "files" / "suite.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(SUITE)
    return path


READS = [
    ["runs"],
    ["show", "kept"],
    ["export", "kept", "--json", "{tmp}/out.json"],
    ["compare", "kept", "kept"],
    ["report", "kept", "--html", "{tmp}/report.html"],
]


def _argv(argv: list[str], tmp_path: Path) -> list[str]:
    return [word.format(tmp=tmp_path) for word in argv]


@pytest.mark.parametrize("argv", READS, ids=lambda argv: argv[0])
def test_a_read_of_a_mistyped_store_is_an_error_that_creates_nothing(tmp_path, argv):
    db = tmp_path / "typo" / "stroe.sqlite"
    proc = cli(*_argv(argv, tmp_path), "--db", str(db))
    refused(proc, f"no store at {db}; run `dlbench run`")
    if argv != ["runs"]:  # a RUN was asked for: it may be a mistyped file name too
        refused(proc, f"{argv[1]!r} is neither a run file nor a run id: there is no store")
    assert not (tmp_path / "typo").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no report or export either


def test_the_notebook_api_refuses_a_mistyped_store_too(tmp_path):
    pytest.importorskip("pandas")
    import dlbench

    with pytest.raises(UserError, match="no store at"):
        dlbench.load_runs(db=tmp_path / "nothing.sqlite")
    assert not (tmp_path / "nothing.sqlite").exists()


@pytest.mark.parametrize("argv", READS, ids=lambda argv: argv[0])
def test_reads_leave_the_store_as_it_was(tmp_path, argv):
    db = stored(tmp_path / "store" / "s.sqlite")
    before = db.read_bytes()
    proc = cli(*_argv(argv, tmp_path), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert db.read_bytes() == before


def test_an_older_store_is_read_through_its_upgrade_and_upgraded_by_a_write(tmp_path, new_run_file):
    db = tmp_path / "old.sqlite"
    v1_store(db)
    before = db.read_bytes()
    listing = cli("runs", "--db", str(db))
    assert listing.returncode == 0 and "old-run" in listing.stdout, listing.stderr
    shown = cli("show", "old-run", "--db", str(db))
    assert shown.returncode == 0 and "mlp" in shown.stdout, shown.stderr
    assert db.read_bytes() == before  # still schema 1: a read never migrates
    assert cli("import", str(new_run_file), "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as raw:
        version = raw.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    assert int(version[0]) == STORE_SCHEMA_VERSION
    assert sorted(run_ids(db)) == ["new", "old-run"]


@pytest.mark.parametrize("part", ["file", "folder"])
@pytest.mark.integration
def test_a_read_only_store_is_read_and_refuses_writes(tmp_path, part, new_run_file, suite):
    db = stored(tmp_path / "store" / "s.sqlite")
    before = db.read_bytes()
    with read_only(db if part == "file" else db.parent):
        listing = cli("runs", "--db", str(db))
        assert listing.returncode == 0 and "kept" in listing.stdout, listing.stderr
        assert cli("show", "kept", "--db", str(db)).returncode == 0
        message = f"store {db} cannot be written: the file or its folder is read-only"
        refused(cli("import", str(new_run_file), "--db", str(db)), message)
        refused(cli("run", str(suite), "--quiet", "--db", str(db)), message, alone=False)
    assert db.read_bytes() == before
    assert run_ids(db) == ["kept"]


def test_a_write_waits_a_bounded_time_for_a_held_lock_then_stores_nothing(
    tmp_path, monkeypatch, new_run_file, suite
):
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "0.3")
    db = stored(tmp_path / "s.sqlite")
    started = time.monotonic()
    with held_lock(db):
        message = f"store {db} is locked by another process"
        refused(cli("import", str(new_run_file), "--db", str(db)), message)
        # not "not a usable store": a run that never started stores nothing
        refused(cli("run", str(suite), "--quiet", "--db", str(db)), message, alone=False)
    assert time.monotonic() - started < 10
    assert run_ids(db) == ["kept"]


def test_a_long_wait_for_the_lock_is_announced_before_it_fails(tmp_path, monkeypatch, new_run_file):
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "1.5")
    db = stored(tmp_path / "s.sqlite")
    with held_lock(db):
        proc = cli("import", str(new_run_file), "--db", str(db))
    refused(proc, "gave up after 1.5 s", alone=False)
    waiting, _ = proc.stderr.splitlines()
    assert waiting == (
        f"dlbench: waiting up to 0.5 s more for store {db}: another process holds its lock"
    )
    assert run_ids(db) == ["kept"]


def test_a_lock_released_while_waiting_lets_the_write_through(tmp_path, monkeypatch, new_run_file):
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "20")
    db = stored(tmp_path / "s.sqlite")
    with held_lock(db) as other:
        release = threading.Timer(1.5, lambda: other.execute("ROLLBACK"))
        release.start()
        proc = cli("import", str(new_run_file), "--db", str(db))
        release.join()
    assert proc.returncode == 0, proc.stderr
    assert "waiting up to 19 s more" in proc.stderr
    assert run_ids(db) == ["kept", "new"]


@pytest.mark.integration
def test_ctrl_c_while_waiting_for_a_lock_exits_130_at_once_and_stores_nothing(
    tmp_path, new_run_file
):
    db = stored(tmp_path / "s.sqlite")
    env = {**os.environ, LOCK_TIMEOUT_ENV: "60"}
    with held_lock(db):
        proc = spawn_dlbench("import", str(new_run_file), "--db", str(db), env=env)
        assert "waiting up to 59 s more" in proc.stderr.readline()
        time.sleep(0.5)  # into the wait itself, not the line's last microseconds
        proc.send_signal(signal.SIGINT)
        asked = time.monotonic()
        rest = proc.stderr.read()  # to its end: the command has exited
        assert time.monotonic() - asked < 5  # not the rest of the 60 s
    assert proc.wait() == 130 and rest == "dlbench: interrupted\n", rest
    assert run_ids(db) == ["kept"]


def test_reads_go_on_while_another_process_holds_the_write_lock(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "0.3")
    db = stored(tmp_path / "s.sqlite")
    with held_lock(db):
        listing = cli("runs", "--db", str(db))
        assert listing.returncode == 0 and "kept" in listing.stdout, listing.stderr
        assert cli("show", "kept", "--db", str(db)).returncode == 0


def test_a_bad_lock_timeout_is_one_line(tmp_path, monkeypatch):
    db = stored(tmp_path / "s.sqlite")
    monkeypatch.setenv(LOCK_TIMEOUT_ENV, "soon")
    refused(cli("runs", "--db", str(db)), f"{LOCK_TIMEOUT_ENV} must be a number of seconds")


def test_a_store_with_garbage_in_its_last_pages_is_named_damaged(tmp_path):
    db = tmp_path / "s.sqlite"
    # runs big enough (their env) that the runs table reaches the file's last pages
    stored(
        db,
        *(
            make_run([make_result()], id=f"run-{i:02d}", env={"note": "x" * 6000})
            for i in range(12)
        ),
    )
    garbage_tail(db, 4)
    before = db.read_bytes()
    message = f"store {db} is damaged (database disk image is malformed); keep a copy"
    for argv in (["runs"], ["show", "run-11"], ["export", "run-11", "--json", "x.json"]):
        line = refused(cli(*argv, "--db", str(db)), message)
        assert f"sqlite3 {db} .recover" in line
    assert db.read_bytes() == before


def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_was(tmp_path, new_run_file, suite):
    db = tmp_path / "s.sqlite"
    db.write_bytes(b"these are someone's notes, not a store\n" * 200)
    before = db.read_bytes()
    message = f"store {db} is not an SQLite database, or is damaged (file is not a database)"
    refused(cli("runs", "--db", str(db)), message)
    refused(cli("import", str(new_run_file), "--db", str(db)), message)
    refused(cli("run", str(suite), "--quiet", "--db", str(db)), message, alone=False)
    assert db.read_bytes() == before


def test_another_programs_database_is_not_taken_over(tmp_path, new_run_file):
    db = tmp_path / "photos.sqlite"
    with sqlite3.connect(db) as raw:
        raw.execute("CREATE TABLE photos (name TEXT)")
    before = db.read_bytes()
    message = f"store {db} is an SQLite database but not a dlbench store"
    refused(cli("runs", "--db", str(db)), message)
    refused(cli("import", str(new_run_file), "--db", str(db)), message)
    assert db.read_bytes() == before


def test_an_empty_file_is_no_store_to_read(tmp_path):
    db = tmp_path / "s.sqlite"
    db.touch()
    refused(cli("runs", "--db", str(db)), f"store {db} is empty (no dlbench tables)")
    assert db.read_bytes() == b""


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("data", '{"status": "ok", "case"', "run 'kept', result 0: not valid JSON"),
        ("data", None, "run 'kept', result 0: not valid JSON"),
        ("data", '{"status": 3}', "not a valid dlbench run"),
    ],
)
def test_a_damaged_row_is_one_line_naming_it(tmp_path, column, value, message):
    db = stored(tmp_path / "s.sqlite")
    with sqlite3.connect(db) as raw:
        raw.execute("DROP TABLE results")  # the same table, without its NOT NULL guard
        raw.execute(
            "CREATE TABLE results (run_id TEXT, seq INTEGER, case_key TEXT, status TEXT, "
            "data TEXT, PRIMARY KEY (run_id, seq))"
        )
        raw.execute(f"INSERT INTO results (run_id, seq, {column}) VALUES ('kept', 0, ?)", (value,))
    refused(cli("show", "kept", "--db", str(db)), message)
    listing = cli("runs", "--db", str(db))
    assert listing.returncode == 0 and "kept" in listing.stdout


class FillingRunner:
    """Stands in for run_case; before its second case it lets the store grow no
    further (SQLite's max_page_count on the store's own connection), so the next
    write meets SQLite's real SQLITE_FULL, as on a full disk."""

    def __init__(self, store: Store | None = None) -> None:
        self.store = store
        self.ran: list[str] = []

    def __call__(self, case, settings, on_note, files_dir):
        if self.store is not None and len(self.ran) == 1:
            db = self.store._db  # the limit is per connection: only dlbench's own will do
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            db.execute(f"PRAGMA max_page_count = {pages}")
        self.ran.append(case.workload)
        return replace(make_result(samples_ms=[0.5] * 5000), case=case)


def test_a_store_full_in_the_middle_of_a_run_keeps_its_cases_and_resumes(tmp_path):
    cases = [make_case(workload=name) for name in ("mlp", "gemm", "add")]
    db = tmp_path / "s.sqlite"
    with open_store(db) as store:
        with pytest.raises(RunBroken, match=f"store {db}: the disk is full") as broken:
            run_plan("t", cases, Settings(), store, runner=FillingRunner(store))
        run = broken.value.run
        assert [r.case.workload for r in run.results] == ["mlp"]  # what the store holds
    with open_store(db) as store:  # a new connection: the disk has room again
        kept = store.load_run(run.id)
        assert store.result_seqs(run.id) == [0] and kept.finished_at is None
        runner = FillingRunner()
        resume_run(kept, cases, Settings(), store, runner=runner)
        assert runner.ran == ["gemm", "add"]
        assert store.result_seqs(run.id) == [0, 1, 2]
        assert store.load_run(run.id).finished_at is not None


@pytest.mark.integration
def test_a_full_disk_at_the_start_stores_nothing(tmp_path, new_run_file, suite):
    with small_disk(tmp_path / "disk") as disk:
        db = stored(disk / "s.sqlite")
        filler = fill(disk)
        message = f"store {db}: the disk is full"
        refused(cli("import", str(new_run_file), "--db", str(db)), message)
        refused(cli("run", str(suite), "--quiet", "--db", str(db)), message, alone=False)
        new = disk / "new.sqlite"
        refused(cli("run", str(suite), "--quiet", "--db", str(new)), f"store {new}: the disk")
        listing = cli("runs", "--db", str(db))  # a read needs no space
        assert listing.returncode == 0 and "kept" in listing.stdout, listing.stderr
        filler.unlink()
        assert run_ids(db) == ["kept"]


@pytest.mark.integration
def test_a_run_file_that_cannot_be_written_at_the_start_stores_nothing(tmp_path, suite):
    db, out = tmp_path / "s.sqlite", tmp_path / "out"
    out.mkdir()
    with read_only(out):
        proc = cli("run", str(suite), "--quiet", "--json", str(out / "r.json"), "--db", str(db))
    refused(proc, f"cannot write {out / 'r.json'}: ", alone=False)
    assert run_ids(db) == []  # the run's row, written first, was taken back


@pytest.mark.integration
def test_plots_where_no_file_can_go_are_refused_before_any_work(tmp_path, suite):
    db = stored(tmp_path / "s.sqlite")
    a_file = tmp_path / "plots.png"
    a_file.write_bytes(b"not a folder")
    sweep = ["run", "-w", "mlp", "-f", "null", "--sweep", "batch=1,2", "--quiet"]
    for argv in (["report", "kept"], ["show", "kept"], sweep):
        proc = cli(*argv, "--plots", str(a_file), "--db", str(db))
        refused(proc, f"--plots {a_file} is a file; give a folder")
    locked = tmp_path / "locked"
    locked.mkdir()
    with read_only(locked):
        for argv in (["report", "kept"], ["show", "kept"], sweep):
            proc = cli(*argv, "--plots", str(locked / "plots"), "--db", str(db))
            refused(proc, f"--plots {locked / 'plots'}: {locked} is ")
    assert not (locked / "plots").exists() and a_file.read_bytes() == b"not a folder"
    assert run_ids(db) == ["kept"]  # the sweep never ran
