"""The embedded SQLite store every run is appended to.

A run's row is written when it starts and each result is committed as its
case finishes, each in its own transaction: a killed run keeps every case
that finished, and SQLite's journal guarantees no half-written row. WAL mode
lets a reader (`dlbench show`) open the store while a run writes to it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from dlbench.errors import UserError
from dlbench.results.records import Result, Run

STORE_SCHEMA_VERSION = 1
DB_ENV_VAR = "DLBENCH_DB"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    schema_version INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    suite TEXT NOT NULL,
    hostname TEXT,
    command TEXT NOT NULL,
    settings TEXT NOT NULL,
    env TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    case_key TEXT NOT NULL,
    status TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""


def default_db_path() -> Path:
    """$DLBENCH_DB, else dlbench.sqlite in the user's data directory."""
    if os.environ.get(DB_ENV_VAR):
        return Path(os.environ[DB_ENV_VAR])
    from platformdirs import user_data_dir

    return Path(user_data_dir("dlbench", appauthor=False)) / "dlbench.sqlite"


class Store:
    """A connection to one store file; use as a context manager."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._init_schema()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"store {self.path}: not a usable dlbench store ({exc})") from None
        except OSError as exc:
            raise UserError(f"store {self.path}: {exc.strerror or exc}") from None

    def _init_schema(self) -> None:
        with self._db:
            self._db.executescript(SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self._db.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (str(STORE_SCHEMA_VERSION),)
                )
            elif not row[0].isdigit():
                raise UserError(f"store {self.path}: unreadable schema version {row[0]!r}")
            elif int(row[0]) > STORE_SCHEMA_VERSION:
                raise UserError(
                    f"store {self.path} has schema {row[0]}, newer than this dlbench "
                    f"reads ({STORE_SCHEMA_VERSION}); upgrade dlbench or use --db"
                )

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def begin_run(self, run: Run) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.id,
                    run.schema_version,
                    run.started_at,
                    run.finished_at,
                    run.suite,
                    run.env.get("hostname"),
                    json.dumps(run.command),
                    json.dumps(run.settings),
                    json.dumps(run.env),
                ),
            )

    def add_result(self, run_id: str, seq: int, result: Result) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO results VALUES (?, ?, ?, ?, ?)",
                (run_id, seq, result.case_key(), result.status, json.dumps(result.to_dict())),
            )

    def finish_run(self, run_id: str, finished_at: str) -> None:
        with self._db:
            self._db.execute("UPDATE runs SET finished_at=? WHERE id=?", (finished_at, run_id))

    def run_ids(self) -> list[str]:
        rows = self._db.execute("SELECT id FROM runs ORDER BY started_at, id").fetchall()
        return [row[0] for row in rows]

    def load_run(self, run_id: str) -> Run:
        row = self._db.execute(
            "SELECT id, schema_version, started_at, finished_at, suite, command, settings, env "
            "FROM runs WHERE id=?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise UserError(f"no run {run_id!r} in store {self.path}")
        results = [
            json.loads(data)
            for (data,) in self._db.execute(
                "SELECT data FROM results WHERE run_id=? ORDER BY seq", (run_id,)
            )
        ]
        data = {
            "id": row[0],
            "schema_version": row[1],
            "started_at": row[2],
            "finished_at": row[3],
            "suite": row[4],
            "command": json.loads(row[5]),
            "settings": json.loads(row[6]),
            "env": json.loads(row[7]),
            "results": results,
        }
        # The same checks as a file: a store can be old, hand-edited or from elsewhere.
        return Run.from_dict(data, f"store {self.path}, run {run_id}")
