"""A run in the formats CI services read: Bencher's BMF (held to its published JSON
Schema) and github-action-benchmark's custom tools (held to the fields its parser
reads), from a real --repeat run."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
from conftest import cli, dlbench
from factories import make_result, timed_run

from dlbench.measure.stats import summarize
from dlbench.results.ci_formats import bmf
from dlbench.results.repeats import add_process

jsonschema = pytest.importorskip("jsonschema")

# Bencher Metric Format's JSON Schema as bencher.dev publishes it (bmf.json, draft-07):
# benchmarks of measures, each a required number `value` and optional bounds
BMF_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "patternProperties": {".+": {"type": "object", "patternProperties": {".+": {
        "type": "object",
        "properties": {"value": {"type": "number"}, "lower_value": {"type": "number"},
                       "upper_value": {"type": "number"}},
        "required": ["value"]}}}},
}  # fmt: skip
# github-action-benchmark's customBiggerIsBetter/customSmallerIsBetter entries: the
# fields its extractCustomBenchmarkResult reads (name, value and unit required)
GAB_FIELDS = {"name": str, "value": float, "unit": str, "range": str, "extra": str}


@pytest.fixture(scope="module")
def repeated_run(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("ci-formats")
    path = folder / "run.json"
    done = dlbench("run", "-w", "mlp", "-f", "null", "--repeat", "3", "--min-time", "0",
                   "--min-iters", "30", "--json", str(path),
                   env={**os.environ, "DLBENCH_DB": str(folder / "s.sqlite")})  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return str(path)


@pytest.mark.integration
def test_bmf_follows_its_schema_with_bounds_from_the_processes(repeated_run, tmp_path):
    out = tmp_path / "bench.json"
    done = cli("export", repeated_run, "--format", "bmf", "--out", str(out))
    assert done.returncode == 0, done.stderr
    bmf = json.loads(out.read_text())
    jsonschema.validate(bmf, BMF_SCHEMA)
    (case,) = bmf
    with open(repeated_run) as handle:
        run = json.load(handle)
    (result,) = run["results"]
    measures = bmf[case]
    # Bencher's built-in measures in their units: latency in ns, throughput in ops/s
    assert measures["latency"]["value"] == pytest.approx(result["latency_ms"]["median"] * 1e6)
    assert measures["throughput"]["value"] == pytest.approx(result["throughput"])
    # bounds across the processes the headline used (the unit of replication): on a
    # busy machine a disturbed process is re-run and left out, and one clean process
    # of several leaves no bounds, never bounds from the disturbed ones
    summaries = result["details"]["processes"]["summaries"]
    rates = [s["throughput"] for s in summaries if s["used"] is not False]
    throughput = measures["throughput"]
    bounds = (throughput.get("lower_value"), throughput.get("upper_value"))
    assert bounds == ((min(rates), max(rates)) if len(rates) > 1 else (None, None))
    if len(rates) > 1:
        assert throughput["lower_value"] <= throughput["value"] <= throughput["upper_value"]


@pytest.mark.unit
def test_bmf_bounds_are_the_used_processes_lowest_and_highest():
    run = timed_run("r1", median_ms=2.0, seed=3, processes=3)
    (result,) = run.results
    rates = [s.values["throughput"] for s in result.details.processes.summaries]
    # a disturbed process, ten times as fast, is kept in the list but bounds nothing
    hog = make_result(framework="torch", scenario="offline", flags=["interference"],
                      latency_ms=summarize([2e-4] * 50), samples_ms=[0.2] * 50,
                      throughput=10 * max(rates))  # fmt: skip
    run = replace(run, results=[add_process(result, hog)])
    (result,) = run.results
    assert [s.used for s in result.details.processes.summaries] == [True, True, True, False]
    (measures,) = bmf(run).values()
    throughput = measures["throughput"]
    assert len(set(rates)) == 3
    assert (throughput["lower_value"], throughput["upper_value"]) == (min(rates), max(rates))
    assert throughput["lower_value"] < throughput["value"] < throughput["upper_value"]
    # latency in Bencher's ns, bounded by the processes' medians too
    used = [s for s in result.details.processes.summaries if s.used]
    medians = [s.values["median_ms"] * 1e6 for s in used]
    latency = measures["latency"]
    assert (latency["lower_value"], latency["upper_value"]) == pytest.approx(
        (min(medians), max(medians))
    )


def test_github_action_benchmark_writes_one_file_per_direction(repeated_run, tmp_path):
    out = tmp_path / "bench.json"
    done = cli("export", repeated_run, "--format", "github-action-benchmark", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "tool: 'customBiggerIsBetter'" in done.stderr
    bigger = json.loads((tmp_path / "bench.bigger-is-better.json").read_text())
    smaller = json.loads((tmp_path / "bench.smaller-is-better.json").read_text())
    for entries in (bigger, smaller):
        names = [entry["name"] for entry in entries]
        assert len(names) == len(set(names))  # the action keys a chart by name
        for entry in entries:
            assert {"name", "value", "unit"} <= set(entry) <= set(GAB_FIELDS)
            assert all(isinstance(entry[k], GAB_FIELDS[k]) for k in entry if k != "value")
            assert isinstance(entry["value"], int | float)
    assert any(e["name"].endswith(" - Throughput") for e in bigger)
    assert not any(e["name"].endswith(" - Throughput") for e in smaller)
    latency = next(e for e in smaller if e["name"].endswith(" - Latency (median)"))
    low, high = (float(x) for x in latency["range"].split(" - "))
    # the range is text with six significant digits
    assert latency["unit"] == "ms" and low * (1 - 1e-5) <= latency["value"] <= high * (1 + 1e-5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--format", "bmf"), "--format and --out go together"),
        (("--out", "x.json"), "--format and --out go together"),
        ((), "give --json FILE, --csv FILE and/or --format"),
    ],
)
@pytest.mark.integration
def test_export_options_that_do_not_fit_are_one_line_errors(repeated_run, args, message):
    done = cli("export", repeated_run, *args)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert message in line
