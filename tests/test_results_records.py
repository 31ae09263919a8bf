"""A result and its details are immutable all the way down: sequences are tuples, mappings
read-only copies, whether built in a process or read from a file; and reading them so
changes no byte of what is written."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from factories import make_result, make_run

from dlbench.results.details import Details, LoadGen, LoadGenTry, Timeline
from dlbench.results.files import read_json, run_json
from dlbench.spec.record_dict import from_dict, to_dict

FIXTURES = Path(__file__).parent / "fixtures" / "schema-3-runs"
RESULTS = Path(__file__).resolve().parent.parent / "results"


def test_a_results_samples_flags_and_details_cannot_be_changed():
    extra = {"providers": ["CPUExecutionProvider"]}
    result = make_result(samples_ms=[1.0, 2.0], flags=["noisy"], details=Details(extra=extra))
    assert result.samples_ms == (1.0, 2.0) and result.flags == ("noisy",)
    with pytest.raises(AttributeError):
        result.samples_ms.append(3.0)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        result.flags.append("interference")  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        result.details.extra["providers"] = []  # type: ignore[index]
    extra["late"] = 1  # the record holds a copy of what it was given
    assert "late" not in result.details.extra
    run = make_run([result])
    with pytest.raises(AttributeError):
        run.results.append(result)  # type: ignore[attr-defined]
    assert isinstance(run.results, tuple) and isinstance(run.command, tuple)


def test_a_mapping_is_read_in_its_files_order_and_written_back_so():
    # LoadGen's percentiles in its log's order: (name, value) pairs would come back sorted
    data = {"latency_ms": {"99": 12.5, "99.9": 20.0, "min": 1.0, "max": 30.0}}
    record = from_dict(LoadGen, data)
    assert isinstance(record.latency_ms, MappingProxyType)
    assert list(record.latency_ms) == ["99", "99.9", "min", "max"]
    assert json.dumps(to_dict(record)) == json.dumps(data)
    with pytest.raises(TypeError):
        record.latency_ms["50"] = 1.0  # type: ignore[index]
    # a record built in a process holds the same: a read-only copy, tuples
    built = LoadGen(latency_ms=dict(data["latency_ms"]), tries=[LoadGenTry(target_qps=1.0)])
    assert replace(built, tries=None) == record and isinstance(built.latency_ms, MappingProxyType)
    assert built.tries == (LoadGenTry(target_qps=1.0),)


def test_a_rest_field_is_read_only_and_keeps_its_keys_where_they_were():
    data = {"method": "static", "tool": "nncf", "tool_version": "2.11"}
    quantization = Details.from_dict({"quantization": data}).quantization
    assert quantization is not None and quantization.tool == {
        "tool": "nncf",
        "tool_version": "2.11",
    }
    with pytest.raises(TypeError):
        quantization.tool["tool"] = "other"  # type: ignore[index]
    assert list(to_dict(quantization)) == list(data)


def mutable_inside(value: object, where: str) -> list[str]:
    """The places in `value` (a record, walked through its fields, tuples and the records
    a read-only mapping holds: a ceiling's conditions) that hold a list or a dict; a
    read-only mapping's other values are JSON, and not walked."""
    if isinstance(value, list | dict):
        return [where]
    if isinstance(value, tuple):
        return [p for i, item in enumerate(value) for p in mutable_inside(item, f"{where}[{i}]")]
    if isinstance(value, MappingProxyType):
        return [
            place
            for key, item in value.items()
            if dataclasses.is_dataclass(item)
            for place in mutable_inside(item, f"{where}.{key}")
        ]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            place
            for f in dataclasses.fields(value)
            for place in mutable_inside(getattr(value, f.name), f"{where}.{f.name}")
        ]
    return []


RUN_FILES = [
    *sorted(FIXTURES.glob("*-run.json")),
    RESULTS / "h200" / "llama-3.1-8b-bf16-b8.json",  # GPU readings at every point
    RESULTS / "h200" / "bert-large-amp-bf16-seq512-compile.json",  # pipelined, int8 check
]


