"""The machine fingerprint stored with every run, and what else a run's `env` holds.

Gathered in the parent without importing any framework: versions come from
package metadata, the GPU from NVML or nvidia-smi when present. Each fact is
one field of `Fingerprint` that names its reader (`fact(...)`), and every one
of them can change a measured number, so compare shows each that differs
between two runs (`context`). A run written before a fact was recorded lacks
it (the field is ABSENT, and its JSON still lacks the key): `context` reads it
as UNKNOWN. Beside the facts, `env` holds the hardware ceilings a run is read
against (`Ceilings`) and, for a fleet's node, its `FleetMark`.

Like a result's details (results.details), every record here is immutable all the
way down, whether collected in this process or read from a file: the GPUs are a
tuple; the versions, the thread variables, the ceilings' figures and a newer
dlbench's keys (`other`) read-only mappings (`Immutable`), the JSON values inside
`other` kept as JSON has them. `Fingerprint.value_of` gives a fact as its JSON holds
it (a list, an object: a copy), as readers that test for JSON's types expect.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar

import psutil

from dlbench import __version__
from dlbench.results.details import Immutable
from dlbench.spec.case import available_cpus
from dlbench.spec.record_dict import ABSENT, REST_FIELD, Absent, from_dict, plain, to_dict
from dlbench.spec.registry import FRAMEWORKS
from dlbench.untyped import JSONObject, JSONValue

# Variables that change how many threads a framework uses, or how they wait; recorded
# because a number measured under OMP_NUM_THREADS=1 is not comparable to one without,
# nor is CPU use measured with OpenMP's threads spinning at each barrier (its default)
# comparable to one with them sleeping (OMP_WAIT_POLICY=PASSIVE).
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "KMP_BLOCKTIME",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "XLA_FLAGS",
    "KMP_AFFINITY",
    "OMP_PROC_BIND",
    "CUDA_VISIBLE_DEVICES",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
OWN_CGROUPS = Path("/proc/self/cgroup")
SYS_CPU = Path("/sys/devices/system/cpu")


def cpu_model() -> str:
    """The CPU's marketing name; /proc/cpuinfo on Linux, platform elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class GpuFact(Immutable):
    """One GPU as nvidia-smi reports it."""

    name: str
    memory_mb: float | Absent | None = ABSENT  # None: nvidia-smi said "[N/A]"
    driver: str | Absent = ABSENT
    # keys this dlbench does not name (a newer one's), kept as they came: any JSON
    other: Mapping[str, JSONValue] = field(default_factory=dict, metadata=REST_FIELD)


def gpus() -> tuple[GpuFact, ...]:
    """NVIDIA GPUs as nvidia-smi reports them; empty where there is none."""
    return _nvidia_smi_gpus()


@functools.cache
def _nvidia_smi_gpus() -> tuple[GpuFact, ...]:
    """nvidia-smi's answer, asked once per process: a machine's GPUs do not change
    while it runs, and each ask starts a process (seconds where the driver is slow)."""
    if shutil.which("nvidia-smi") is None:
        return ()
    query = "name,memory.total,driver_version"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    found: list[GpuFact] = []
    for line in out.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3:
            continue  # not a line in the asked format; say nothing rather than guess
        name, memory, driver = parts
        try:
            memory_mb: float | None = float(memory)
        except ValueError:
            memory_mb = None  # e.g. "[N/A]"
        found.append(GpuFact(name, memory_mb, driver))
    return tuple(found)


# Libraries that build the models or compile them, whose version changes the work a
# step does: transformers' BERT and Llama code (its attention path, its generate
# loop), the tokenizers library, and Triton (torch.compile's GPU kernels).
MODEL_LIBRARIES = ("transformers", "tokenizers", "triton")


def model_library_versions() -> Mapping[str, str | None]:
    """The installed version of each model library (None: not installed), from package
    metadata, without importing it; read-only, as the Fingerprint holds it."""
    found: dict[str, str | None] = {}
    for name in MODEL_LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return MappingProxyType(found)


def framework_versions() -> Mapping[str, str | None]:
    """The installed version of each framework (None: not installed), read-only."""
    return MappingProxyType(
        {name: info.installed_version() for name, info in FRAMEWORKS.items() if name != "null"}
    )


def cpu_quota(cgroup_root: Path = CGROUP_ROOT, own: Path = OWN_CGROUPS) -> float | None:
    """The CPUs' worth of time this process's cgroups allow (CFS quota over period,
    the tightest from its cgroup up to the root), None without a quota. Affinity
    (cpu_available) does not see a container's `--cpus 1.5`."""
    found: list[float] = []
    for version, path in _cgroup_paths(own):
        top = cgroup_root if version == 2 else cgroup_root / "cpu"
        read = _cgroup2_quota if version == 2 else _cgroup1_quota
        folder = top / path.lstrip("/")
        while True:
            quota = read(folder)
            if quota is not None:
                found.append(quota)
            if folder == top or top not in folder.parents:
                break
            folder = folder.parent
    return round(min(found), 2) if found else None


