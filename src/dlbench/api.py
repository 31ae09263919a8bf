"""The Python API for notebooks: stored runs as a pandas DataFrame."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.errors import UserError
from dlbench.results.files import csv_row
from dlbench.results.lookup import load_run
from dlbench.results.store import open_store
from dlbench.results.store_location import store_location

if TYPE_CHECKING:  # pandas is imported when load_runs is called (an optional extra)
    import pandas


def load_runs(runs: Sequence[str] | None = None, db: str | Path | None = None) -> pandas.DataFrame:
    """One row per result (stats as columns) of the given runs, or of every stored run.

    `runs` are run ids in the store, or paths of run JSON files; `db` is the
    store: a file or a postgresql:// URL (default: $DLBENCH_DB or the user data
    directory).
    """
    try:
        import pandas
    except ImportError:
        raise UserError("load_runs needs pandas: pip install pandas") from None
    location = store_location(db) if db is not None else None
    if runs is None:
        with open_store(location, read_only=True) as store:
            runs = store.run_ids()
    loaded = [load_run(str(ref), location) for ref in runs]
    rows = [
        {**csv_row(run, result), "suite": run.suite, "started_at": run.started_at}
        for run in loaded
        for result in run.results
    ]
    return pandas.DataFrame(rows)
