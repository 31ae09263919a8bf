"""Run records: JSON/CSV round trip, schema versions, atomic files."""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from factories import sample_run, with_result

from dlbench.atomic import build_once, write_atomic
from dlbench.errors import UserError
from dlbench.results.files import read_json, write_csv, write_json
from dlbench.results.records import SCHEMA_VERSION

CASE_FIELDS = ("workload", "framework", "compile", "device", "mode", "batch_size", "precision")
REQUIRED_FIELDS = (
    "case",
    "status",
    "error",
    "latency_ms",
    "throughput",
    "cpu_percent",
    "peak_rss_mb",
    "max_abs_diff",
)


def test_json_round_trip_is_lossless(tmp_path):
    run = sample_run()
    write_json(run, tmp_path / "run.json")
    loaded = read_json(tmp_path / "run.json")
    assert loaded == run
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION and "env" in data
    for name in REQUIRED_FIELDS:
        assert name in data["results"][0]
    for name in CASE_FIELDS:
        assert name in data["results"][0]["case"]
    assert set(data["results"][0]["latency_ms"]) >= {"median", "mean", "p90", "p99", "std", "n"}


def test_csv_has_one_row_per_result_and_survives_odd_strings(tmp_path):
    write_csv(sample_run(), tmp_path / "run.csv")
    with open(tmp_path / "run.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    assert rows[0]["latency_ms_median"] == "2.0"
    assert rows[1]["error"] == 'worker crashed, "quotes", commas, and\nnewlines'
    assert rows[1]["params"] == "size=64"


def test_csv_text_cells_a_spreadsheet_would_run_are_neutralised(tmp_path):
    run = sample_run()
    run = replace(run, env=replace(run.env, hostname="@SUM(1+1)*cmd|' /C calc'!A0"))
    run = with_result(
        run,
        1,
        replace(
            run.results[1],
            error='=HYPERLINK("http://example.com","click")',
            error_detail="\t=1+1",
            framework_version="-2+3",
            requested_device="\r=1",
            primary_metric="+1",
        ),
    )
    # a number, not text: it stays a number
    run = with_result(run, 0, replace(run.results[0], cpu_percent=-1.5))
    write_csv(run, tmp_path / "run.csv")
    with open(tmp_path / "run.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows[1]["hostname"] == "'@SUM(1+1)*cmd|' /C calc'!A0"
    assert rows[1]["error"] == '\'=HYPERLINK("http://example.com","click")'
    assert rows[1]["error_detail"] == "'\t=1+1"
    assert rows[1]["framework_version"] == "'-2+3"
    assert rows[1]["requested_device"] == "'\r=1"
    assert rows[1]["primary_metric"] == "'+1"
    assert rows[0]["cpu_percent"] == "-1.5"
    for row in rows:  # no other cell begins like a formula
        for cell in row.values():
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or float(cell) < 0, cell


def test_study_csv_neutralises_its_text_cells_too():
    from dlbench.report.studies.study import Row, StudyTable
    from dlbench.report.studies.study_output import study_csv
    from dlbench.results.metrics import METRICS

    table = StudyTable("=cmd", METRICS["latency"], (Row("@label", -2.0, None, note="-note"),))
    [row] = list(csv.DictReader(io.StringIO(study_csv([table]))))
    assert (row["table"], row["case"], row["note"]) == ("'=cmd", "'@label", "'-note")
    assert row["value"] == "-2.0"


GOOD = (
    '{"schema_version": 1, "id": "x", "started_at": "t", "suite": "s", "settings": {},'
    ' "env": {}, "results": []}'
)
RESULT = (
    '{"workload": "mlp", "framework": "torch", "compile": "eager", "mode": "infer",'
    ' "device": "cpu", "batch_size": 4, "precision": "fp32", "threads": 1, "interop_threads": 1,'
    ' "status": "ok", "params": {}, "latency_ms": {"median": 1, "mean": 1, "p90": 1,'
    ' "p99": 1, "std": 0, "iqr": 0, "min": 1, "max": 1, "n": 1}}'
)


def test_a_minimal_valid_file_loads(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(GOOD.replace('"results": []', '"results": [' + RESULT + "]"))
    assert read_json(path).results[0].latency_ms.median == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "no schema_version"),
        ('{"schema_version": 99, "results": []}', "newer dlbench"),
        ('{"schema_version": 0}', "invalid schema_version"),
        ('{"schema_version": 1, "id": "x"}', "missing started_at"),
        (
            '{"schema_version": 1, "id": "x", "started_at": "t", "suite": "s", "settings": {},'
            ' "env": {}, "results": [{"workload": "mlp"}]}',
            "not a valid dlbench run",
        ),
    ],
)
def test_bad_run_files_are_refused_clearly(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        read_json(path)


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        read_json(tmp_path / "nope.json")


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old complete content")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(UserError, match=r"cannot write .*disk on fire"):
        write_atomic(target, "new content")
    assert target.read_text() == "old complete content"
    assert list(tmp_path.iterdir()) == [target]  # no temporary file left behind


def test_processes_that_need_one_artifact_at_once_build_it_once(tmp_path):
    """Two builders arrive together: the second waits for the first, looks again and
    finds the artifact built (the flock is per open file, so threads contend as
    processes do)."""
    import threading
    import time

    artifact, builds = tmp_path / "cache" / "output.npy", []
    started = threading.Barrier(2)

    def build(name: str) -> None:
        builds.append(name)
        time.sleep(0.2)  # a build long enough for the other to arrive
        write_atomic(artifact, name)

    def need(name: str) -> None:
        started.wait()
        build_once(tmp_path / "cache" / ".build.lock", artifact.exists, lambda: build(name))

    threads = [threading.Thread(target=need, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and artifact.read_text() == builds[0]


def test_a_directory_as_output_path_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="it is a directory"):
        write_atomic(tmp_path, "data")


def test_written_files_get_the_usual_permissions(tmp_path):
    os.umask(mask := os.umask(0o022))
    write_atomic(tmp_path / "out.json", "data")
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_unwritable_output_path_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot write"):
        write_atomic(Path(blocker / "sub" / "out.json"), "data")
