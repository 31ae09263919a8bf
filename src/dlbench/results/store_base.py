"""What every store does, whatever database holds it: the queries, written once.

Two kinds share this code and one schema (`results/store_schema.py`): an
embedded SQLite file, the default (`results/store_sqlite.py`), and a
PostgreSQL database many machines write to at once (`results/store_postgres.py`).
Each kind supplies its connection, its transactions and how its errors
become one line; the queries here are written once, in the SQL both speak,
with `?` placeholders.

A run's row is written when it starts and each result is committed as its
case finishes, each in its own transaction: a killed run keeps every case
that finished. A command that only reads opens the store read-only: it never
creates, migrates or writes one.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Concatenate, NoReturn, ParamSpec, TypeVar

from dlbench.errors import UserError
from dlbench.results.env import Ceilings, Fingerprint
from dlbench.results.records import STATUS_FAILED, Result, Run
from dlbench.results.run_ids import run_id_problem, shown
from dlbench.results.store_faults import lock_timeout
from dlbench.results.store_schema import (
    MIGRATIONS,
    SCHEMA_V1,
    STORE_SCHEMA_VERSION,
    Executes,
)
from dlbench.spec.record_dict import finite
from dlbench.untyped import JSONValue

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
    """A store method whose database errors become one line (after waiting out a lock)."""

    @functools.wraps(method)
    def guarded(self: Store, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._patiently(lambda: method(self, *args, **kwargs))

    return guarded


class Store(ABC):
    """A connection to one store; use as a context manager (see `open_store`)."""

    # how messages name the store: its file, or its URL without the password
    name: str
    # where a run's case files go when it has no JSON file to sit beside
    files_root: Path
    read_only: bool
    _db: Executes

    @abstractmethod
    def _patiently(self, work: Callable[[], T]) -> T:
        """`work`, with the kind's errors turned into one line each."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[object]:
        """One transaction: committed on leaving, rolled back on an error."""

    @abstractmethod
    def _table_names(self) -> set[str]:
        """The tables where dlbench's would be."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _connect_store(self) -> None:
        """Open the kind's connection (self._db)."""

    @abstractmethod
    def _prepare_for_reading(self) -> None:
        """Check the schema for a command that only reads; never write."""

    @abstractmethod
    def _prepare_for_writing(self) -> None:
        """Create the schema in a new store, or bring an older one up to date."""

    def _open(self, read_only: bool, on_wait: Callable[[str], None] | None) -> None:
        """Connect, then check the schema (a reader) or create and migrate it (a
        writer), each kind its own way; the connection is closed again if that fails."""
        self.read_only = read_only
        self._on_wait = on_wait
        self._timeout = lock_timeout()
        self._connect_store()
        try:
            self._patiently(self._prepare_for_reading if read_only else self._prepare_for_writing)
        except BaseException:
            self.close()
            raise

    # what the store's database is, for the line refusing a foreign one
    KIND = "a database"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bring_up_to_date(self) -> None:
        """Create the schema in an empty store, or migrate an older one; the caller holds
        the kind's write lock, so the version read here is final."""
        version = self._schema_version()
        if version == STORE_SCHEMA_VERSION:
            return
        if version is None:
            for statement in SCHEMA_V1.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            version = 1
        migrate(self._db, version)

    def _schema_version(self) -> int | None:
        """The store's schema version; None for a store with no tables (a new store)."""
        tables = self._table_names()
        if not tables:
            return None
        if "meta" not in tables:
            raise UserError(
                f"store {self.name} is {self.KIND} but not a dlbench store; "
                "pass --db with a dlbench store"
            )
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None or not str(row[0]).isdigit():
            raise UserError(f"store {self.name}: unreadable schema version {row and row[0]!r}")
        version = int(row[0])
        if version > STORE_SCHEMA_VERSION:
            raise UserError(
                f"store {self.name} has schema {version}, newer than this dlbench "
                f"reads ({STORE_SCHEMA_VERSION}); upgrade dlbench or use --db"
            )
        return version

    def _refuse_empty(self) -> NoReturn:
        raise UserError(
            f"store {self.name} is empty (no dlbench tables); run `dlbench run` first, "
            "or pass --db with another store"
        )

    @_guarded
    def begin_run(self, run: Run) -> None:
        with self._transaction():
            self._insert_run(run)

    def _insert_run(self, run: Run) -> None:
        # Every run enters the store here, made (begin_run) or imported: its id follows
        # the rule whoever built the Run, since files will be named after it.
        problem = run_id_problem(run.id)
        if problem is not None:
            raise UserError(f"run id {problem}; nothing stored in {self.name}")
        header = replace(run, results=()).to_dict()  # as in the run's JSON, by one path
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
                run.env.value_of("hostname"),
                json.dumps(header["command"]),
                json.dumps(header["settings"]),
                json.dumps(header["env"]),
                run.env.value_of("dlbench"),
                json.dumps(header["plan"]),
            ),
        )

    @_guarded
    def discard_run(self, run_id: str) -> None:
        """Forget a run that stored no result yet (its start failed after its row was written)."""
        with self._transaction():
            self._db.execute("DELETE FROM runs WHERE id=? AND n_cases=0", (run_id,))

    @_guarded
    def add_result(self, run_id: str, seq: int, result: Result) -> None:
        with self._transaction():
            self._insert_result(run_id, seq, result)

    @_guarded
    def replace_result(self, run_id: str, seq: int, result: Result) -> None:
        """The case at plan index `seq` measured again (one more --repeat process)."""
        with self._transaction():
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
    def finish_run(self, run_id: str, finished_at: str, env: Fingerprint | None = None) -> None:
        """Mark the run complete; `env` replaces the stored one (ceilings measured in the run)."""
        with self._transaction():
            self._db.execute("UPDATE runs SET finished_at=? WHERE id=?", (finished_at, run_id))
            if env is not None:
                self._db.execute(
                    "UPDATE runs SET env=? WHERE id=?", (json.dumps(finite(env.to_dict())), run_id)
                )

    def latest_ceilings(self, hostname: str | None) -> Ceilings | None:
        """The ceilings of this machine's newest complete `ceilings` run, if any."""
        from dlbench.results.ceilings import ceilings_from_results

        run = self.latest_ceilings_run(hostname)
        if run is None:
            return None
        found = ceilings_from_results(run.results, run.id)
        return found if found.values else None

    @_guarded
    def latest_ceilings_run(self, hostname: str | None) -> Run | None:
        """This machine's newest complete `ceilings` run, if any."""
        from dlbench.results.ceilings import CEILING_SUITE

        # `hostname IS ?` is SQLite's, `IS NOT DISTINCT FROM ?` PostgreSQL's (and new
        # SQLite's): a missing hostname is asked for in the SQL both speak.
        same_host = "hostname IS NULL" if hostname is None else "hostname = ?"
        rows = self._db.execute(
            f"SELECT started_at, id FROM runs WHERE suite=? AND {same_host} "
            "AND finished_at IS NOT NULL",
            (CEILING_SUITE,) if hostname is None else (CEILING_SUITE, hostname),
        ).fetchall()
        if not rows:
            return None
        return self.load_run(max(rows)[1])  # ordered here: a server's collation may differ

    @_guarded
    def import_run(self, run: Run) -> None:
        """Add a whole run (from another machine) in one transaction, or nothing."""
        with self._transaction():
            if self._db.execute("SELECT 1 FROM runs WHERE id=?", (run.id,)).fetchone():
                raise UserError(f"run {run.id} is already in store {self.name}; nothing imported")
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
            "dlbench_version FROM runs"
        ).fetchall()
        # by start time, then id, as Python orders text (a server's collation may not)
        return sorted((RunSummary(*row) for row in rows), key=lambda r: (r.started_at, r.id))

    def run_ids(self) -> list[str]:
        return [summary.id for summary in self.list_runs()]

    @_guarded
    def load_run(self, run_id: str) -> Run:
        row = self._db.execute(
            "SELECT id, schema_version, started_at, finished_at, suite, command, settings, env, "
            "plan FROM runs WHERE id=?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise UserError(f"no run {run_id!r} in store {self.name}")
        where = f"store {self.name}, run {shown(run_id)}"
        rows = self._db.execute(
            "SELECT seq, data FROM results WHERE run_id=? ORDER BY seq", (run_id,)
        ).fetchall()
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


def migrate(db: Executes, version: int) -> None:
    """Bring a store of schema `version` to the current one (inside the caller's transaction)."""
    for step in range(version, STORE_SCHEMA_VERSION):
        for statement in MIGRATIONS[step]:
            if isinstance(statement, str):
                db.execute(statement)
            else:
                statement(db)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(STORE_SCHEMA_VERSION),))


def stored_json(text: str | bytes, where: str) -> JSONValue:
    """A JSON column read back. dlbench wrote JSON there; anything else (a damaged store,
    a hand edit) is refused in one line naming the row, not met as a traceback."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"{exc.msg} at character {exc.pos}"
    except (TypeError, ValueError, RecursionError):  # not text; thousands of digits; too deep
        problem = f"a {type(text).__name__} dlbench cannot read as JSON"
    raise UserError(f"{where}: not valid JSON ({problem}); the store was damaged or edited")
