"""Real faults for the tests of what a user sees when the machine refuses.

Nothing here is a mock: each helper makes the kernel or SQLite refuse for
real (a full file system, a read-only file or folder, a lock held by a second
connection, garbage bytes in a store's pages). Where a fault needs what this
machine does not allow (mounting needs root), the test skips with the reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = os.geteuid() == 0


def refused(proc: subprocess.CompletedProcess[str], message: str, alone: bool = True) -> str:
    """Exit 2 and one error line holding `message`, no traceback; `alone`: nothing else
    on stderr (a run also says what it runs first). The error line is returned."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith("dlbench: error: ")]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert errors[0] == lines[-1], proc.stderr
    if alone:
        assert lines == errors, proc.stderr
    return errors[0]


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount {' '.join(args)} is refused here: {done.stderr.strip()}")


@contextlib.contextmanager
def small_disk(folder: Path, size_kib: int = 1024) -> Iterator[Path]:
    """`folder` as a file system of its own of `size_kib` (a tmpfs): it can fill up."""
    if not ROOT:
        pytest.skip("a small file system (tmpfs) can only be mounted as root")
    folder.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Fill the file system that holds `folder` to the last byte; returns the filler
    file, whose removal frees the space again."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """`path` (a file or a folder) read-only for this process, for real.

    chmod where we are not root; root writes through any mode, so there it is a
    read-only bind mount of `path` onto itself (writes fail with EROFS).
    """
    if not ROOT:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield path
        finally:
            path.chmod(mode)
        return
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,ro,bind", str(path), str(path))
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@contextlib.contextmanager
def held_lock(store: Path) -> Iterator[sqlite3.Connection]:
    """A second connection holding the store's write lock, as another dlbench writing
    to it would (released when the block ends, or earlier by a ROLLBACK on it)."""
    db = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
    db.execute("BEGIN EXCLUSIVE")
    try:
        yield db
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.close()


def garbage_tail(path: Path, pages: int) -> None:
    """Overwrite the last `pages` pages of an SQLite file with garbage (a torn disk)."""
    size = path.stat().st_size
    page = 4096
    assert size >= (pages + 1) * page, "the store is too small to keep its first page"
    with open(path, "r+b") as handle:
        handle.seek(size - pages * page)
        handle.write(b"\xde\xad\xbe\xef" * (pages * page // 4))
