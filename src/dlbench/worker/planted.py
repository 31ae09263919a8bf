"""A planted slowdown that keeps the case's identity, for calibrating compare.

bench/aa_calibration.py sets DLBENCH_TEST_PLANT to check that compare finds
a change it knows is there: "threads=1" runs the framework on one thread
whatever the case asks, "gemm_scale=1.065" multiplies gemm's matrix size
(1.065^3: about 20% more work). Users never set it; a result made under it
says so in details["planted"], and its GFLOP/s count the work really done.
"""

from __future__ import annotations

import os

from dlbench.errors import CaseError

PLANT_ENV = "DLBENCH_TEST_PLANT"
KNOWN = ("threads", "gemm_scale")


def planted() -> dict[str, float]:
    """The planted changes asked for ({} normally)."""
    text = os.environ.get(PLANT_ENV, "").strip()
    if not text:
        return {}
    found: dict[str, float] = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key.strip() not in KNOWN:
            raise CaseError(f"{PLANT_ENV}: unknown key {key.strip()!r}; known: {', '.join(KNOWN)}")
        try:
            found[key.strip()] = float(value)
        except ValueError:
            raise CaseError(f"{PLANT_ENV}: {item!r} is not KEY=NUMBER") from None
    return found


def planted_params(
    workload: str, params: dict[str, int], plant: dict[str, float]
) -> dict[str, int]:
    """gemm's size scaled by gemm_scale; every other workload's params as they are."""
    if workload != "gemm" or "gemm_scale" not in plant:
        return params
    return {**params, "size": round(params["size"] * plant["gemm_scale"])}
