"""Find a run by what the user typed: a run JSON file, or a run id in the store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dlbench.errors import UserError
from dlbench.results.files import read_json
from dlbench.results.records import Run
from dlbench.results.store import open_store
from dlbench.results.store_location import StoreLocation, default_location


def load_run(
    ref: str, db: StoreLocation | None, on_wait: Callable[[str], None] | None = None
) -> Run:
    """A run from a JSON file path, else by id from the store (opened read-only)."""
    if Path(ref).is_file() or ref.endswith(".json"):
        return read_json(Path(ref))
    where = db if db is not None else default_location()
    if isinstance(where, Path) and not where.exists():
        # a mistyped file name is as likely as a missing store: say both
        raise UserError(
            f"{ref!r} is neither a run file nor a run id: there is no store at {where}; "
            "run `dlbench run` first, or pass --db with an existing store"
        )
    with open_store(where, read_only=True, on_wait=on_wait) as store:
        if ref not in store.run_ids():
            raise UserError(f"{ref!r} is neither a run file nor a run id in store {store.name}")
        return store.load_run(ref)
