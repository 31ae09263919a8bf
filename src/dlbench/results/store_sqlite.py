"""The embedded SQLite store, dlbench's default (one file on one machine).

SQLite's journal guarantees no half-written row; WAL mode lets a reader
(`dlbench show`) open the store while a run writes to it.

A command that only reads opens the store read-only (SQLite's `mode=ro`): it
never creates, migrates or writes one, so a mistyped --db is an error and a
read-only store can be listed. Every SQLite error becomes one line naming the
store and what to do (`results/store_faults.py`); a lock held by another
process is waited for, up to $DLBENCH_LOCK_TIMEOUT seconds.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from dlbench.errors import UserError
from dlbench.results.store_base import Store, migrate
from dlbench.results.store_faults import (
    CANTOPEN,
    IOERR,
    READONLY,
    is_locked,
    primary_code,
    store_fault,
)
from dlbench.results.store_schema import STORE_SCHEMA_VERSION

# A lock held longer than this is worth a line saying what we wait for.
LOCK_NOTICE_S = 1.0
# How long each wait inside SQLite lasts once we wait longer than that.
LOCK_RETRY_S = 0.2
# What SQLite says when it cannot make a WAL store's -shm file beside it.
NO_SHM = (CANTOPEN, READONLY, IOERR)

T = TypeVar("T")


class SqliteStore(Store):
    """A connection to one store file; use as a context manager."""

    KIND = "an SQLite database"
    _db: sqlite3.Connection  # a backup, a close and its own transaction context too

    def __init__(
        self,
        path: Path,
        *,
        read_only: bool = False,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.name = str(self.path)
        self.files_root = self.path.parent / "run-files"
        self._open(read_only, on_wait)

    def _connect_store(self) -> None:
        self._db = self._connect()

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
            # under the write lock: another process may have just done it
            self._bring_up_to_date()

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
            self._refuse_empty()
        if version < STORE_SCHEMA_VERSION:
            # A read never writes: the file keeps its schema until a command that
            # writes (run, import) opens it, and this reader gets the upgraded copy.
            memory = _with_decoding(sqlite3.connect(":memory:"))
            self._db.backup(memory)
            self._db.close()
            self._db = memory
            with memory:
                migrate(memory, version)

    def _wal_holds_writes(self) -> bool:
        wal = Path(f"{self.path}-wal")
        return wal.exists() and wal.stat().st_size > 0

    def _table_names(self) -> set[str]:
        rows = self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        return {row[0] for row in rows}

    def _transaction(self) -> sqlite3.Connection:
        return self._db  # sqlite3's connection is its own transaction context

    def close(self) -> None:
        self._db.close()


def _with_decoding(db: sqlite3.Connection) -> sqlite3.Connection:
    db.text_factory = _decoded
    return db


def _decoded(data: bytes) -> str:
    """A text column as str. sqlite3 raises on bytes that are not UTF-8 (a damaged or
    hand-edited store) wherever a row is read; replaced, they reach the checks instead."""
    return data.decode("utf-8", errors="replace")
