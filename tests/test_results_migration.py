"""Stores and run files written before the restructure (run schema 1, store schema 3)
and before typed details (run schema 2, store schema 4) still load, upgrade in place,
and compare and show as they did."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from dlbench.report.compare import compare_runs
from dlbench.results.files import read_json, write_json
from dlbench.results.records import SCHEMA_VERSION
from dlbench.results.store import open_store
from dlbench.results.store_schema import STORE_SCHEMA_VERSION

FIXTURES = Path(__file__).parent / "fixtures" / "v0.1-runs"
SCHEMA_2 = Path(__file__).parent / "fixtures" / "schema-2-runs"
SCHEMA_2_RUNS = ("null-run", "repeat-run", "training-run", "crafted-run")


def test_a_schema_1_run_file_loads_with_its_case_embedded(tmp_path):
    run = read_json(FIXTURES / "torch-run.json")
    (result,) = run.results
    assert run.schema_version == SCHEMA_VERSION == 3
    case = result.case
    assert (case.workload, case.framework, case.compile) == ("mlp", "torch", "eager")
    assert (case.device, case.batch_size, case.threads, case.scenario) == ("cpu", 4, 1, "offline")
    assert result.requested_device == "cpu" and result.ok and result.samples_ms
    write_json(run, tmp_path / "again.json")
    assert read_json(tmp_path / "again.json") == run  # written as schema 3, read back equal


def test_a_schema_3_store_is_migrated_and_its_runs_compare(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store-schema3.sqlite", path)
    with open_store(path) as store:
        runs = [store.load_run(run_id) for run_id in store.run_ids()]
    assert [len(r.results) for r in runs] == [2, 1, 1]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta").fetchone()[0] == str(STORE_SCHEMA_VERSION)
        keys = [row[0] for row in db.execute("SELECT case_key FROM results ORDER BY run_id, seq")]
        versions = {row[0] for row in db.execute("SELECT schema_version FROM runs")}
    assert keys == [r.case.key() for run in runs for r in run.results]
    assert versions == {SCHEMA_VERSION}
    comparison = compare_runs(runs[1], runs[2])  # the same torch case, run twice
    assert len(comparison.cases) == 1 and not comparison.only_a and not comparison.only_b


def test_an_old_file_compares_with_the_same_case_from_an_upgraded_store(tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store-schema3.sqlite", path)
    with open_store(path) as store:
        stored = store.load_run(store.run_ids()[-1])
    comparison = compare_runs(read_json(FIXTURES / "torch-run.json"), stored)
    assert len(comparison.cases) == 1


def test_schema_1_user_model_cases_are_marked_unhashed():
    from dlbench.results.records import upgrade_result_v1

    old = {
        "workload": "user-model",
        "framework": "onnxruntime",
        "compile": "default",
        "status": "ok",
        "case": {"workload": "user-model", "model": "/models/net.onnx", "device": "auto"},
        "device": "cpu",
    }
    upgraded = upgrade_result_v1(old, "test", 0)
    assert upgraded["case"]["model_digest"] == "unhashed:net.onnx"
    assert upgraded["case"]["device"] == "cpu" and upgraded["requested_device"] == "auto"
    assert "workload" not in upgraded and "device" not in upgraded


@pytest.mark.parametrize("name", ["null-run.json", "torch-run.json"])
def test_fixture_files_are_schema_1(name):
    import json

    assert json.loads((FIXTURES / name).read_text())["schema_version"] == 1


def test_a_result_without_its_thread_count_is_refused(tmp_path):
    import json

    from dlbench.errors import UserError

    data = json.loads((FIXTURES / "torch-run.json").read_text())
    del data["results"][0]["threads"]  # schema 1 kept it flat, and in the case as asked
    del data["results"][0]["case"]["threads"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"results\[0\]\.case: missing threads"):
        read_json(tmp_path / "bad.json")


def test_a_store_row_that_cannot_be_upgraded_is_a_user_error(tmp_path):
    from dlbench.errors import UserError

    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store-schema3.sqlite", path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE results SET data='[1, 2]' WHERE seq=0")
    with pytest.raises(UserError, match=r"store run .*, result 0: not a valid dlbench run"):
        open_store(path)


def test_the_noisy_field_of_0_1_runs_is_read_as_the_flag_and_written_back(tmp_path):
    run = read_json(FIXTURES / "null-run.json")
    assert [r.flags for r in run.results] == [("noisy",), ("noisy",)]
    assert read_json(FIXTURES / "torch-run.json").results[0].flags == ()
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURES / "store-schema3.sqlite", path)
    with open_store(path) as store:
        stored = [r.noisy for run_id in store.run_ids() for r in store.load_run(run_id).results]
    assert stored == [True, True, False, True]
    write_json(run, tmp_path / "again.json")
    import json

    written = json.loads((tmp_path / "again.json").read_text())["results"][0]
    assert (written["noisy"], written["flags"]) == (True, ["noisy"])


@pytest.mark.parametrize("name", SCHEMA_2_RUNS)
def test_a_schema_2_run_file_upgrades_to_typed_details_and_round_trips(tmp_path, name):
    import json

    assert json.loads((SCHEMA_2 / f"{name}.json").read_text())["schema_version"] == 2
    run = read_json(SCHEMA_2 / f"{name}.json")
    assert run.schema_version == SCHEMA_VERSION
    write_json(run, tmp_path / "again.json")
    written = json.loads((tmp_path / "again.json").read_text())
    assert written["schema_version"] == SCHEMA_VERSION
    flat = {"timeline_summary", "timeline_origin_epoch_s", "epochs", "process_spread"}
    assert all(not flat & set(r["details"]) for r in written["results"])
    assert read_json(tmp_path / "again.json") == run


def test_schema_2_details_land_in_their_records():
    (null,) = read_json(SCHEMA_2 / "null-run.json").results
    assert null.details.extra == {"null": "no computation"}
    assert null.details.energy.unmeasurable and null.details.timeline.points
    assert null.details.threads == {"intra_op": 1, "inter_op": 1}
    assert null.details.numpy_blas.threads == 1 and null.details.loop_wall_s > 0
    (repeat,) = read_json(SCHEMA_2 / "repeat-run.json").results
    assert len(repeat.details.processes.summaries) >= 3  # disturbed ones ran again
    assert repeat.details.processes.spread.processes >= 1
    assert "median_ms" in repeat.details.processes.summaries[0].values
    (trained,) = read_json(SCHEMA_2 / "training-run.json").results
    training = trained.details.training
    assert [e.epoch for e in training.epochs] == [1, 2] and training.data.synthetic
    assert training.time_to_train_s == pytest.approx(sum(e.train_s for e in training.epochs))
    assert trained.details.placement.kind == "cpu"
    assert trained.details.first_step_ms > 0


def test_schema_2_stored_derived_values_are_still_what_their_run_showed():
    from dlbench.report.table import rate_column
    from dlbench.results.ceilings import efficiency_in_run
    from dlbench.results.flags import result_flags
    from dlbench.results.scaling import scaling_in_run

    run = read_json(SCHEMA_2 / "crafted-run.json")
    served, _, ddp, int8, user, gpu = run.results
    assert scaling_in_run(ddp, run) == {"scaling_efficiency": 0.6, "baseline_throughput": 50.0}
    assert efficiency_in_run(int8, run)["fraction"] == 0.42
    assert rate_column(int8, run) == "12.0 GFLOP/s (42%)"
    assert "int8-no-vnni" in result_flags(int8, 64)
    assert int8.details.quantization.tool == {"tool": "nncf"}
    assert int8.details.check.agreement == 0.97
    assert served.details.loadgen.tries[1].keeps_bound is False
    assert "over-bound" in result_flags(served, 64)
    assert user.details.extra["inputs"] == {"x": [1, 8]}
    assert gpu.details.timeline.throttle == "power" and gpu.details.transfer_bytes_per_step
    assert gpu.details.timeline.gpu_telemetry == "NVML"


def test_a_schema_4_store_is_migrated_to_typed_details(tmp_path):
    import json

    path = tmp_path / "old.sqlite"
    shutil.copy(SCHEMA_2 / "store-schema4.sqlite", path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta").fetchone()[0] == "4"
    with open_store(path) as store:
        runs = {run_id: store.load_run(run_id) for run_id in store.run_ids()}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta").fetchone()[0] == str(STORE_SCHEMA_VERSION)
        versions = {row[0] for row in db.execute("SELECT schema_version FROM runs")}
        rows = [json.loads(row[0]) for row in db.execute("SELECT data FROM results")]
    assert versions == {SCHEMA_VERSION}
    assert all("timeline_summary" not in row["details"] for row in rows)  # rewritten in place
    for name in SCHEMA_2_RUNS:
        from_file = read_json(SCHEMA_2 / f"{name}.json")
        assert runs[from_file.id] == from_file  # the same run, by either path


def test_a_details_part_of_the_wrong_type_is_refused_clearly(tmp_path):
    import json

    from dlbench.errors import UserError

    run = read_json(SCHEMA_2 / "training-run.json")
    write_json(run, tmp_path / "run.json")
    data = json.loads((tmp_path / "run.json").read_text())
    data["results"][0]["details"]["training"]["epochs"][0]["loss"] = "low"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(
        UserError,
        match=r"results\[0\]\.details\.training\.epochs\[0\]\.loss: expected float, not str",
    ):
        read_json(tmp_path / "bad.json")
