"""The embedded SQLite store every run is appended to.

A run's row is written when it starts and each result is committed as its
case finishes, each in its own transaction: a killed run keeps every case
that finished, and SQLite's journal guarantees no half-written row. WAL mode
lets a reader (`dlbench show`) open the store while a run writes to it.

A command that only reads opens the store read-only (SQLite's `mode=ro`): it
never creates, migrates or writes one, so a mistyped --db is an error and a
read-only store can be listed. Every SQLite error becomes one line naming the
store and what to do (`results/store_faults.py`); a lock held by another
process is waited for, up to $DLBENCH_LOCK_TIMEOUT seconds.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote

from dlbench.errors import UserError
from dlbench.results.record_dict import finite
from dlbench.results.records import STATUS_FAILED, Result, Run
from dlbench.results.run_ids import run_id_problem, shown
from dlbench.results.store_faults import (
    CANTOPEN,
    IOERR,
    READONLY,
    is_locked,
    lock_timeout,
    primary_code,
    store_fault,
)
from dlbench.results.store_location import StoreLocation, default_location
from dlbench.results.store_schema import MIGRATIONS, SCHEMA_V1, STORE_SCHEMA_VERSION

# A lock held longer than this is worth a line saying what we wait for.
LOCK_NOTICE_S = 1.0
# How long each wait inside SQLite lasts once we wait longer than that.
LOCK_RETRY_S = 0.2
# What SQLite says when it cannot make a WAL store's -shm file beside it.
NO_SHM = (CANTOPEN, READONLY, IOERR)

P = ParamSpec("P")
T = TypeVar("T")


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


def _guarded(method: Callable[Concatenate[Store, P], T]) -> Callable[Concatenate[Store, P], T]:
    """A store method whose SQLite errors become one line, after waiting out a lock."""

    @functools.wraps(method)
    def guarded(self: Store, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._patiently(lambda: method(self, *args, **kwargs))

    return guarded


class Store:
    """A connection to one store file; use as a context manager.

    `read_only` for commands that only read; `on_wait` hears one line when
    another process's lock holds the store up for more than a moment.
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        read_only: bool = False,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else default_location()
        self.read_only = read_only
        self._on_wait = on_wait
        self._timeout = lock_timeout()
        self._db = self._connect()
        try:
            self._patiently(self._prepare_for_reading if read_only else self._prepare_for_writing)
        except BaseException:
            self._db.close()
            raise

    def _connect(self, immutable: bool = False) -> sqlite3.Connection:
        if self.path.is_dir():
            raise UserError(f"store {self.path} is a folder; pass --db with a store file")
        wait = min(self._timeout, LOCK_NOTICE_S)
        try:
            if not self.read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                return _with_decoding(sqlite3.connect(self.path, timeout=wait))
            if not self.path.exists():
                raise UserError(
                    f"no store at {self.path}; run `dlbench run` (or `dlbench import`) first, "
                    "or pass --db with an existing store"
                )
            uri = f"file:{quote(str(self.path.absolute()))}?mode=ro"
            return _with_decoding(
                sqlite3.connect(uri + ("&immutable=1" if immutable else ""), uri=True, timeout=wait)
            )
        except sqlite3.DatabaseError as exc:
            raise store_fault(self.path, exc, wait, self.read_only) from None
        except OSError as exc:
            raise UserError(
                f"store {self.path}: cannot create its folder ({exc.strerror or exc}); "
                "pass --db with a store in a writable folder"
            ) from None

    def _patiently(self, work: Callable[[], T]) -> T:
        """`work`, waiting up to the lock timeout where another process holds the store's
        lock (saying so after a moment); any SQLite error ends as one line."""
        try:
            return work()
        except sqlite3.ProgrammingError:
            raise  # a misuse of the connection is a dlbench bug: keep its traceback
        except sqlite3.DatabaseError as exc:
            if not is_locked(exc) or self._timeout <= LOCK_NOTICE_S:
                waited = min(self._timeout, LOCK_NOTICE_S)
                raise store_fault(self.path, exc, waited, self.read_only) from None
        rest = self._timeout - LOCK_NOTICE_S
        if self._on_wait is not None:
            self._on_wait(
                f"waiting up to {rest:g} s more for store {self.path}: "
                "another process holds its lock"
            )
        # Short waits inside SQLite, retried here: Ctrl-C is seen between them, where
        # one long wait in SQLite's busy handler would hold it off until the end.
        deadline = time.monotonic() + rest
        self._busy_timeout(min(rest, LOCK_RETRY_S))
        try:
            while True:
                try:
                    return work()  # a guarded step is one transaction, rolled back on failure
                except sqlite3.ProgrammingError:
                    raise
                except sqlite3.DatabaseError as exc:
                    if not is_locked(exc) or time.monotonic() >= deadline:
                        raise store_fault(self.path, exc, self._timeout, self.read_only) from None
        finally:
            self._busy_timeout(min(self._timeout, LOCK_NOTICE_S))

    def _busy_timeout(self, seconds: float) -> None:
        self._db.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def _prepare_for_writing(self) -> None:
        """Create a new store, or bring an older one up to date in one transaction;
        an up-to-date store is not written to."""
        version = self._schema_version()  # first: another program's database is left as it is
        self._db.execute("PRAGMA journal_mode=WAL")  # a no-op on a store already in WAL
        self._db.execute("PRAGMA synchronous=FULL")
        if version == STORE_SCHEMA_VERSION:
            return
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            # read again under the write lock: another process may have just done it
            version = self._schema_version()
            if version is None:
                for statement in SCHEMA_V1.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                version = 1
            self._migrate(self._db, version)

    def _prepare_for_reading(self) -> None:
        """Check the store; read an older one through its upgrade, made in memory."""
        try:
            version = self._schema_version()
        except sqlite3.OperationalError as exc:
            # SQLite reads a WAL store through an -shm file beside it, which a read-only
            # folder cannot hold (CANTOPEN on a read-only file system, READONLY where
            # the folder's mode forbids it) nor a full disk size (IOERR). With nothing
            # in a -wal file either, nothing can be writing to the store (a writer needs
            # both), so it is read as immutable, which needs no -shm.
            if primary_code(exc) not in NO_SHM or self._wal_holds_writes():
                raise
            self._db.close()
            self._db = self._connect(immutable=True)
            version = self._schema_version()
        if version is None:
            raise UserError(
                f"store {self.path} is empty (no dlbench tables); run `dlbench run` first, "
                "or pass --db with another store"
            )
        if version < STORE_SCHEMA_VERSION:
            # A read never writes: the file keeps its schema until a command that
            # writes (run, import) opens it, and this reader gets the upgraded copy.
            memory = _with_decoding(sqlite3.connect(":memory:"))
            self._db.backup(memory)
            self._db.close()
            self._db = memory
            with memory:
                self._migrate(memory, version)

    def _wal_holds_writes(self) -> bool:
        wal = Path(f"{self.path}-wal")
        return wal.exists() and wal.stat().st_size > 0

    def _migrate(self, db: sqlite3.Connection, version: int) -> None:
        for step in range(version, STORE_SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                if isinstance(statement, str):
                    db.execute(statement)
                else:
                    statement(db)
        db.execute(
            "UPDATE meta SET value=? WHERE key='schema_version'", (str(STORE_SCHEMA_VERSION),)
        )

    def _schema_version(self) -> int | None:
        """The store's schema version; None for a file with no tables (a new store)."""
        tables = {
            row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not tables:
            return None
        if "meta" not in tables:
            raise UserError(
                f"store {self.path} is an SQLite database but not a dlbench store; "
                "pass --db with a dlbench store"
            )
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None or not str(row[0]).isdigit():
            raise UserError(f"store {self.path}: unreadable schema version {row and row[0]!r}")
        version = int(row[0])
        if version > STORE_SCHEMA_VERSION:
            raise UserError(
                f"store {self.path} has schema {version}, newer than this dlbench "
                f"reads ({STORE_SCHEMA_VERSION}); upgrade dlbench or use --db"
            )
        return version

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    @_guarded
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

    @_guarded
    def discard_run(self, run_id: str) -> None:
        """Forget a run that stored no result yet (its start failed after its row was written)."""
        with self._db:
            self._db.execute("DELETE FROM runs WHERE id=? AND n_cases=0", (run_id,))

    @_guarded
    def add_result(self, run_id: str, seq: int, result: Result) -> None:
        with self._db:
            self._insert_result(run_id, seq, result)

    @_guarded
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

    @_guarded
    def finish_run(self, run_id: str, finished_at: str, env: dict[str, Any] | None = None) -> None:
        """Mark the run complete; `env` replaces the stored one (ceilings measured in the run)."""
        with self._db:
            self._db.execute("UPDATE runs SET finished_at=? WHERE id=?", (finished_at, run_id))
            if env is not None:
                self._db.execute("UPDATE runs SET env=? WHERE id=?", (json.dumps(env), run_id))

    @_guarded
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

    @_guarded
    def import_run(self, run: Run) -> None:
        """Add a whole run (from another machine) in one transaction, or nothing."""
        with self._db:
            if self._db.execute("SELECT 1 FROM runs WHERE id=?", (run.id,)).fetchone():
                raise UserError(f"run {run.id} is already in store {self.path}; nothing imported")
            self._insert_run(run)
            for seq, result in enumerate(run.results):
                self._insert_result(run.id, seq, result)

    @_guarded
    def result_seqs(self, run_id: str) -> list[int]:
        """The plan indices that have a stored result, in order."""
        rows = self._db.execute("SELECT seq FROM results WHERE run_id=? ORDER BY seq", (run_id,))
        return [row[0] for row in rows]

    @_guarded
    def list_runs(self) -> list[RunSummary]:
        rows = self._db.execute(
            "SELECT id, started_at, finished_at, hostname, suite, n_cases, n_failed, "
            "dlbench_version FROM runs ORDER BY started_at, id"
        ).fetchall()
        return [RunSummary(*row) for row in rows]

    @_guarded
    def run_ids(self) -> list[str]:
        rows = self._db.execute("SELECT id FROM runs ORDER BY started_at, id").fetchall()
        return [row[0] for row in rows]

    @_guarded
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


def open_store(
    location: StoreLocation | None = None,
    *,
    read_only: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> Store:
    """The store at `location` (default: $DLBENCH_DB, else the user's data directory)."""
    return Store(location, read_only=read_only, on_wait=on_wait)


def _with_decoding(db: sqlite3.Connection) -> sqlite3.Connection:
    db.text_factory = _decoded
    return db


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
