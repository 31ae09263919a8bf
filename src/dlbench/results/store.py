"""The store every run is appended to: `open_store` picks its kind from its location.

An SQLite file is the embedded default (`results/store_sqlite.py`); a
postgresql:// URL is a store many machines share (`results/store_postgres.py`).
Both are a `Store` (`results/store_base.py`): one schema, one set of queries.
"""

from __future__ import annotations

from collections.abc import Callable

from dlbench.results.store_base import RunSummary, Store
from dlbench.results.store_location import PostgresUrl, StoreLocation, default_location

__all__ = ["RunSummary", "Store", "open_store"]


def open_store(
    location: StoreLocation | None = None,
    *,
    read_only: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> Store:
    """The store at `location` (default: $DLBENCH_DB, else the user's data directory):
    a PostgreSQL store for a postgresql:// URL, else an SQLite file. `read_only` for
    commands that only read; `on_wait` hears one line when another process's lock
    holds the store up for more than a moment."""
    where = location if location is not None else default_location()
    if isinstance(where, PostgresUrl):
        from dlbench.results.store_postgres import PostgresStore

        return PostgresStore(where, read_only=read_only, on_wait=on_wait)
    from dlbench.results.store_sqlite import SqliteStore

    return SqliteStore(where, read_only=read_only, on_wait=on_wait)