@pytest.mark.parametrize(
    "path",
    [*sorted(FIXTURES.glob("*-run.json")), *sorted(RESULTS.glob("*/*.json"))],
    ids=lambda path: f"{path.parent.name}/{path.name}",
)
def test_every_container_a_run_file_reads_into_is_immutable(path):
    """The fixtures and every reference run: GPU timelines, a ceiling's power regimes,
    LoadGen, DDP, an endpoint's load, a training run's epochs (schema 2, upgraded), and
    the run's env."""
    run = read_json(path)
    assert isinstance(run.results, tuple) and run.results
    assert mutable_inside(run.env, "env") == []  # its GPUs, versions, ceilings, fleet mark
    for index, result in enumerate(run.results):
        found = mutable_inside(dataclasses.replace(result, case=None), f"results[{index}]")
        assert found == [], found
        timeline = result.details.timeline
        assert timeline is None or isinstance(timeline, Timeline)


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda path: path.name)
def test_a_run_read_and_written_again_is_byte_identical(path, tmp_path):
    from dlbench.results.files import write_json

    write_json(read_json(path), tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    assert json.loads(json.dumps(run_json(read_json(path)))) == json.loads(path.read_text())


@pytest.mark.parametrize(
    "path", sorted(RESULTS.glob("*/*.json")), ids=lambda path: f"{path.parent.name}/{path.name}"
)
def test_a_reference_runs_details_are_written_back_as_they_were(path):
    """Every typed part, GPU timelines included, byte for byte (a run file of schema 2
    is upgraded when read: its details are rewritten, and not compared)."""
    stored = json.loads(path.read_text())
    if stored["schema_version"] < 3:
        pytest.skip("written at schema 2: upgraded when read")
    written = run_json(read_json(path))
    for old, new in zip(stored["results"], written["results"], strict=True):
        assert json.dumps(new["details"]) == json.dumps(old["details"])


ALL_RUN_FILES = sorted(
    [*(FIXTURES.parent).glob("*/*-run.json"), *RESULTS.glob("*/*.json")],
    key=lambda path: (path.parent.name, path.name),
)


@pytest.mark.parametrize("path", ALL_RUN_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_runs_env_is_written_back_as_it_was(path):
    """Every fixture (dlbench 0.1's, schema 2's, schema 3's) and reference run: its env,
    GPUs, versions, ceilings and a newer dlbench's keys, byte for byte and in its order
    (an env is not upgraded with its run)."""
    stored = json.loads(path.read_text())
    assert json.dumps(run_json(read_json(path))["env"]) == json.dumps(stored["env"])


def test_a_run_with_a_full_env_read_and_written_again_is_byte_identical(tmp_path):
    from dlbench.results.files import write_json

    env = {
        "hostname": "h",
        "gpus": [{"name": "H200", "memory_mb": None, "driver": "580.1", "uuid": "GPU-1"}],
        "frameworks": {"torch": "2.13.0", "jax": None},
        "thread_env": {"OMP_NUM_THREADS": "4", "KMP_BLOCKTIME": "0"},
        "ceilings": {
            "source_run": "roof",
            "values": {"cuda:0|memory|sustained": 4100.0, "cpu|memory": 9.5},
            "conditions": {"cuda:0|memory|sustained": {"sm_clock_mhz": 1980.0}},
        },
        "fleet": {"fleet_id": "f", "started_at": "s", "node_id": "n", "node_ip": "i",
                  "hostname": None, "failure": None},
        "a_newer_fact": [1, {"two": 2}],
    }  # fmt: skip
    write_json(make_run([make_result()], env=env), tmp_path / "first.json")
    run = read_json(tmp_path / "first.json")
    assert mutable_inside(run.env, "env") == []
    write_json(run, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "first.json").read_bytes()
    assert json.dumps(json.loads((tmp_path / "again.json").read_text())["env"]) == json.dumps(env)


def test_a_result_and_a_run_pickle_and_copy_with_their_mappings_read_only():
    """A loaded Run can go to another process (multiprocessing, Ray) or be copied:
    dlbench.read_only registers how a read-only mapping pickles."""
    import copy
    import pickle

    result = make_result(details={"extra": {"providers": ["CPUExecutionProvider"]}})
    run = make_run([result])
    for back in (pickle.loads(pickle.dumps(run)), copy.deepcopy(run)):
        assert back == run
        with pytest.raises(TypeError):
            back.results[0].details.extra["providers"] = []  # type: ignore[index]
