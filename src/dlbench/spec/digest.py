"""Content digests: what identifies a user's model file or data, wherever it lies.

A case names files by path, but two machines (or two days) may hold
different files under one path, or the same file under two. Case.key() uses
these digests instead of paths.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path


def files_digest(files: Sequence[tuple[str, Path]]) -> str:
    """SHA-256 over (name, content) pairs, in the given order."""
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def path_digest(path: Path) -> str:
    """A file's digest, or a folder's (a SavedModel): every file in it, by relative name."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return files_digest([(str(p.relative_to(path)), p) for p in files])
    return files_digest([(path.name, path)])


def short_digest(digest: str) -> str:
    """A hex digest's first 12 digits, as labels show it; an "unhashed:NAME" marker
    (older runs) whole."""
    return digest if ":" in digest else digest[:12]
