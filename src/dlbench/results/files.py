"""JSON and CSV files of a run, written atomically.

Each write goes to a temporary file in the target's directory, is flushed and
fsynced, then renamed over the target: a reader (or a crash) sees either the
old complete file or the new complete file, never a torn one.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from dlbench.atomic import write_atomic
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
