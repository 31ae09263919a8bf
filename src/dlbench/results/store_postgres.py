"""A store on a PostgreSQL server: one store many machines write to at once.

`--db postgresql://user@host/db` (or $DLBENCH_DB) selects it; the tables,
their versions and their migrations are SQLite's (`results/store_schema.py`),
created in the URL's database and schema (`?options=-csearch_path%3DNAME`
keeps dlbench in a schema of its own). Credentials come from the URL or
libpq's usual $PG* variables and ~/.pgpass, through psycopg; the store names
itself by its URL without the password, and no message carries the password.

Writers do not wait on one another: a run's row and each result are their own
short transaction, and two runs never touch the same row. Creating or
upgrading the schema is serialised by a transaction-scoped advisory lock, so
machines opening a new store together create it once. A command that only
reads opens a read-only session; it never creates or upgrades a store.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from dlbench.errors import UserError
from dlbench.results.store_base import Store
from dlbench.results.store_faults import LOCK_TIMEOUT_ENV
from dlbench.results.store_location import PostgresUrl, user_data_folder, without_password
from dlbench.results.store_schema import STORE_SCHEMA_VERSION, Rows

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

T = TypeVar("T")

EXTRA = "pip install 'dlbench[postgres]'"
# libpq waits for an unreachable host as long as TCP does (minutes) unless told.
CONNECT_TIMEOUT_S = 10
# Any number both sides agree on: the key of the lock held while the schema changes.
SCHEMA_LOCK_KEY = 0x646C62656E6368  # "dlbench"


class _ConnectOptions(TypedDict, total=False):
    """The keyword arguments the store passes to psycopg.connect."""

    autocommit: bool
    application_name: str
    connect_timeout: int


class _QmarkConnection:
    """psycopg's connection taking the store's `?` placeholders (psycopg's are %s):
    the shared queries and migrations are written once, for both kinds of store."""

    def __init__(self, connection: psycopg.Connection[TupleRow]) -> None:
        self.connection = connection

    def execute(self, sql: str, parameters: Sequence[object] = (), /) -> Rows:
        return self.connection.execute(sql.replace("?", "%s"), parameters)


class PostgresStore(Store):
    """A connection to a dlbench store in a PostgreSQL database; use as a context manager."""

    KIND = "a PostgreSQL database"

    def __init__(
        self,
        url: PostgresUrl,
        *,
        read_only: bool = False,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.name = str(url)  # without its password
        # run files (LoadGen logs) stay on the machine that ran the case
        self.files_root = user_data_folder() / "run-files"
        self._secrets = _passwords(url.url)
        self._url = url
        self._open(read_only, on_wait)

    def _connect_store(self) -> None:
        self._connection = self._connect(self._url)
        self._db = _QmarkConnection(self._connection)

    def _connect(self, url: PostgresUrl) -> psycopg.Connection[TupleRow]:
        psycopg = _psycopg()
        try:
            given = psycopg.conninfo.conninfo_to_dict(url.url)
        except psycopg.Error as exc:
            raise UserError(
                f"--db {self.name} is not a PostgreSQL URL libpq reads ({self._said(exc)}); "
                "write it as postgresql://USER@HOST:PORT/DATABASE"
            ) from None
        options: _ConnectOptions = {"autocommit": True, "application_name": "dlbench"}
        if "connect_timeout" not in given and "PGCONNECT_TIMEOUT" not in os.environ:
            options["connect_timeout"] = CONNECT_TIMEOUT_S
        try:
            connection = psycopg.connect(url.url, **options)
        except psycopg.Error as exc:
            raise UserError(
                f"cannot connect to store {self.name} ({self._said(exc)}); check the URL's "
                "host, port, database and user (or $PGHOST, $PGUSER, ...), its password "
                "($PGPASSWORD or ~/.pgpass), and that the server is running"
            ) from None
        except ImportError as exc:  # libpq missing for psycopg's pure-Python build
            raise UserError(f"a postgresql:// store needs libpq ({exc}); {EXTRA}") from None
        try:
            # a lock wait ends as the SQLite store's does; 0 is PostgreSQL's "forever"
            wait_ms = max(1, round(self._timeout * 1000))
            connection.execute("SELECT set_config('lock_timeout', %s, false)", (f"{wait_ms}ms",))
            if self.read_only:
                connection.execute("SET default_transaction_read_only = on")
        except psycopg.Error as exc:
            connection.close()
            raise self._fault(exc) from None
        return connection

    def _patiently(self, work: Callable[[], T]) -> T:
        psycopg = _psycopg()
        try:
            return work()
        except psycopg.Error as exc:
            raise self._fault(exc) from None

    def _transaction(self) -> AbstractContextManager[object]:
        return self._connection.transaction()

    def _table_names(self) -> set[str]:
        rows = self._db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        return {row[0] for row in rows}

    def _prepare_for_writing(self) -> None:
        """Create the store's tables, or upgrade them, once whoever else opens it now."""
        if self._schema_version() == STORE_SCHEMA_VERSION:  # first: a foreign one is refused
            return
        with self._connection.transaction():
            held = self._db.execute("SELECT pg_try_advisory_xact_lock(?)", (SCHEMA_LOCK_KEY,))
            row = held.fetchone()
            if row is None or not row[0]:  # pg_try_advisory_xact_lock answers one row
                if self._on_wait is not None:
                    self._on_wait(
                        f"waiting up to {self._timeout:g} s for store {self.name}: another "
                        "dlbench is creating or upgrading its tables"
                    )
                self._db.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK_KEY,))
            self._bring_up_to_date()  # reads the version again, under the lock

    def _prepare_for_reading(self) -> None:
        version = self._schema_version()
        if version is None:
            self._refuse_empty()
        elif version < STORE_SCHEMA_VERSION:
            # SQLite's reader upgrades a copy in memory; a server's tables cannot be
            # copied aside, and a reader must not take the locks an upgrade needs.
            raise UserError(
                f"store {self.name} has schema {version}, older than this dlbench's "
                f"({STORE_SCHEMA_VERSION}); a command that writes (dlbench run, dlbench "
                "import) upgrades it, after which every command reads it"
            )

    def close(self) -> None:
        self._connection.close()

    def _fault(self, exc: psycopg.Error) -> UserError:
        """The one line a command prints for a server's error."""
        errors = _psycopg().errors
        said = self._said(exc)
        if isinstance(exc, errors.LockNotAvailable):
            return UserError(
                f"store {self.name} is locked by another process (another dlbench upgrading "
                f"it?); gave up after {self._timeout:g} s; try again, or set "
                f"{LOCK_TIMEOUT_ENV} to wait longer"
            )
        if isinstance(exc, errors.InsufficientPrivilege):
            return UserError(
                f"store {self.name}: {said}; the user needs CREATE on the schema (to make "
                "the store) and SELECT, INSERT, UPDATE and DELETE on its tables"
            )
        if isinstance(exc, errors.DiskFull | errors.OutOfMemory):
            return UserError(f"store {self.name}: the server is out of room ({said})")
        if isinstance(exc, errors.UniqueViolation):
            return UserError(
                f"store {self.name}: {said}; another process stored the same run at the "
                "same moment, and nothing of this step was stored"
            )
        if isinstance(exc, _psycopg().OperationalError):
            return UserError(
                f"store {self.name}: {said}; the server may have stopped or the network "
                "dropped; what was committed before is stored"
            )
        return UserError(f"store {self.name}: {said}")

    def _said(self, exc: BaseException) -> str:
        """The server's or libpq's message on one line, with any password cut out."""
        text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text or type(exc).__name__


def _passwords(url: str) -> list[str]:
    """The passwords in a URL (its user part, its query) and $PGPASSWORD, to cut from
    messages; libpq does not print them, and this makes sure of it."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # a bad IPv6 host: said without the URL's password
        raise UserError(
            f"--db {without_password(url)} is not a URL ({exc}); write it as "
            "postgresql://USER@HOST:PORT/DATABASE"
        ) from None
    found = [unquote(parts.password or "")]
    found += [value for key, value in parse_qsl(parts.query) if key == "password"]
    found.append(os.environ.get("PGPASSWORD", ""))
    # a one-character password would blank out that character everywhere
    return sorted({secret for secret in found if len(secret) > 1}, key=len, reverse=True)


def _psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError:
        raise UserError(f"a postgresql:// store needs psycopg: {EXTRA}") from None
    return psycopg
