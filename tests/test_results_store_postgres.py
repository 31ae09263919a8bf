"""The shared store on a real PostgreSQL server (`.ci/postgres start` starts one on
the loopback address and CI passes its URL in $DLBENCH_TEST_POSTGRES): the same
schema and migrations as SQLite, every command, concurrent writers, and
credentials that are never stored or printed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from urllib.parse import urlsplit

import pytest
from conftest import cli, dlbench, free_port
from factories import make_result, make_run, timed_run

from dlbench.errors import UserError
from dlbench.results.store import open_store
from dlbench.results.store_location import PostgresUrl, redacted_argv, without_password
from dlbench.results.store_schema import SCHEMA_V1, STORE_SCHEMA_VERSION


def _password(url: str) -> str:
    password = urlsplit(url).password
    assert password, "the test server's URL carries its password, so its absence can be checked"
    return password


def _connect(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def test_a_run_round_trips_through_a_postgres_store(postgres_url):
    run = timed_run("pg-run", 2.0, 7)
    with open_store(PostgresUrl(postgres_url)) as store:
        store.import_run(run)
        [summary] = store.list_runs()
        loaded = store.load_run("pg-run")
    assert (summary.id, summary.cases, summary.failures) == ("pg-run", len(run.results), 0)
    assert loaded.to_dict() == run.to_dict()
    with _connect(postgres_url) as db:
        version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert int(version) == STORE_SCHEMA_VERSION


@pytest.mark.integration
def test_every_command_works_on_a_postgres_store(postgres_url, monkeypatch, tmp_path):
    monkeypatch.setenv("DLBENCH_DB", postgres_url)
    fast = ("-w", "mlp", "-f", "null", "--min-time", "0", "--min-iters", "3", "-q")
    made = dlbench("run", *fast, "--json", str(tmp_path / "run.json"))
    assert made.returncode == 0, made.stderr
    run_id = json.loads((tmp_path / "run.json").read_text())["id"]
    listed = cli("runs")
    assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
    assert without_password(postgres_url).split("?")[0] in listed.stdout.replace("\n", "")
    shown = cli("show", run_id)
    assert shown.returncode == 0 and "mlp" in shown.stdout, shown.stderr
    exported = cli("export", run_id, "--csv", str(tmp_path / "run.csv"))
    assert exported.returncode == 0 and "mlp" in (tmp_path / "run.csv").read_text()
    bmf = cli("export", run_id, "--format", "bmf", "--out", str(tmp_path / "bmf.json"))
    assert bmf.returncode == 0 and json.loads((tmp_path / "bmf.json").read_text())
    compared = cli("compare", run_id, run_id)
    assert compared.returncode == 0, compared.stderr
    page = cli("report", run_id, "--html", str(tmp_path / "page.html"))
    assert page.returncode == 0 and "<svg" in (tmp_path / "page.html").read_text()
    again = dlbench("rerun", run_id)
    assert again.returncode == 0, again.stderr
    if importlib.util.find_spec("otava") is not None:  # installed apart (.ci/run)
        history = cli("history", "adhoc")
        assert history.returncode == 0 and "in time order" in history.stdout, history.stderr
    # a run file moves between the two kinds of store, both ways
    sqlite_store = tmp_path / "local.sqlite"
    assert cli("export", run_id, "--json", str(tmp_path / "out.json")).returncode == 0
    assert cli("import", str(tmp_path / "out.json"), "--db", str(sqlite_store)).returncode == 0
    with open_store(sqlite_store, read_only=True) as local:
        assert local.load_run(run_id).to_dict() == json.loads((tmp_path / "run.json").read_text())
    with open_store(PostgresUrl(postgres_url), read_only=True) as shared:
        assert len(shared.list_runs()) == 2  # the run and its rerun


WRITER = textwrap.dedent(
    """
    import sys
    from factories import make_result, make_run
    from dlbench.results.store import open_store
    from dlbench.results.store_location import PostgresUrl

    url, writer, runs, results = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for r in range(runs):
        run = make_run([], id=f"w{writer}-r{r}", suite="fleet")
        with open_store(PostgresUrl(url)) as store:  # each opens it, as each machine does
            store.begin_run(run)
            for seq in range(results):
                store.add_result(run.id, seq, make_result(workload=f"case{seq}"))
            store.finish_run(run.id, "2026-11-24T00:00:00+00:00")
    """
)


@pytest.mark.integration
def test_concurrent_writers_lose_nothing(postgres_url, tmp_path):
    """Four processes open a new store together (racing to create its tables) and
    write runs and results at once: every row arrives, and every run's count is right."""
    writers, runs, results = 4, 3, 15
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env_path = f"{tmp_path}:{__import__('pathlib').Path(__file__).parent}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), postgres_url, str(w), str(runs), str(results)],
            env={**__import__("os").environ, "PYTHONPATH": env_path},
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * writers, errors
    with open_store(PostgresUrl(postgres_url), read_only=True) as store:
        summaries = store.list_runs()
        loaded = store.load_run("w3-r2")
    assert len(summaries) == writers * runs
    assert {s.cases for s in summaries} == {results}
    assert [r.case.workload for r in loaded.results] == [f"case{i}" for i in range(results)]
    with _connect(postgres_url) as db:
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == writers * runs * results


