"""The SQLite store: round trip, refusal of newer stores, atomicity under SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from factories import sample_run

from dlbench.errors import UserError
from dlbench.results.store import open_store
from dlbench.results.store_location import default_location


def test_run_round_trips_through_the_store(tmp_path):
    run = sample_run()
    with open_store(tmp_path / "s.sqlite") as store:
        store.begin_run(run)
        for seq, result in enumerate(run.results):
            store.add_result(run.id, seq, result)
        store.finish_run(run.id, "2026-01-01T00:01:00+00:00")
        loaded = store.load_run(run.id)
    assert loaded == replace(run, finished_at="2026-01-01T00:01:00+00:00")


def test_default_path_follows_env(isolated_store):
    assert default_location() == isolated_store


def test_newer_store_schema_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    open_store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(UserError, match="newer than this dlbench"):
        open_store(path)


def test_a_file_that_is_not_a_store_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UserError, match="is not an SQLite database, or is damaged"):
        open_store(path)


def test_unknown_run_id_is_a_user_error(tmp_path):
    with open_store(tmp_path / "s.sqlite") as store, pytest.raises(UserError, match="no run 'x'"):
        store.load_run("x")


WRITER = """
import sys
from dlbench.results.store import Store, open_store
from factories import sample_run
run = sample_run()
store = open_store(sys.argv[1])
store.begin_run(run)
from dataclasses import replace
result = replace(run.results[0], samples_ms=[0.5] * 20000)  # big rows: a kill lands mid-write
store.add_result(run.id, 0, result)
print("ready", flush=True)  # one row is committed: a kill from here on has rows to keep
seq = 1
while True:
    store.add_result(run.id, seq, result)
    seq += 1
"""


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5])
@pytest.mark.integration
def test_killing_a_writer_never_leaves_a_corrupt_store(tmp_path, delay):
    path = tmp_path / "s.sqlite"
    # the tests' folder for factories, and the caller's path (a checkout's src/)
    paths = [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))},
    )
    assert writer.stdout.readline().strip() == "ready"
    time.sleep(delay)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = db.execute("SELECT seq, data FROM results ORDER BY seq").fetchall()
    assert rows, "the writer should have committed some rows before the kill"
    assert [seq for seq, _ in rows] == list(range(len(rows)))  # no gaps, no partial row
    for _, data in rows:
        assert len(json.loads(data)["samples_ms"]) == 20000
    with open_store(path) as store:
        assert len(store.load_run("r1").results) == len(rows)
