"""The machine fingerprint: each fact read from the OS's files, faked here in a folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlbench.results.env import (
    FACT_NAMES,
    UNKNOWN,
    Ceilings,
    Fingerprint,
    context,
    cpu_boost,
    cpu_governor,
    cpu_quota,
    smt_active,
)
from dlbench.spec.record_dict import ABSENT


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
