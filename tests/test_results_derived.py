"""Values derived from a result's run, computed when read and never stored in it:
efficiency against the run's ceilings, DDP scaling against the same case in one
process. Results written before keep the values their run showed."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
from factories import make_result, make_run, with_result

from dlbench.report.table import rate_column
from dlbench.results.ceilings import efficiency_in_run
from dlbench.results.files import read_json, write_csv, write_json
from dlbench.results.metrics import METRICS, read
from dlbench.results.scaling import NO_BASELINE, scaling_in_run

CEILINGS = {"source_run": "roof", "values": {"cpu|gflops|fp32": 100.0}}


def mlp(**values: object):
    return make_result(gflops=25.0, primary_metric="gflops", throughput=50.0, **values)


def test_efficiency_is_read_from_the_runs_ceilings_and_written_only_beside_it(tmp_path):
    run = make_run([mlp()], env={"ceilings": CEILINGS})
    (result,) = run.results
    assert efficiency_in_run(result, run)["fraction"] == pytest.approx(0.25)
    assert read(METRICS["efficiency"], result, run) == pytest.approx(0.25)
    assert read(METRICS["efficiency"], result) is None  # it needs its run
    assert rate_column(result, run) == "25.0 GFLOP/s (25%)"
    write_json(run, tmp_path / "run.json")
    (written,) = json.loads((tmp_path / "run.json").read_text())["results"]
    assert "stored_efficiency" not in written["details"]
    assert written["derived"]["efficiency"]["fraction"] == pytest.approx(0.25)
    assert read_json(tmp_path / "run.json") == run  # `derived` is not read back
    write_csv(run, tmp_path / "run.csv")
    (row,) = csv.DictReader((tmp_path / "run.csv").open(newline=""))
    assert float(row["efficiency"]) == pytest.approx(0.25) and row["scaling"] == ""


def test_a_result_written_with_its_efficiency_shows_the_value_its_run_showed():
    # e.g. a --repeat result kept its last process's, or a roofline result the
    # fraction of the ceilings measured so far: recomputing would change old numbers
    stored = {"fraction": 0.42, "ceiling": 100.0, "unit": "GFLOP/s", "basis": "gemm fp32"}
    run = make_run([mlp(details={"stored_efficiency": stored})], env={"ceilings": CEILINGS})
    (result,) = run.results
    assert efficiency_in_run(result, run) == stored
    assert rate_column(result, run) == "25.0 GFLOP/s (42%)"
    assert efficiency_in_run(mlp(), make_run([mlp()])) is None  # a run without ceilings


def ddp_pair(single_rate: float = 40.0, ddp: dict | None = None):
    single = make_result(throughput=single_rate, mode="train")
    double = make_result(
        throughput=60.0, mode="train", nproc=2, ddp=True, details={"ddp": ddp or {"world_size": 2}}
    )
    return make_run([single, double]), single, double


def test_scaling_is_read_from_the_same_case_in_one_process_of_the_run():
    run, single, double = ddp_pair()
    assert scaling_in_run(double, run) == {
        "baseline_throughput": 40.0,
        "scaling_efficiency": pytest.approx(60.0 / (2 * 40.0)),
    }
    assert scaling_in_run(single, run) is None
    assert read(METRICS["scaling"], double, run) == pytest.approx(0.75)
    # the run's results as they stand: a --repeat merge that moves the baseline moves it
    run = with_result(run, run.results.index(single), replace(single, throughput=30.0))
    assert read(METRICS["scaling"], double, run) == pytest.approx(1.0)
    assert double.details.ddp.stored_scaling is None
    alone = make_run([double])
    assert scaling_in_run(double, alone) == {"scaling_note": NO_BASELINE}


def test_a_ddp_result_written_with_its_scaling_keeps_it(tmp_path):
    stored = {"baseline_throughput": 50.0, "scaling_efficiency": 0.6}
    kept = {"world_size": 2, "stored_scaling": stored}
    run, _, double = ddp_pair(ddp=kept)
    assert scaling_in_run(double, run) == {"scaling_efficiency": 0.6, "baseline_throughput": 50.0}
    write_json(run, tmp_path / "run.json")
    written = json.loads((tmp_path / "run.json").read_text())["results"]
    assert "derived" not in written[0]
    assert written[1]["derived"]["scaling"]["scaling_efficiency"] == 0.6
