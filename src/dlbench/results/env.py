"""The machine fingerprint stored with every run.

Gathered in the parent without importing any framework: versions come from
package metadata, the GPU from NVML or nvidia-smi when present.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from typing import Any

import psutil

from dlbench import __version__
from dlbench.spec.case import available_cpus
from dlbench.spec.registry import FRAMEWORKS

# Variables that change how many threads a framework uses; recorded because a
# number measured under OMP_NUM_THREADS=1 is not comparable to one without.
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
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


def gpus() -> list[dict[str, Any]]:
    """NVIDIA GPUs as nvidia-smi reports them; empty where there is none."""
    if shutil.which("nvidia-smi") is None:
        return []
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
        return []
    found: list[dict[str, Any]] = []
    for line in out.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3:
            continue  # not a line in the asked format; say nothing rather than guess
        name, memory, driver = parts
        try:
            memory_mb: float | None = float(memory)
        except ValueError:
            memory_mb = None  # e.g. "[N/A]"
        found.append({"name": name, "memory_mb": memory_mb, "driver": driver})
    return found


def framework_versions() -> dict[str, str | None]:
    return {name: info.installed_version() for name, info in FRAMEWORKS.items() if name != "null"}


def fingerprint() -> dict[str, Any]:
    """Everything about this machine that a result's meaning depends on."""
    memory = psutil.virtual_memory()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_logical": psutil.cpu_count(logical=True),
        "cpu_physical": psutil.cpu_count(logical=False),
        "cpu_available": available_cpus(),
        "ram_gb": round(memory.total / 1024**3, 2),
        "gpus": gpus(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "dlbench": __version__,
        "frameworks": framework_versions(),
        "thread_env": {k: os.environ[k] for k in THREAD_ENV_VARS if k in os.environ},
    }
