"""JSON and CSV files of a run, written atomically.

Each write goes to a temporary file in the target's directory, is flushed and
fsynced, then renamed over the target: a reader (or a crash) sees either the
old complete file or the new complete file, never a torn one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from dlbench.errors import UserError
from dlbench.results.records import Result, Run, run_from_json

LATENCY_FIELDS = ("median", "mean", "p90", "p99", "std", "iqr", "min", "max", "n")
CSV_SCALAR_FIELDS = (
    "workload",
    "framework",
    "compile",
    "mode",
    "device",
    "requested_device",
    "scenario",
    "batch_size",
    "precision",
    "threads",
    "interop_threads",
    "status",
    "error",
    "throughput",
    "gflops",
    "gbps",
    "noisy",
    "first_call_ms",
    "cpu_percent",
    "peak_rss_mb",
    "load_avg_before",
    "load_avg_after",
    "import_s",
    "setup_s",
    "max_abs_diff",
    "framework_version",
)


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step (see module docstring)."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a directory; give a file name")
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_umask())  # mkstemp made it 0600
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
        _fsync_directory(directory)
    except OSError as exc:
        Path(temp_name).unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
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
        pass  # some file systems refuse fsync on directories; the file itself is synced
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(run: Run, path: Path) -> None:
    write_atomic(path, json.dumps(run.to_dict(), indent=2) + "\n")


def read_json(path: Path) -> Run:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file") from None
    return run_from_json(text, str(path))


def csv_row(run: Run, result: Result) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run.id, "hostname": run.env.get("hostname", "")}
    data = result.to_dict()
    row.update({name: data[name] for name in CSV_SCALAR_FIELDS})
    stats = data["latency_ms"] or {}
    row.update({f"latency_ms_{name}": stats.get(name) for name in LATENCY_FIELDS})
    row["params"] = ";".join(f"{k}={v}" for k, v in sorted(result.params.items()))
    return row


def csv_text(run: Run) -> str:
    columns = ["run_id", "hostname", *CSV_SCALAR_FIELDS]
    columns += [f"latency_ms_{name}" for name in LATENCY_FIELDS] + ["params"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for result in run.results:
        writer.writerow(csv_row(run, result))
    return buffer.getvalue()


def write_csv(run: Run, path: Path) -> None:
    write_atomic(path, csv_text(run))
