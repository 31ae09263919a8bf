"""JSON and CSV files of a run, written atomically.

Each write goes to a temporary file in the target's directory, is flushed and
fsynced, then renamed over the target: a reader (or a crash) sees either the
old complete file or the new complete file, never a torn one.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import fields
from pathlib import Path

from dlbench.atomic import write_atomic
from dlbench.errors import UserError
from dlbench.measure.stats import LatencyStats
from dlbench.results.ceilings import efficiency_in_run
from dlbench.results.decode_bound import decode_bound, no_ceiling_note
from dlbench.results.metrics import CSV_METRICS, METRICS, read
from dlbench.results.records import Result, Run, result_keys, run_from_json
from dlbench.results.roofline_bound import prefill_bound, work_precision
from dlbench.results.scaling import scaling_in_run
from dlbench.spec.case import PAIR_FIELDS, Case
from dlbench.spec.case_parts import DdpLaunch
from dlbench.spec.record_dict import finite, flat_fields
from dlbench.untyped import JSONObject


def write_json(run: Run, path: Path) -> None:
    write_atomic(path, json.dumps(run_json(run), indent=2) + "\n")


def run_json(run: Run) -> JSONObject:
    """The run as its JSON file holds it: the records, and beside each result the values
    computed from its run (`derived`), for readers other than dlbench. dlbench reads
    the records only, and computes these again from them when it reads the file."""
    data = run.to_dict()
    for entry, result in zip(data["results"], run.results, strict=True):
        found = derived(result, run)
        if found:
            entry["derived"] = finite(found)
    return data


def derived(result: Result, run: Run) -> JSONObject:
    """The result's efficiency against the run's ceilings, its DDP scaling, and a
    generation's decode and prefill against the memory-bandwidth and compute bounds,
    where it has them."""
    decode, prefill = decode_bound(result, run), prefill_bound(result, run)
    precision = work_precision(result)
    found = {
        "efficiency": efficiency_in_run(result, run),
        "scaling": scaling_in_run(result, run),
        "decode_bound": decode.as_dict(no_ceiling_note(result, run)) if decode else None,
        "prefill_bound": prefill.as_dict(no_ceiling_note(result, run, f"GEMM {precision}"))
        if prefill
        else None,
    }
    return {name: value for name, value in found.items() if value is not None}


def read_json(path: Path) -> Run:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file") from None
    return run_from_json(text, str(path))


# Result fields that are not one value per CSV cell: the case gets columns of
# its own, samples and details stay in the JSON.
NOT_SCALAR = ("case", "latency_ms", "warmup_ms", "samples_ms", "details")


def csv_columns() -> list[str]:
    """Run, the case's fields, the result's scalar fields, latency stats, detail metrics.

    Generated from the dataclasses and the metrics table: a new field or
    metric gets its column without an edit here.
    """
    columns = ["run_id", "hostname", "label"]
    columns += [name for name, _ in flat_fields(Case)]
    columns += [name for name in result_keys() if name not in NOT_SCALAR]
    columns += [f"latency_ms_{f.name}" for f in fields(LatencyStats)]
    columns += list(CSV_METRICS)
    return columns


def csv_row(run: Run, result: Result) -> JSONObject:
    row: JSONObject = {
        "run_id": run.id,
        "hostname": run.env.shown("hostname", ""),
        "label": result.case.label(),
    }
    for name, value in result.case.to_dict().items():
        row[name] = ";".join(f"{k}={v}" for k, v in value.items()) if name in PAIR_FIELDS else value
    launch = result.case.load
    row["torchrun_args"] = " ".join(launch.torchrun_args) if isinstance(launch, DdpLaunch) else ""
    data = result.to_dict()
    row.update({name: data[name] for name in result_keys() if name not in NOT_SCALAR})
    row["flags"] = ";".join(result.flags)
    stats = data["latency_ms"] or {}
    row.update({f"latency_ms_{f.name}": stats.get(f.name) for f in fields(LatencyStats)})
    row.update({key: read(METRICS[key], result, run) for key in CSV_METRICS})
    return row


# A spreadsheet runs a cell that begins with one of these as a formula (OWASP's
# "CSV injection"): an imported run's id, host name or error text is data from
# elsewhere, and opening an exported file must not run it.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# RFC 4180's line end. With it the csv module quotes a cell that holds a lone \r;
# with "\n" it writes that \r bare, and every reader splits the row there.
CSV_LINE_END = "\r\n"


def csv_cell(value: object) -> object:
    """A value as a CSV cell no spreadsheet runs as a formula: a text that begins like
    one gets a leading ' (shown as text). Numbers are not text: they are written as
    numbers, and a negative one keeps its sign and stays a number."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(run: Run) -> str:
    """The CSV file: one row per result (csv_row), every text cell neutralised
    (csv_cell); the notebook API reads csv_row's values as they are."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=csv_columns(), lineterminator=CSV_LINE_END)
    writer.writeheader()
    for result in run.results:
        writer.writerow({name: csv_cell(value) for name, value in csv_row(run, result).items()})
    return buffer.getvalue()


def write_csv(run: Run, path: Path) -> None:
    write_atomic(path, csv_text(run))
