"""A run's id: the one rule every id follows, and the paths built from one.

An id names a run in the store and on the command line, and files are named
after it: a case's LoadGen logs under `run-files/ID/` beside the store, a
report's PNG files. An imported run's id is data from elsewhere, and one
holding `/` or `..` put those files anywhere (`run --resume` wrote LoadGen's
logs outside `run-files/`). So every id, made here or read from a file or the
store, must match RUN_ID, and every path built from one comes from
`run_path`, which checks the id and that the path stays inside its folder.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone
from pathlib import Path

from dlbench.errors import UserError

# Letters, digits, '.', '_' and '-', beginning with a letter or digit: a file
# name on every OS, never `.` or `..`, no separator, no markup, no formula.
# dlbench's own ids (UTC time and random hex, 22 characters) and those of
# every earlier version match it.
MAX_RUN_ID = 64
RUN_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_RUN_ID - 1}}}")
RUN_ID_RULE = (
    f"1 to {MAX_RUN_ID} letters, digits, '.', '_' or '-', beginning with a letter or digit"
)
# How much of a refused id a message shows: one line, however long the id was
SHOWN_CHARS = 40


def new_run_id() -> str:
    """Sortable, readable and unique: UTC time plus random hex."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def run_id_problem(value: object) -> str | None:
    """Why `value` is not a run id (a phrase for a message), or None when it is one."""
    if isinstance(value, str) and RUN_ID.fullmatch(value):
        return None
    if not isinstance(value, str):
        return f"a run id is text, not {type(value).__name__}"
    return f"{shown(value)} is not allowed: a run id is {RUN_ID_RULE}"


def shown(text: str) -> str:
    """A string from elsewhere in a one-line message: quoted, control characters escaped
    (repr), and cut short with its length where it is long."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text):,} characters)"


def run_path(folder: Path, run_id: str, rest: str = "") -> Path:
    """`folder` / (`run_id` + `rest`): the path of a file or folder named after a run,
    refused unless the id follows the rule and the path stays inside `folder`."""
    problem = run_id_problem(run_id)
    if problem is not None:
        raise UserError(f"run id {problem}; nothing written")
    return inside(folder, run_id + rest)


def inside(folder: Path, name: str) -> Path:
    """`folder` / `name`, refused unless it resolves to a path below `folder`
    (symbolic links followed): a name read from a run never leaves its folder."""
    path = Path(folder) / name
    root, resolved = Path(folder).resolve(), path.resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise UserError(f"{shown(name)} would be written outside {folder}; nothing written")
    return path