@pytest.mark.integration
def test_the_password_is_never_stored_or_printed(postgres_url, monkeypatch, tmp_path):
    password = _password(postgres_url)
    made = dlbench(
        "run", "-w", "mlp", "-f", "null", "--min-time", "0", "--min-iters", "3",
        "--db", postgres_url, "--json", str(tmp_path / "run.json"),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert password not in made.stdout + made.stderr
    stored = (tmp_path / "run.json").read_text()
    assert password not in stored
    command = json.loads(stored)["command"]
    assert without_password(postgres_url) in command  # kept, so the run says where it went
    with _connect(postgres_url) as db:
        rows = db.execute("SELECT command, settings, env, plan FROM runs").fetchall()
        data = db.execute("SELECT data FROM results").fetchall()
    assert rows and all(password not in text for row in rows for text in row)
    assert all(password not in row[0] for row in data)
    # a wrong password: one line, naming the store, without either password
    wrong = postgres_url.replace(password, "not-the-password")
    refused = cli("runs", "--db", wrong)
    assert refused.returncode == 2
    assert "cannot connect to store" in refused.stderr and "authentication" in refused.stderr
    assert "not-the-password" not in refused.stderr and password not in refused.stderr
    assert refused.stderr.count("\n") == 1
    # libpq's own variable instead of the URL's password
    monkeypatch.setenv("PGPASSWORD", password)
    listed = cli("runs", "--db", without_password(postgres_url))
    assert listed.returncode == 0 and password not in listed.stdout + listed.stderr


@pytest.mark.integration
def test_passwords_are_cut_from_urls_and_command_lines():
    url = "postgresql://ana:s3cret@db.example:5432/bench?sslmode=require&password=other"
    assert without_password(url) == "postgresql://ana@db.example:5432/bench?sslmode=require"
    argv = ["dlbench", "runs", "--db", url, f"--db={url}", "postgres://x:yz@h/d"]
    shown = " ".join(redacted_argv(argv))
    assert "s3cret" not in shown and "other" not in shown and "yz" not in shown
    assert shown.count("ana@db.example:5432/bench") == 2
    assert repr(PostgresUrl(url)).count("s3cret") == 0
    # a URL urlsplit refuses (a bad IPv6 host) is still one line without its password
    for where in ("--db", "DLBENCH_DB"):
        bad = "postgresql://ana:s3cretPW@[::1/db?password=other"
        refused = cli("runs", "--db", bad) if where == "--db" else _runs_with_env(bad)
        assert refused.returncode == 2, refused.stderr
        assert "not a URL" in refused.stderr and refused.stderr.count("\n") == 1
        assert "s3cretPW" not in refused.stderr and "other" not in refused.stderr


def _runs_with_env(db: str):
    import os

    return dlbench("runs", env={**os.environ, "DLBENCH_DB": db})


def test_an_unreachable_server_is_one_line():
    url = f"postgresql://nobody:pw1234@127.0.0.1:{free_port()}/nothing"
    refused = cli("runs", "--db", url)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("dlbench: error: cannot connect to store postgresql://nobody@")
    assert "pw1234" not in refused.stderr and refused.stderr.count("\n") == 1


def test_a_database_of_another_program_is_left_alone(postgres_url):
    with _connect(postgres_url) as db:
        db.execute("CREATE TABLE invoices (id INTEGER)")
    refused = cli("import", "--db", postgres_url, "nothing.json")
    assert refused.returncode == 2
    with pytest.raises(UserError, match="is a PostgreSQL database but not a dlbench store"):
        open_store(PostgresUrl(postgres_url))
    with _connect(postgres_url) as db:
        tables = db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema=current_schema()"
        ).fetchall()
    assert tables == [("invoices",)]


def test_a_schema_1_store_is_refused_by_a_reader_and_migrated_by_a_writer(postgres_url):
    """The SQLite store's migrations, run by PostgreSQL: a store made at schema 1."""
    run = timed_run("old-run", 1.0, 1)
    data = run.results[0].to_dict()
    with _connect(postgres_url) as db:
        for statement in SCHEMA_V1.split(";"):
            if statement.strip():
                db.execute(statement)
        env = json.dumps({**run.env.to_dict(), "dlbench": "0.0.9"})
        db.execute(
            "INSERT INTO runs VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            ("old-run", 1, run.started_at, "2026-01-01T00:01:00+00:00", "s", "h1", "[]", "{}", env),
        )
        failed = {**data, "status": "failed", "error": "boom", "latency_ms": None}
        for seq, (status, result) in enumerate([("ok", data), ("failed", failed)]):
            db.execute(
                "INSERT INTO results VALUES (%s,%s,%s,%s,%s)",
                ("old-run", seq, f"k{seq}", status, json.dumps(result)),
            )
    read = cli("runs", "--db", postgres_url)
    assert read.returncode == 2 and "has schema 1, older" in read.stderr
    with open_store(PostgresUrl(postgres_url)) as store:  # a writer upgrades it
        [summary] = store.list_runs()
        upgraded = store.load_run("old-run")
    assert (summary.cases, summary.failures, summary.dlbench_version) == (2, 1, "0.0.9")
    assert [r.status for r in upgraded.results] == ["ok", "failed"]
    assert cli("runs", "--db", postgres_url).returncode == 0


def test_a_read_only_session_writes_nothing(postgres_url):
    with open_store(PostgresUrl(postgres_url)) as store:
        store.begin_run(make_run([], id="kept"))
    reader = open_store(PostgresUrl(postgres_url), read_only=True)
    with reader, pytest.raises(UserError, match="read-only transaction"):
        reader.add_result("kept", 0, make_result())
    with open_store(PostgresUrl(postgres_url), read_only=True) as reader:
        assert [s.cases for s in reader.list_runs()] == [0]
