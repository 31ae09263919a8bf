"""A generation result's decode against the memory-bandwidth bound, computed when read.

A decode step of a dense decoder reads every weight once, for all of the batch's
sequences, and each sequence's KV cache: no engine takes a step faster than the
memory delivers those bytes. From the bytes one step must read (the result's
`generation.decode_bytes_per_step`: workloads.decoder.decode_step_bytes) and the
median TPOT:

- achieved decode bandwidth = bytes per step / TPOT p50;
- the bound, per sequence = ceiling bandwidth / bytes per step (tokens/s), and the
  batch's = batch x that, the figure decode tokens/s is held to;
- MBU (memory-bandwidth utilisation) = achieved / ceiling = decode tokens/s / the
  batch's bound.

The ceiling is the run's measured memory bandwidth of the result's device
(`dlbench roofline`'s copy, results.ceilings) where the run has one; else, for a GPU
whose datasheet figure is known, that figure, labelled so; else none, and the bound
says to run `dlbench roofline`. Like every derived value it is computed when read,
from the result and its run, never stored. A figure above the bound is a bug (work
skipped, a clock that missed work), said as such, never a record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dlbench.results.ceilings import ABOVE_CEILING, ceiling_for, ceiling_key
from dlbench.results.records import Result, Run

# GPU memory bandwidth from NVIDIA's datasheets (GB/s), by the name torch or
# nvidia-smi gives the device; the first pattern that matches names it.
DATASHEET_MEMORY_GBPS: tuple[tuple[str, float, str], ...] = (
    (r"\bH100\b.*\bPCIe\b", 2000.0, "H100 PCIe"),
    (r"\bH100\b.*\bNVL\b", 3900.0, "H100 NVL"),
    (r"\bH100\b", 3350.0, "H100 SXM"),
    (r"\bH200\b", 4800.0, "H200"),
    (r"\bA100\b.*\b80GB\b.*\bPCIe\b", 1935.0, "A100 80GB PCIe"),
    (r"\bA100\b.*\b80GB\b", 2039.0, "A100 80GB SXM"),
    (r"\bA100\b", 1555.0, "A100 40GB"),
    (r"\bL40S\b", 864.0, "L40S"),
    (r"\bL40\b", 864.0, "L40"),
    (r"\bL4\b", 300.0, "L4"),
)
NO_CEILING = "no memory ceiling for {device}: run `dlbench roofline` on this machine"


@dataclass(frozen=True)
class MemoryCeiling:
    """A device's memory bandwidth, and where the figure comes from."""

    gbps: float
    source: str  # "measured, run <id>" (with its power regime) or "datasheet: <GPU>"
    measured: bool


@dataclass(frozen=True)
class DecodeBound:
    """A generation result's decode against its memory-bandwidth bound."""

    bytes_per_step: float
    batch: int
    achieved_gbps: float | None  # bytes per step / TPOT p50
    ceiling: MemoryCeiling | None

    @property
    def bound_tokens_per_s(self) -> float | None:
        """The most tokens/s one sequence can decode: the ceiling over a step's bytes."""
        return self.ceiling.gbps * 1e9 / self.bytes_per_step if self.ceiling else None

    @property
    def batch_bound_tokens_per_s(self) -> float | None:
        bound = self.bound_tokens_per_s
        return bound * self.batch if bound is not None else None

    @property
    def mbu(self) -> float | None:
        if self.ceiling is None or self.achieved_gbps is None:
            return None
        return self.achieved_gbps / self.ceiling.gbps

    @property
    def above_bound(self) -> bool:
        """Faster than the memory can deliver: a measured ceiling gets its slack
        (ceilings.ABOVE_CEILING: a copy's rate, taken beyond the caches), a datasheet's
        none."""
        if self.mbu is None or self.ceiling is None:
            return False
        return self.mbu > (ABOVE_CEILING if self.ceiling.measured else 1.0)

    def note(self, device: str) -> str | None:
        if self.ceiling is None:
            return NO_CEILING.format(device=device)
        if self.above_bound:
            return (
                f"above the memory-bandwidth bound: {self.mbu:.0%} of {self.ceiling.gbps:,.0f} "
                f"GB/s ({self.ceiling.source}); a step cannot read its bytes faster than "
                "memory delivers them, so work was skipped or the clock missed some"
            )
        return None

    def as_dict(self, device: str) -> dict[str, Any]:
        """The figures as a run's JSON file shows them beside the result."""
        return {
            "bytes_per_step": self.bytes_per_step,
            "achieved_gbps": self.achieved_gbps,
            "ceiling_gbps": self.ceiling.gbps if self.ceiling else None,
            "ceiling_source": self.ceiling.source if self.ceiling else None,
            "bound_tokens_per_s": self.bound_tokens_per_s,
            "batch_bound_tokens_per_s": self.batch_bound_tokens_per_s,
            "mbu": self.mbu,
            "note": self.note(device),
        }


def achieved_decode_gbps(result: Result) -> float | None:
    """The bytes one decode step must read over the median TPOT, in GB/s."""
    record = result.details.generation
    if record is None or not record.decode_bytes_per_step or not record.tpot_p50_ms:
        return None
    return record.decode_bytes_per_step / (record.tpot_p50_ms / 1000.0) / 1e9


def decode_bound(result: Result, run: Run | None) -> DecodeBound | None:
    """The result's decode against the bound (None: not a measured generation, or one
    recorded before its bytes per step were)."""
    record = result.details.generation
    if not result.ok or record is None or not record.decode_bytes_per_step:
        return None
    return DecodeBound(
        bytes_per_step=record.decode_bytes_per_step,
        batch=result.case.batch_size or 1,
        achieved_gbps=achieved_decode_gbps(result),
        ceiling=memory_ceiling(result, run),
    )


def memory_ceiling(result: Result, run: Run | None) -> MemoryCeiling | None:
    """The measured memory ceiling of the result's device, else its datasheet's."""
    return measured_memory_ceiling(result, run) or datasheet_memory_ceiling(
        device_name(result, run)
    )


def measured_memory_ceiling(result: Result, run: Run | None) -> MemoryCeiling | None:
    """The run's measured memory bandwidth of the result's device, in the power regime
    the result ran in where the ceilings have regimes (results.ceilings.ceiling_for)."""
    ceilings = (run.env.get("ceilings") if run else None) or {}
    held = ceiling_for(result, ceilings, ceiling_key(result.case.device, "memory"))
    if held is None or held.value <= 0:
        return None
    regime = f", {held.regime}" if held.regime else ""
    source = f"measured{regime}, run {ceilings.get('source_run')}"
    return MemoryCeiling(held.value, source, measured=True)


def datasheet_memory_ceiling(name: str | None) -> MemoryCeiling | None:
    """The datasheet's memory bandwidth of a GPU named `name`, if it is a known one."""
    if not name:
        return None
    for pattern, gbps, label in DATASHEET_MEMORY_GBPS:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return MemoryCeiling(gbps, f"datasheet: {label}", measured=False)
    return None


def device_name(result: Result, run: Run | None) -> str | None:
    """The GPU's name: as the framework gave it (details.extra), else nvidia-smi's
    for the result's device index in the run's fingerprint. None on a CPU."""
    device = result.case.device
    if not device.startswith("cuda"):
        return None
    name = result.details.extra.get("device_name")
    if isinstance(name, str):
        return name
    gpus = (run.env.get("gpus") if run else None) or []
    index = int(device.partition(":")[2] or 0)
    found = gpus[index] if index < len(gpus) else None
    return found.get("name") if isinstance(found, dict) else None
