"""The store's table layout and its history, oldest first.

Each entry of MIGRATIONS turns a store of version N into version N+1; a
store is brought up to date, in one transaction, when it is opened. Keep old
layouts here: the tests build a store of each past version and migrate it.

History:
  1 - meta, runs(id, schema_version, started_at, finished_at, suite, hostname,
      command, settings, env), results(run_id, seq, case_key, status, data).
  2 - runs gains dlbench_version, n_cases and n_failed, so listing runs needs
      no scan of their results.
  3 - runs gains plan (the planned cases, JSON), so an interrupted run can be
      resumed; older runs have none and can only be rerun.
  4 - results hold run schema 2 (the Case embedded in each result) and
      case_key is Case.key(); schema-1 results are rewritten in place.
  5 - results hold run schema 3 (typed details); schema-2 results are rewritten
      in place, so a resumed old run appends results of the form it holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeAlias  # noqa: TID251  # Row: the columns its query selects

from dlbench.errors import UserError
from dlbench.results.records import Result, upgrade_result_v1, upgrade_result_v2
from dlbench.spec.case import Case
from dlbench.untyped import JSONObject

STORE_SCHEMA_VERSION = 5
# One row a statement returns, as both drivers give it: a column's value is the driver's
# Python value of what the statement selects (str, int, float, None), which its SQL
# decides and the caller reads as it knows it to be; so Any.
Row: TypeAlias = tuple[Any, ...]


class Rows(Protocol):
    """What a statement returns, as both drivers' cursors give it."""

    def fetchone(self) -> Row | None: ...  # the columns the query selects
    def fetchall(self) -> list[Row]: ...
    def __iter__(self) -> Iterator[Row]: ...


class Executes(Protocol):
    """A connection taking SQL with `?` placeholders: sqlite3's, or the PostgreSQL
    store's adapter (`results/store_postgres.py`), so one migration serves both."""

    # the parameters are passed on to the driver, which adapts them to SQL values
    def execute(self, sql: str, parameters: Sequence[object] = ..., /) -> Rows: ...


SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
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
CREATE TABLE results (
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    case_key TEXT NOT NULL,
    status TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
INSERT INTO meta VALUES ('schema_version', '1');
"""


# A stored result's JSON in the next run schema, and its case key where that changes.
Convert = Callable[[JSONObject, str, int], tuple[JSONObject, str | None]]


def _rewrite_results(db: Executes, version: int, convert: Convert) -> None:
    """Rewrite every result of the runs below run schema `version` into it; the steps
    run in order, so those runs are all at the schema just below. One result that
    cannot be converted stops the migration."""
    query = "SELECT id FROM runs WHERE schema_version < ?"
    old_runs = [r[0] for r in db.execute(query, (version,))]
    for run_id in old_runs:
        rows = db.execute("SELECT seq, data FROM results WHERE run_id=?", (run_id,)).fetchall()
        for seq, data in rows:
            where = f"store run {run_id}, result {seq}"
            try:
                upgraded, key = convert(json.loads(data), where, seq)
            except (KeyError, TypeError, ValueError) as exc:
                raise UserError(
                    f"{where}: cannot be upgraded to run schema {version} ({exc})"
                ) from None
            db.execute(
                "UPDATE results SET data=?, case_key=COALESCE(?, case_key) "
                "WHERE run_id=? AND seq=?",
                (json.dumps(upgraded), key, run_id, seq),
            )
        # `version`, not SCHEMA_VERSION: a later run schema gets its own step after this one
        db.execute("UPDATE runs SET schema_version=? WHERE id=?", (version, run_id))


def _result_v1_to_v2(data: JSONObject, where: str, seq: int) -> tuple[JSONObject, str]:
    """Schema 1's flat identity folded into the case, with its new case key."""
    upgraded = upgrade_result_v1(data, where, seq)
    # the case alone: its details are schema 2's, read by the next step
    return upgraded, Case.from_dict(upgraded["case"]).key()


def _result_v2_to_v3(data: JSONObject, where: str, seq: int) -> tuple[JSONObject, None]:
    """Schema 2's details dict in the typed form; the case key is unchanged."""
    upgraded = upgrade_result_v2(data)
    Result.from_dict(upgraded)  # refused here, not when the run is read
    return upgraded, None


def _results_to_run_schema_2(db: Executes) -> None:
    _rewrite_results(db, 2, _result_v1_to_v2)


def _results_to_run_schema_3(db: Executes) -> None:
    _rewrite_results(db, 3, _result_v2_to_v3)


def _dlbench_version_from_env(db: Executes) -> None:
    """Each run's dlbench version, read from its env JSON. In Python, not SQL: SQLite
    spells JSON access json_extract and PostgreSQL ->>, and this step is both's."""
    for run_id, env in db.execute("SELECT id, env FROM runs").fetchall():
        try:
            version = json.loads(env).get("dlbench")
        except (AttributeError, TypeError, ValueError):  # not a JSON object: no version
            version = None
        db.execute(
            "UPDATE runs SET dlbench_version=? WHERE id=?",
            (None if version is None else str(version), run_id),
        )


# A step is SQL both databases speak, or a function for what that SQL cannot do
# (reading and rewriting JSON).
Step = str | Callable[[Executes], None]
MIGRATIONS: dict[int, tuple[Step, ...]] = {
    1: (
        "ALTER TABLE runs ADD COLUMN dlbench_version TEXT",
        "ALTER TABLE runs ADD COLUMN n_cases INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN n_failed INTEGER NOT NULL DEFAULT 0",
        "UPDATE runs SET "
        "n_cases = (SELECT COUNT(*) FROM results WHERE results.run_id = runs.id), "
        "n_failed = (SELECT COUNT(*) FROM results WHERE results.run_id = runs.id "
        "AND results.status = 'failed')",
        _dlbench_version_from_env,
    ),
    2: ("ALTER TABLE runs ADD COLUMN plan TEXT",),
    3: (_results_to_run_schema_2,),
    4: (_results_to_run_schema_3,),
}
