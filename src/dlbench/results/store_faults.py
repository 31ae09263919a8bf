"""What an SQLite error from the store means to the user, in one line.

Every fault the store can meet (another process holding its lock, a full
disk, a read-only file or folder, a damaged or foreign file) is named here
with the store's path and what to do about it, so no command shows SQLite's
bare message or a traceback. The store (`results/store.py`) turns each
sqlite3 error it meets into one of these UserErrors.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path

from dlbench.errors import UserError

LOCK_TIMEOUT_ENV = "DLBENCH_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT_S = 30.0

# SQLite's primary result codes (sqlite3.h).
BUSY, LOCKED, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB = 5, 6, 8, 10, 11, 13, 14, 26
# Python 3.10's exceptions carry no code, only SQLite's message for it (sqlite3ErrStr).
CODE_OF_MESSAGE = {
    "database is locked": BUSY,
    "database table is locked": LOCKED,
    "attempt to write a readonly database": READONLY,
    "disk I/O error": IOERR,
    "database disk image is malformed": CORRUPT,
    "database or disk is full": FULL,
    "unable to open database file": CANTOPEN,
    "file is not a database": NOTADB,
}


def lock_timeout() -> float:
    """Seconds to wait for another process's lock on the store: $DLBENCH_LOCK_TIMEOUT or 30."""
    text = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_LOCK_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise UserError(f"{LOCK_TIMEOUT_ENV} must be a number of seconds (0 or more), not {text!r}")
    return seconds


def primary_code(exc: sqlite3.Error) -> int | None:
    """The error's primary SQLite result code (an extended one reduced to it)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    return CODE_OF_MESSAGE.get(str(exc))


def is_locked(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock this statement needs: waiting may cure it."""
    return primary_code(exc) in (BUSY, LOCKED)


def store_fault(path: Path, exc: sqlite3.Error, waited_s: float, read_only: bool) -> UserError:
    """The one line a command prints for `exc`, met while using the store at `path`."""
    code = primary_code(exc)
    if code in (BUSY, LOCKED):
        return UserError(
            f"store {path} is locked by another process (another dlbench writing to it?); "
            f"gave up after {waited_s:g} s; try again when it has finished, or set "
            f"{LOCK_TIMEOUT_ENV} to wait longer"
        )
    if code in (CORRUPT, NOTADB):
        what = "is damaged" if code == CORRUPT else "is not an SQLite database, or is damaged"
        quoted = shlex.quote(str(path))
        return UserError(
            f"store {path} {what} ({exc}); keep a copy, then recover what it holds with "
            f"`sqlite3 {quoted} .recover | sqlite3 recovered.sqlite` and pass --db "
            "recovered.sqlite, or pass --db with another store"
        )
    if code == FULL or (code == IOERR and _disk_full(path)):
        return UserError(
            f"store {path}: the disk is full ({exc}); free some space on it, or pass --db "
            f"with a store on another disk"
        )
    if code == READONLY or (code == CANTOPEN and not read_only and not _writable(path)):
        return UserError(
            f"store {path} cannot be written: the file or its folder is read-only ({exc}); "
            f"make them writable, or pass --db with a writable store"
        )
    if code == CANTOPEN:
        return UserError(f"store {path} cannot be opened ({exc}); check that it can be read")
    if code == IOERR:
        return UserError(f"store {path}: {exc}; the disk may be full, failing or gone")
    return UserError(f"store {path}: {exc}")


def _disk_full(path: Path) -> bool:
    """No space left where the store is: SQLite says only "disk I/O error" when it
    cannot size its -shm file there."""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def _writable(path: Path) -> bool:
    """Whether this process may write the store and create SQLite's files beside it."""
    folder = path.parent if str(path.parent) else Path(".")
    return os.access(folder, os.W_OK | os.X_OK) and (not path.exists() or os.access(path, os.W_OK))