def _cgroup_paths(own: Path) -> list[tuple[int, str]]:
    """(cgroup version, path) of this process's CPU cgroups, from /proc/self/cgroup."""
    try:
        lines = own.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0" and parts[1] == "":
            paths.append((2, parts[2]))
        elif len(parts) == 3 and "cpu" in parts[1].split(","):
            paths.append((1, parts[2]))
    return paths


def _cgroup2_quota(folder: Path) -> float | None:
    text = _read(folder / "cpu.max")  # "max 100000", or "150000 100000"
    parts = text.split() if text else []
    if len(parts) != 2 or parts[0] == "max":
        return None
    return _ratio(parts[0], parts[1])


def _cgroup1_quota(folder: Path) -> float | None:
    quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
    if quota is None or period is None or quota.strip() == "-1":
        return None
    return _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        value = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None


def cpu_governor(sys_cpu: Path = SYS_CPU) -> str | None:
    """The cpufreq governor of the CPUs this process may run on ("performance",
    "powersave"; several, comma-joined, if they differ); None where the OS shows
    none (most VMs): powersave can halve a short case's clock."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    found = {_read(sys_cpu / f"cpu{cpu}" / "cpufreq" / "scaling_governor") for cpu in cpus}
    named = sorted(g.strip() for g in found if g and g.strip())
    return ",".join(named) if named else None


def smt_active(sys_cpu: Path = SYS_CPU) -> bool | None:
    """Whether SMT (hyper-threading) is on: two logical CPUs then share a core's units."""
    value = _read(sys_cpu / "smt" / "active")
    return None if value is None or value.strip() not in ("0", "1") else value.strip() == "1"


def cpu_boost(sys_cpu: Path = SYS_CPU) -> bool | None:
    """Whether the CPU may clock above its base (turbo, boost); None where not shown."""
    boost = _read(sys_cpu / "cpufreq" / "boost")
    if boost is not None and boost.strip() in ("0", "1"):
        return boost.strip() == "1"
    no_turbo = _read(sys_cpu / "intel_pstate" / "no_turbo")
    if no_turbo is not None and no_turbo.strip() in ("0", "1"):
        return no_turbo.strip() == "0"
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _ram_gb() -> float:
    return round(psutil.virtual_memory().total / 1024**3, 2)


def _thread_env() -> Mapping[str, str]:
    return MappingProxyType({k: os.environ[k] for k in THREAD_ENV_VARS if k in os.environ})


# a dataclass field, typed (as field() types it) as its default: ABSENT
def fact(read: Callable[[], object]) -> Absent:
    """A Fingerprint field: a machine fact, read by `read` when a run starts; ABSENT (its
    key left out of the JSON) in a run written before dlbench recorded it."""
    return field(default=ABSENT, metadata={FACT: read})


FACT = "fact"


@dataclass(frozen=True)
class RegimeConditions(Immutable):
    """What the GPU did while a ceiling's figure was measured (results.ceilings reads it)."""

    sm_clock_mhz: float | None = None
    power_w: float | None = None
    after_s: float | None = None
    kernel: str | None = None
    cool_start: bool | None = None
    # keys this dlbench does not name (a newer one's), kept as they came: any JSON
    other: Mapping[str, JSONValue] = field(default_factory=dict, metadata=REST_FIELD)


@dataclass(frozen=True)
class Ceilings(Immutable):
    """The hardware ceilings a run's results are read against (results.ceilings):
    rates by key ("cpu|gflops|fp32", "cuda:0|memory|sustained"), the run that measured
    them, and what the GPU did during each figure that has a power regime."""

    source_run: str | None
    values: Mapping[str, float]
    conditions: Mapping[str, RegimeConditions] = field(default_factory=dict)
    # keys this dlbench does not name (a newer one's), kept as they came: any JSON
    other: Mapping[str, JSONValue] = field(default_factory=dict, metadata=REST_FIELD)


@dataclass(frozen=True)
class FleetMark(Immutable):
    """Which fleet run a node's run belongs to, and which node it ran on (results.fleet_marks)."""

    # its JSON holds every field, as marks always have
    WRITES_EVERY_FIELD: ClassVar[bool] = True

    fleet_id: str
    started_at: str  # the fleet run's start, by the clock of the machine that started it
    node_id: str  # Ray's node id (hex)
    node_ip: str
    hostname: str | None = None
    # why the node has no run of its own (it died, timed out, or its run did not start);
    # None for a node whose `dlbench run` finished, whatever its cases did
    failure: str | None = None
    # keys this dlbench does not name (a newer one's), kept as they came: any JSON
    other: Mapping[str, JSONValue] = field(default_factory=dict, metadata=REST_FIELD)

    @property
    def node(self) -> str:
        """The node as tables name it: IP and the start of its id, since several Ray
        nodes may share a machine (and so an IP)."""
        return f"{self.node_ip} {self.node_id[:8]}"


