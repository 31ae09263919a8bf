"""The one way dlbench replaces a file: write a temporary beside it, then rename.

A reader (a concurrent worker, `dlbench show`, a crash) sees the old complete
file or the new complete file, never a torn one. Run files, reports, charts,
worker results and cached reference artifacts all go through `write_atomic`;
`check_output_folder` refuses a folder they cannot go to before any work.
`build_once` lets one process at a time build a cached artifact, so processes
that need the same one at once (two cases of parallel runs) build it once.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dlbench.errors import UserError

# A writer gets the temporary path and fills it (np.save, torch.onnx.export, ...);
# what it returns (Path.write_text's count, a package's path) is not used.
Writer = Callable[[Path], object]


def write_atomic(path: Path, content: str | Writer) -> None:
    """Replace `path` with `content` (text, or a writer of the temp file) in one step.

    Text is flushed and fsynced before the rename, and the rename is made
    durable too. An unwritable path is a UserError naming it.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a directory; give a file name")
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=directory)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    temp = Path(temp_name)
    try:
        if isinstance(content, str):
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                os.fchmod(handle.fileno(), 0o666 & ~_umask())  # mkstemp made it 0600
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
        else:
            os.close(fd)
            os.chmod(temp, 0o666 & ~_umask())
            content(temp)
        os.replace(temp, path)
        _fsync_directory(directory)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def build_once(lock: Path, built: Callable[[], bool], build: Callable[[], object]) -> bool:
    """Run `build` unless `built()` says the cached artifact is there; True where this
    call built it.

    A process that finds it missing builds it holding `lock`, after looking again:
    one that waited finds it built, instead of building the same thing beside the
    first (a reference model's export, 3-11 s of a CPU each time).
    """
    if built():
        return False
    with _exclusively(lock):
        if built():  # built by another process while this one waited
            return False
        build()
        return True


@contextmanager
def _exclusively(lock: Path) -> Iterator[None]:
    """Hold `lock` (a file, made if missing) exclusively while inside. The lock is the
    kernel's (flock): it goes with a process that dies. Where there is no flock
    (Windows), nothing is held: each process builds as before."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def check_output_folder(folder: Path, option: str) -> None:
    """Refuse, before any work and without creating anything, a folder that files
    cannot be written to: a file in its place, or a read-only folder (its own, or
    the nearest one that exists, where it would be created)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{option} {folder} is a file; give a folder (created if missing)")
    existing = next(p for p in (folder, *folder.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise UserError(f"{option} {folder}: {existing} is a file, so the folder cannot be made")
    if not os.access(existing, os.W_OK | os.X_OK):
        read_only = os.statvfs(existing).f_flag & os.ST_RDONLY
        why = "is on a read-only file system" if read_only else "is not writable"
        raise UserError(f"{option} {folder}: {existing} {why}; give a folder you can write to")


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories can't be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        return  # some file systems refuse fsync on directories; the file itself is synced
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
