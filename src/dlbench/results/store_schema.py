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
"""

from __future__ import annotations

STORE_SCHEMA_VERSION = 3

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

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE runs ADD COLUMN dlbench_version TEXT",
        "ALTER TABLE runs ADD COLUMN n_cases INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN n_failed INTEGER NOT NULL DEFAULT 0",
        "UPDATE runs SET "
        "n_cases = (SELECT COUNT(*) FROM results WHERE results.run_id = runs.id), "
        "n_failed = (SELECT COUNT(*) FROM results WHERE results.run_id = runs.id "
        "AND results.status = 'failed'), "
        "dlbench_version = json_extract(env, '$.dlbench')",
    ),
    2: ("ALTER TABLE runs ADD COLUMN plan TEXT",),
}
