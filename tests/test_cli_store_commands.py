"""Store migrations, import/export, runs listing, rerun and the pandas API."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import cli, dlbench
from factories import timed_run, with_result

from dlbench.errors import UserError
from dlbench.results.files import write_json
from dlbench.results.store import open_store
from dlbench.results.store_schema import SCHEMA_V1, STORE_SCHEMA_VERSION


def v1_store(path) -> None:
    """A store as dlbench wrote it at schema 1: one run, one ok and one failed result."""
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_V1)
    run = timed_run("old-run", 1.0, 1)
    env = json.dumps({**run.env.to_dict(), "dlbench": "0.0.9"})
    db.execute(
        "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
        ("old-run", 1, run.started_at, "2026-01-01T00:01:00+00:00", "s", "h1", "[]", "{}", env),
    )
    data = run.results[0].to_dict()
    db.execute(
        "INSERT INTO results VALUES (?,?,?,?,?)", ("old-run", 0, "k", "ok", json.dumps(data))
    )
    failed = {**data, "status": "failed", "error": "boom", "latency_ms": None}
    db.execute(
        "INSERT INTO results VALUES (?,?,?,?,?)", ("old-run", 1, "k2", "failed", json.dumps(failed))
    )
    db.commit()
    db.close()


def test_a_v1_store_is_migrated_and_keeps_its_runs(tmp_path):
    path = tmp_path / "old.sqlite"
    v1_store(path)
    with open_store(path) as store:
        [summary] = store.list_runs()
        run = store.load_run("old-run")
    assert (summary.cases, summary.failures, summary.dlbench_version) == (2, 1, "0.0.9")
    assert [r.status for r in run.results] == ["ok", "failed"]
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert int(version) == STORE_SCHEMA_VERSION


def _store_rows(path) -> tuple[int, int]:
    with sqlite3.connect(path) as db:
        return (
            db.execute("SELECT COUNT(*) FROM runs").fetchone()[0],
            db.execute("SELECT COUNT(*) FROM results").fetchone()[0],
        )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema_version": 99, "results": []}', "newer dlbench"),
        ('{"schema_version": 1, "id": "x"', "not valid JSON"),
        (
            '{"schema_version": 1, "id": "x", "started_at": "t", "suite": "s", "settings": {},'
            ' "env": {}, "results": [{"workload": 3}]}',
            "not a valid dlbench run",
        ),
    ],
)
def test_a_bad_import_is_refused_and_writes_nothing(tmp_path, isolated_store, content, message):
    write_json(timed_run("kept", 1.0, 1), tmp_path / "good.json")
    assert cli("import", str(tmp_path / "good.json")).returncode == 0
    before = _store_rows(isolated_store)
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = cli("import", str(bad))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert _store_rows(isolated_store) == before


def test_import_export_round_trip_and_duplicate_refused(tmp_path, isolated_store):
    original = timed_run("moved", 1.0, 1)
    write_json(original, tmp_path / "in.json")
    assert cli("import", str(tmp_path / "in.json")).returncode == 0
    again = cli("import", str(tmp_path / "in.json"))
    assert again.returncode == 2 and "already in store" in again.stderr
    assert (
        cli(
            "export",
            "moved",
            "--json",
            str(tmp_path / "out.json"),
            "--csv",
            str(tmp_path / "out.csv"),
        ).returncode
        == 0
    )
    exported = json.loads((tmp_path / "out.json").read_text())
    assert exported["results"] == json.loads((tmp_path / "in.json").read_text())["results"]
    listing = cli("runs")
    assert listing.returncode == 0 and "moved" in listing.stdout


def test_store_import_is_atomic(tmp_path):
    run = timed_run("atomic", 1.0, 1)
    run = with_result(run, len(run.results), run.results[0])
    with open_store(tmp_path / "s.sqlite") as store:
        store.import_run(run)
        with pytest.raises(UserError, match="already in store"):
            store.import_run(run)
        assert len(store.load_run("atomic").results) == 2


def test_load_runs_gives_a_dataframe(tmp_path, isolated_store):
    pytest.importorskip("pandas")
    import dlbench

    with open_store(isolated_store) as store:
        store.import_run(timed_run("r1", 1.0, 1))
        store.import_run(timed_run("r2", 2.0, 2))
    frame = dlbench.load_runs()
    assert list(frame["run_id"]) == ["r1", "r2"]
    assert frame["latency_ms_median"].iloc[1] == pytest.approx(2.0, rel=0.05)
    write_json(timed_run("f1", 3.0, 3), tmp_path / "f1.json")
    assert dlbench.load_runs([str(tmp_path / "f1.json")])["framework"].tolist() == ["torch"]


@pytest.mark.integration
def test_rerun_replays_the_cases_and_compares(tmp_path, isolated_store):
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "settings: {min_time: 0.05, min_iters: 20, warmup: 1}\n"
        'cases: [{workload: mlp, framework: "null", options: {sleep_ms: 2}}]\n'
    )
    first = dlbench("run", str(suite), "--json", str(tmp_path / "r.json"), "--quiet")
    assert first.returncode == 0, first.stderr
    run_id = json.loads((tmp_path / "r.json").read_text())["id"]
    proc = dlbench("rerun", run_id)
    assert proc.returncode == 0, proc.stderr
    assert f"A = {run_id}" in proc.stdout and "mlp / null (harness) [default]" in proc.stdout
    with open_store(isolated_store) as store:
        runs = store.list_runs()
    assert len(runs) == 2 and runs[1].cases == 1