@dataclass(frozen=True)
class Fingerprint(Immutable):
    """A run's `env`: every fact about the machine that a result's meaning depends on,
    in the order `dlbench env` and compare show them, then the ceilings and fleet mark.
    Add a fact here (a field made by `fact`) and it is recorded with every run and
    compared with no other edit."""

    hostname: str | Absent = fact(socket.gethostname)
    cpu_model: str | Absent = fact(cpu_model)
    cpu_logical: int | Absent | None = fact(lambda: psutil.cpu_count(logical=True))
    cpu_physical: int | Absent | None = fact(lambda: psutil.cpu_count(logical=False))
    cpu_available: int | Absent = fact(available_cpus)
    cpu_quota: float | Absent | None = fact(cpu_quota)
    cpu_governor: str | Absent | None = fact(cpu_governor)
    cpu_boost: bool | Absent | None = fact(cpu_boost)
    smt: bool | Absent | None = fact(smt_active)
    ram_gb: float | Absent = fact(_ram_gb)
    gpus: tuple[GpuFact, ...] | Absent = fact(gpus)
    os: str | Absent = fact(platform.platform)
    python: str | Absent = fact(lambda: sys.version.split()[0])
    python_implementation: str | Absent = fact(platform.python_implementation)
    dlbench: str | Absent = fact(lambda: __version__)
    frameworks: Mapping[str, str | None] | Absent = fact(framework_versions)
    model_libraries: Mapping[str, str | None] | Absent = fact(model_library_versions)
    thread_env: Mapping[str, str] | Absent = fact(_thread_env)
    # the process's scheduling niceness: beside other work, a run at 15 (as a Ray task
    # would be) gets a small share of the CPU
    niceness: int | Absent = fact(lambda: os.getpriority(os.PRIO_PROCESS, 0))
    # the newest ceilings of this machine when the run started, and those it measured
    ceilings: Ceilings | Absent = ABSENT
    fleet: FleetMark | Absent = ABSENT
    # keys this dlbench does not name (a newer one's facts), kept as they came (after the
    # named ones): any JSON
    other: Mapping[str, JSONValue] = field(default_factory=dict, metadata=REST_FIELD)

    @classmethod
    def from_dict(cls, data: JSONValue, where: str | None = None) -> Fingerprint:
        return from_dict(cls, data, where)

    def to_dict(self) -> JSONObject:
        return to_dict(self)

    def recorded(self) -> dict[str, JSONValue]:
        """The facts this run recorded, as its JSON holds them."""
        return {
            name: self.value_of(name) for name in FACT_NAMES if getattr(self, name) is not ABSENT
        }

    def value_of(self, name: str) -> JSONValue:
        """One fact as its JSON holds it (the GPUs a list, the versions a dict: a copy,
        whose change changes nothing here); None where the run did not record it."""
        value = getattr(self, name)
        return None if value is ABSENT else plain(value)

    def shown(self, name: str, missing: str = "?") -> str:
        """A fact as text for a title or a table; `missing` where not recorded (or null)."""
        value = self.value_of(name)
        return missing if value is None else str(value)

    @property
    def gpu_list(self) -> tuple[GpuFact, ...]:
        """The run's GPUs; none where it recorded none (or predates the fact)."""
        return self.gpus if isinstance(self.gpus, tuple) else ()

    @property
    def ceilings_or_none(self) -> Ceilings | None:
        return self.ceilings if isinstance(self.ceilings, Ceilings) else None


FACT_NAMES = tuple(f.name for f in fields(Fingerprint) if f.metadata.get(FACT))
# Installed versions of every framework; compare reads the version of each framework
# its cases use from the results instead (what the worker imported).
FRAMEWORKS_FACT = "frameworks"
UNKNOWN = "unknown"  # a fact the run did not record (written before it was a fact)


def fingerprint() -> Fingerprint:
    """Everything about this machine that a result's meaning depends on."""
    return Fingerprint(
        **{f.name: f.metadata[FACT]() for f in fields(Fingerprint) if f.name in FACT_NAMES}
    )


def context(env: Fingerprint) -> dict[str, JSONValue]:
    """A run's machine facts for compare: each fact but the installed frameworks,
    UNKNOWN where the run lacks it (env also holds what is not a fact: ceilings)."""
    recorded = env.recorded()
    return {name: recorded.get(name, UNKNOWN) for name in FACT_NAMES if name != FRAMEWORKS_FACT}
