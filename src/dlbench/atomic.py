"""The one way dlbench replaces a file: write a temporary beside it, then rename.

A reader (a concurrent worker, `dlbench show`, a crash) sees the old complete
file or the new complete file, never a torn one. Run files, reports, worker
results and cached reference artifacts all go through `write_atomic`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from dlbench.errors import UserError

# A writer gets the temporary path and fills it (np.save, torch.onnx.export, ...).
Writer = Callable[[Path], None]


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
