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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.errors import UserError
from dlbench.results.record_dict import finite
from dlbench.results.records import STATUS_FAILED, Result, Run
from dlbench.results.run_ids import run_id_problem, shown
from dlbench.results.store_schema import MIGRATIONS, SCHEMA_V1, STORE_SCHEMA_VERSION

DB_ENV_VAR = "DLBENCH_DB"


@dataclass(frozen=True)
class RunSummary:
    """One line of `dlbench runs`."""

    id: str
    started_at: str
    finished_at: str | None
    hostname: str | None
    suite: str
    cases: int
    failures: int
    dlbench_version: str | None


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
            self._db.text_factory = _decoded
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._init_schema()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"store {self.path}: not a usable dlbench store ({exc})") from None
        except OSError as exc:
            raise UserError(f"store {self.path}: {exc.strerror or exc}") from None

    def _init_schema(self) -> None:
        """Create a new store, or bring an older one up to date in one transaction."""
        with self._db:
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master")}
            if "meta" not in tables:
                self._db.executescript(f"BEGIN; {SCHEMA_V1}")
            version = self._schema_version()
            if version > STORE_SCHEMA_VERSION:
                raise UserError(
                    f"store {self.path} has schema {version}, newer than this dlbench "
                    f"reads ({STORE_SCHEMA_VERSION}); upgrade dlbench or use --db"
                )
            for step in range(version, STORE_SCHEMA_VERSION):
                for statement in MIGRATIONS[step]:
                    if isinstance(statement, str):
                        self._db.execute(statement)
                    else:
                        statement(self._db)
            self._db.execute(
                "UPDATE meta SET value=? WHERE key='schema_version'", (str(STORE_SCHEMA_VERSION),)
            )

    def _schema_version(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None or not row[0].isdigit():
            raise UserError(f"store {self.path}: unreadable schema version {row and row[0]!r}")
        return int(row[0])

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def begin_run(self, run: Run) -> None:
        with self._db:
            self._insert_run(run)

    def _insert_run(self, run: Run) -> None:
        # Every run enters the store here, made (begin_run) or imported: its id follows
        # the rule whoever built the Run, since files will be named after it.
        problem = run_id_problem(run.id)
        if problem is not None:
            raise UserError(f"run id {problem}; nothing stored in {self.path}")
        self._db.execute(
            "INSERT INTO runs (id, schema_version, started_at, finished_at, suite, hostname, "
            "command, settings, env, dlbench_version, plan) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.id,
                run.schema_version,
                run.started_at,
                run.finished_at,
                run.suite,
                run.env.get("hostname"),
                json.dumps(run.command),
                json.dumps(finite(run.settings)),  # as in the run's JSON (Run.to_dict)
                json.dumps(finite(run.env)),
                run.env.get("dlbench"),
                json.dumps(finite(run.plan)),
            ),
        )

    def add_result(self, run_id: str, seq: int, result: Result) -> None:
        with self._db:
            self._insert_result(run_id, seq, result)

    def replace_result(self, run_id: str, seq: int, result: Result) -> None:
        """The case at plan index `seq` measured again (one more --repeat process)."""
        with self._db:
            self._db.execute(
                "UPDATE results SET case_key=?, status=?, data=? WHERE run_id=? AND seq=?",
                (result.case.key(), result.status, json.dumps(result.to_dict()), run_id, seq),
            )

    def _insert_result(self, run_id: str, seq: int, result: Result) -> None:
        self._db.execute(
            "INSERT INTO results (run_id, seq, case_key, status, data) VALUES (?, ?, ?, ?, ?)",
            (run_id, seq, result.case.key(), result.status, json.dumps(result.to_dict())),
        )
        self._db.execute(
            "UPDATE runs SET n_cases = n_cases + 1, n_failed = n_failed + ? WHERE id = ?",
            (1 if result.status == STATUS_FAILED else 0, run_id),
        )

    def finish_run(self, run_id: str, finished_at: str, env: dict[str, Any] | None = None) -> None:
        """Mark the run complete; `env` replaces the stored one (ceilings measured in the run)."""
        with self._db:
            self._db.execute("UPDATE runs SET finished_at=? WHERE id=?", (finished_at, run_id))
            if env is not None:
                self._db.execute("UPDATE runs SET env=? WHERE id=?", (json.dumps(env), run_id))

    def latest_ceilings(self, hostname: str | None) -> dict[str, Any] | None:
        """The ceilings of this machine's newest complete `ceilings` run, if any."""
        from dlbench.results.ceilings import CEILING_SUITE, ceilings_from_results

        row = self._db.execute(
            "SELECT id FROM runs WHERE suite=? AND hostname IS ? AND finished_at IS NOT NULL "
            "ORDER BY started_at DESC, id DESC LIMIT 1",
            (CEILING_SUITE, hostname),
        ).fetchone()
        if row is None:
            return None
        found = ceilings_from_results(self.load_run(row[0]).results, row[0])
        return found if found["values"] else None

    def import_run(self, run: Run) -> None:
        """Add a whole run (from another machine) in one transaction, or nothing."""
        with self._db:
            if self._db.execute("SELECT 1 FROM runs WHERE id=?", (run.id,)).fetchone():
                raise UserError(f"run {run.id} is already in store {self.path}; nothing imported")
            self._insert_run(run)
            for seq, result in enumerate(run.results):
                self._insert_result(run.id, seq, result)

    def result_seqs(self, run_id: str) -> list[int]:
        """The plan indices that have a stored result, in order."""
        rows = self._db.execute("SELECT seq FROM results WHERE run_id=? ORDER BY seq", (run_id,))
        return [row[0] for row in rows]

    def list_runs(self) -> list[RunSummary]:
        rows = self._db.execute(
            "SELECT id, started_at, finished_at, hostname, suite, n_cases, n_failed, "
            "dlbench_version FROM runs ORDER BY started_at, id"
        ).fetchall()
        return [RunSummary(*row) for row in rows]

    def run_ids(self) -> list[str]:
        rows = self._db.execute("SELECT id FROM runs ORDER BY started_at, id").fetchall()
        return [row[0] for row in rows]

    def load_run(self, run_id: str) -> Run:
        row = self._db.execute(
            "SELECT id, schema_version, started_at, finished_at, suite, command, settings, env, "
            "plan FROM runs WHERE id=?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise UserError(f"no run {run_id!r} in store {self.path}")
        where = f"store {self.path}, run {shown(run_id)}"
        rows = self._db.execute(
            "SELECT seq, data FROM results WHERE run_id=? ORDER BY seq", (run_id,)
        )
        data = {
            "id": row[0],
            "schema_version": row[1],
            "started_at": row[2],
            "finished_at": row[3],
            "suite": row[4],
            "command": stored_json(row[5], f"{where}, its command"),
            "settings": stored_json(row[6], f"{where}, its settings"),
            "env": stored_json(row[7], f"{where}, its env"),
            "plan": stored_json(row[8] or "[]", f"{where}, its plan"),
            "results": [stored_json(text, f"{where}, result {seq}") for seq, text in rows],
        }
        # The same checks as a file: a store can be old, hand-edited or from elsewhere.
        return Run.from_dict(data, where)


def _decoded(data: bytes) -> str:
    """A text column as str. sqlite3 raises on bytes that are not UTF-8 (a damaged or
    hand-edited store) wherever a row is read; replaced, they reach the checks instead."""
    return data.decode("utf-8", errors="replace")


def stored_json(text: Any, where: str) -> Any:
    """A JSON column read back. dlbench wrote JSON there; anything else (a damaged store,
    a hand edit) is refused in one line naming the row, not met as a traceback."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"{exc.msg} at character {exc.pos}"
    except (TypeError, ValueError, RecursionError):  # not text; thousands of digits; too deep
        problem = f"a {type(text).__name__} dlbench cannot read as JSON"
    raise UserError(f"{where}: not valid JSON ({problem}); the store was damaged or edited")
