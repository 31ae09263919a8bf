"""A run in the formats CI services read: Bencher's BMF (held to its published JSON
Schema) and github-action-benchmark's custom tools (held to the fields its parser
reads), from a real --repeat run."""

from __future__ import annotations

import json
import os

import pytest
from conftest import cli, dlbench

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
    # bounds across the three processes (the unit of replication), around the median
    rates = [s["throughput"] for s in result["details"]["processes"]["summaries"]]
    throughput = measures["throughput"]
    assert (throughput["lower_value"], throughput["upper_value"]) == (min(rates), max(rates))
    assert throughput["lower_value"] <= throughput["value"] <= throughput["upper_value"]


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
