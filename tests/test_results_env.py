"""The machine fingerprint: each fact read from the OS's files, faked here in a folder."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

from dlbench.results.ceilings import merge
from dlbench.results.env import (
    FACT_NAMES,
    UNKNOWN,
    Ceilings,
    Fingerprint,
    FleetMark,
    GpuFact,
    RegimeConditions,
    context,
    cpu_boost,
    cpu_governor,
    cpu_quota,
    fingerprint,
    smt_active,
)
from dlbench.spec.record_dict import ABSENT, from_dict, to_dict


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_cgroup2_quota_is_the_tightest_on_the_way_to_the_root(tmp_path):
    own = tmp_path / "self-cgroup"
    write(own, "0::/pod/box\n")
    root = tmp_path / "cgroup"
    write(root / "pod" / "box" / "cpu.max", "max 100000\n")
    write(root / "pod" / "cpu.max", "150000 100000\n")
    assert cpu_quota(root, own) == 1.5
    write(root / "pod" / "box" / "cpu.max", "50000 100000\n")
    assert cpu_quota(root, own) == 0.5
    write(root / "pod" / "box" / "cpu.max", "max 100000\n")
    write(root / "pod" / "cpu.max", "max 100000\n")
    assert cpu_quota(root, own) is None


def test_a_cgroup1_quota_and_none_without_one(tmp_path):
    own = tmp_path / "self-cgroup"
    write(own, "4:memory:/x\n1:cpu,cpuacct:/box\n0::/\n")
    root = tmp_path / "cgroup"
    write(root / "cpu" / "box" / "cpu.cfs_quota_us", "200000\n")
    write(root / "cpu" / "box" / "cpu.cfs_period_us", "100000\n")
    assert cpu_quota(root, own) == 2.0
    write(root / "cpu" / "box" / "cpu.cfs_quota_us", "-1\n")
    assert cpu_quota(root, own) is None
    assert cpu_quota(root, tmp_path / "missing") is None


def test_governor_smt_and_boost_from_sysfs_and_none_where_not_shown(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    for cpu in cpus:
        write(tmp_path / f"cpu{cpu}" / "cpufreq" / "scaling_governor", "powersave\n")
    assert cpu_governor(tmp_path) == "powersave"
    write(tmp_path / f"cpu{cpus[0]}" / "cpufreq" / "scaling_governor", "performance\n")
    expected = "performance,powersave" if len(cpus) > 1 else "performance"
    assert cpu_governor(tmp_path) == expected
    write(tmp_path / "smt" / "active", "1\n")
    assert smt_active(tmp_path) is True
    write(tmp_path / "intel_pstate" / "no_turbo", "1\n")
    assert cpu_boost(tmp_path) is False
    write(tmp_path / "cpufreq" / "boost", "1\n")
    assert cpu_boost(tmp_path) is True
    empty = tmp_path / "empty"
    assert (cpu_governor(empty), smt_active(empty), cpu_boost(empty)) == (None, None, None)


def test_the_context_is_every_fact_but_the_installed_frameworks_unknown_where_missing():
    assert set(context(Fingerprint())) == set(FACT_NAMES) - {"frameworks"}
    assert set(context(Fingerprint()).values()) == {UNKNOWN}
    roofline = Ceilings(source_run="roof", values={"cpu|gflops|fp32": 1.0})
    assert context(Fingerprint(cpu_available=1, ceilings=roofline))["cpu_available"] == 1
    # recorded as unknown (no CPU quota) is not the same as not recorded at all
    assert context(Fingerprint(cpu_quota=None))["cpu_quota"] is None


def test_a_fact_not_recorded_stays_out_of_the_json_and_a_null_one_stays_null():
    data = {"hostname": "h", "cpu_quota": None, "a_newer_fact": [1, 2]}
    env = Fingerprint.from_dict(data)
    assert env.cpu_governor is ABSENT and env.cpu_quota is None
    assert env.to_dict() == data  # the newer dlbench's fact kept as it came
    with pytest.raises(ValueError, match=r"env\.cpu_available: expected int, not str"):
        Fingerprint.from_dict({"cpu_available": "2"}, "env")
    # a newer dlbench's fields of a GPU, of the ceilings and of a fleet mark are kept too
    nested = {
        "gpus": [{"name": "H200", "uuid": "GPU-1"}],
        "ceilings": {"source_run": "r", "values": {"cpu|memory": 9.5}, "measured_at": "t"},
        "fleet": {"fleet_id": "f", "started_at": "s", "node_id": "n", "node_ip": "i",
                  "hostname": None, "failure": None, "zone": "z"},
    }  # fmt: skip
    assert Fingerprint.from_dict(nested).to_dict() == nested


@pytest.mark.integration
def test_the_model_libraries_versions_are_read_without_importing_them():
    import importlib.metadata
    import subprocess
    import sys

    from dlbench.results.env import model_library_versions

    versions = model_library_versions()
    assert versions["transformers"] == importlib.metadata.version("transformers")
    assert set(versions) == {"transformers", "tokenizers", "triton"}
    code = ("import sys; from dlbench.results.env import fingerprint; fingerprint(); "
            "print(sorted({'transformers', 'triton', 'torch'} & set(sys.modules)))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


STORED_ENV = {
    "hostname": "h",
    "gpus": [{"name": "H200", "memory_mb": 143771.0, "driver": "580.1", "uuid": "GPU-1"}],
    "frameworks": {"torch": "2.13.0", "vllm": None},
    "model_libraries": {"transformers": "5.3.0", "triton": None},
    "thread_env": {"OMP_NUM_THREADS": "4"},
    "a_newer_fact": {"nested": [1, 2]},
}


def test_an_envs_gpus_and_versions_read_from_a_file_cannot_be_changed():
    env = Fingerprint.from_dict(STORED_ENV)
    assert isinstance(env.gpus, tuple) and env.gpu_list == env.gpus
    with pytest.raises(AttributeError):
        env.gpus.append(GpuFact("H100"))  # type: ignore[union-attr]
    for mapping in (env.frameworks, env.model_libraries, env.thread_env, env.other):
        assert isinstance(mapping, MappingProxyType)
    with pytest.raises(TypeError):
        env.frameworks["torch"] = "2.14.0"  # type: ignore[index]
    with pytest.raises(TypeError):
        env.model_libraries["triton"] = "3.4"  # type: ignore[index]
    with pytest.raises(TypeError):
        env.thread_env["OMP_NUM_THREADS"] = "1"  # type: ignore[index]
    with pytest.raises(TypeError):
        env.other["a_newer_fact"] = None  # type: ignore[index]
    with pytest.raises(TypeError):
        env.gpus[0].other["uuid"] = "GPU-2"  # type: ignore[index,union-attr]
    assert json.dumps(env.to_dict()) == json.dumps(STORED_ENV)  # keys in the file's order


def test_value_of_gives_a_fact_as_json_holds_it_a_copy_that_changes_nothing():
    env = Fingerprint.from_dict(STORED_ENV)
    installed = env.value_of("frameworks")
    assert type(installed) is dict and installed == STORED_ENV["frameworks"]
    gpus = env.value_of("gpus")
    assert type(gpus) is list and gpus == STORED_ENV["gpus"]
    installed["torch"] = "0.1"
    gpus.clear()
    assert env.frameworks["torch"] == "2.13.0" and len(env.gpu_list) == 1  # type: ignore[index]
    # (compare reads the installed versions through it, as a dict: test_report_compare's
    # test_only_the_versions_of_the_compared_cases_frameworks_are_context)


def test_a_fingerprint_built_here_holds_read_only_copies_of_what_it_was_given():
    versions = {"torch": "2.13.0"}
    gpus = [GpuFact("H200", other={"uuid": "GPU-1"})]
    env = Fingerprint(gpus=gpus, frameworks=versions)  # type: ignore[arg-type]  # a list
    versions["jax"] = "0.10.2"
    gpus.append(GpuFact("H100"))
    assert env.gpus == (GpuFact("H200", other={"uuid": "GPU-1"}),)
    assert dict(env.frameworks) == {"torch": "2.13.0"}  # type: ignore[arg-type]
    assert isinstance(env.frameworks, MappingProxyType)
    assert isinstance(env.gpu_list[0].other, MappingProxyType)
    again = replace(env, thread_env={"OMP_NUM_THREADS": "1"})
    assert isinstance(again.thread_env, MappingProxyType)
    # a fact not recorded stays ABSENT, not an empty mapping
    assert Fingerprint().frameworks is ABSENT and Fingerprint().gpu_list == ()


def test_the_facts_collected_here_are_tuples_and_read_only_mappings():
    env = fingerprint()
    assert isinstance(env.gpus, tuple)
    for name in ("frameworks", "model_libraries", "thread_env", "other"):
        assert isinstance(getattr(env, name), MappingProxyType), name
    with pytest.raises(TypeError):
        env.frameworks["torch"] = None  # type: ignore[index]
    # written, read and written again: the same bytes
    written = json.dumps(env.to_dict())
    assert json.dumps(Fingerprint.from_dict(json.loads(written)).to_dict()) == written


def test_ceilings_their_conditions_and_a_fleet_mark_are_read_only():
    data = {
        "source_run": "r",
        # not sorted: read and written in the file's order
        "values": {"cuda:0|memory|sustained": 4100.0, "cpu|memory": 9.5},
        "conditions": {"cuda:0|memory|sustained": {"sm_clock_mhz": 1980.0, "fan": 1}},
        "measured_at": "t",
    }
    ceilings = from_dict(Ceilings, data)
    assert json.dumps(to_dict(ceilings)) == json.dumps(data)
    seen = ceilings.conditions["cuda:0|memory|sustained"]
    assert isinstance(seen, RegimeConditions) and seen.other == {"fan": 1}
    for mapping, key in (
        (ceilings.values, "cpu|memory"),
        (ceilings.conditions, "cpu|memory"),
        (ceilings.other, "measured_at"),
        (seen.other, "fan"),
    ):
        with pytest.raises(TypeError):
            mapping[key] = None  # type: ignore[index]
    # a merge builds new ceilings, read-only too
    newer = Ceilings(source_run="s", values={"cpu|gflops|fp32": 50.0})
    merged = merge(ceilings, newer)
    assert isinstance(merged.values, MappingProxyType)
    assert isinstance(merged.conditions, MappingProxyType)
    assert dict(merged.values) == {"cuda:0|memory|sustained": 4100.0, "cpu|memory": 9.5,
                                   "cpu|gflops|fp32": 50.0}  # fmt: skip
    mark = from_dict(FleetMark, {"fleet_id": "f", "started_at": "s", "node_id": "n",
                                 "node_ip": "i", "zone": "z"})  # fmt: skip
    with pytest.raises(TypeError):
        mark.other["zone"] = "y"  # type: ignore[index]
