"""Which int8 dot-product units this CPU has, read from /proc/cpuinfo.

An int8 model runs on any x86-64 CPU, but without a dot-product instruction
(AVX512-VNNI, AVX-VNNI, AMX) each int8 multiply-add takes several
instructions, and int8 can be slower than fp32: a result must say which it
ran on. Arm's dot-product and matrix-multiply extensions count too.
"""

from __future__ import annotations

from pathlib import Path

INT8_DOT_FLAGS = (
    "avx512_vnni",
    "avx_vnni",
    "avx_vnni_int8",
    "amx_int8",
    "asimddp",  # Arm: SDOT/UDOT
    "i8mm",  # Arm: int8 matrix multiply
)
CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo: Path = CPUINFO) -> set[str] | None:
    """The CPU's feature flags (x86 "flags", Arm "Features"); None where they cannot
    be read: unknown is not "none", and must not raise a flag."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return None


def int8_dot_units(cpuinfo: Path = CPUINFO) -> tuple[str, ...] | None:
    """The int8 dot-product extensions this CPU has, in INT8_DOT_FLAGS order (None
    where the CPU's flags cannot be read)."""
    flags = cpu_flags(cpuinfo)
    if flags is None:
        return None
    return tuple(flag for flag in INT8_DOT_FLAGS if flag in flags)
