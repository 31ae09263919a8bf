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

A server's device is its own (`remote`): its work is held to this machine's CPU
ceilings only where the server is surely here, on a loopback address of a machine
without a GPU; an engine dlbench serves (vLLM) runs on the case's device
(`roofline_device`). results.roofline_bound holds a prefill to the GEMM ceiling the
same way.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from dlbench.results.ceilings import ABOVE_CEILING, ceiling_for, ceiling_key
from dlbench.results.records import Result, Run
from dlbench.spec.case import REMOTE_DEVICE
from dlbench.spec.loads import ForeignServerLoad
from dlbench.spec.loop_kinds import load_part
from dlbench.untyped import JSONObject


@dataclass(frozen=True)
class GpuDatasheet:
    """A GPU's figures from NVIDIA's datasheets, by the name torch or nvidia-smi gives
    the device: memory bandwidth, and dense bf16 (= fp16) tensor throughput (half the
    "with sparsity" figure the datasheets print first)."""

    pattern: str
    label: str
    memory_gbps: float
    bf16_tflops: float


# The first pattern that matches names the GPU.
GPU_DATASHEETS: tuple[GpuDatasheet, ...] = (
    GpuDatasheet(r"\bH100\b.*\bPCIe\b", "H100 PCIe", 2000.0, 756.0),
    GpuDatasheet(r"\bH100\b.*\bNVL\b", "H100 NVL", 3900.0, 835.0),
    GpuDatasheet(r"\bH100\b", "H100 SXM", 3350.0, 989.0),
    GpuDatasheet(r"\bH200\b", "H200", 4800.0, 989.0),
    GpuDatasheet(r"\bA100\b.*\b80GB\b.*\bPCIe\b", "A100 80GB PCIe", 1935.0, 312.0),
    GpuDatasheet(r"\bA100\b.*\b80GB\b", "A100 80GB SXM", 2039.0, 312.0),
    GpuDatasheet(r"\bA100\b", "A100 40GB", 1555.0, 312.0),
    GpuDatasheet(r"\bL40S\b", "L40S", 864.0, 362.0),
    GpuDatasheet(r"\bL40\b", "L40", 864.0, 181.0),
    GpuDatasheet(r"\bL4\b", "L4", 300.0, 121.0),
)
NO_CEILING = "no {kind} ceiling for {device}: run `dlbench roofline` on this machine"
# A server's device, where it is not surely this machine's CPU
UNKNOWN_SERVER = ("the server's device is unknown here (not on a loopback address, or this "
                  "machine has a GPU): no ceiling to hold it to")  # fmt: skip


@dataclass(frozen=True)
class MemoryCeiling:
    """A device's memory bandwidth, and where the figure comes from."""

    gbps: float
    source: str  # "measured, run <id>" (with its power regime) or "datasheet: <GPU>"
    measured: bool

    @property
    def label(self) -> str:
        """The source without its run: "measured" (and its regime), or the datasheet's."""
        return self.source.partition(", run ")[0]


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

    def note(self, missing: str) -> str | None:
        """What a reader must know: why there is no ceiling (`missing`), or that the
        figure is above it."""
        if self.ceiling is None:
            return missing
        if self.above_bound:
            return (
                f"above the memory-bandwidth bound: {self.mbu:.0%} of {self.ceiling.gbps:,.0f} "
                f"GB/s ({self.ceiling.source}); a step cannot read its bytes faster than "
                "memory delivers them, so work was skipped or the clock missed some"
            )
        return None

    def as_dict(self, missing: str) -> JSONObject:
        """The figures as a run's JSON file shows them beside the result."""
        return {
            "bytes_per_step": self.bytes_per_step,
            "achieved_gbps": self.achieved_gbps,
            "ceiling_gbps": self.ceiling.gbps if self.ceiling else None,
            "ceiling_source": self.ceiling.source if self.ceiling else None,
            "bound_tokens_per_s": self.bound_tokens_per_s,
            "batch_bound_tokens_per_s": self.batch_bound_tokens_per_s,
            "mbu": self.mbu,
            "note": self.note(missing),
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
        batch=record.work_batch or result.case.batch_size or 1,
        achieved_gbps=achieved_decode_gbps(result),
        ceiling=memory_ceiling(result, run),
    )


def roofline_device(result: Result, run: Run | None) -> str | None:
    """The device whose ceilings hold the result's work: its own; a server's (remote)
    this machine's CPU where it is surely here (a loopback address, and no GPU here
    that it could run on), else None."""
    device = result.case.device
    if device != REMOTE_DEVICE:
        return device
    asked, load = load_part(result.case, ForeignServerLoad), result.details.endpoint
    url = (asked.endpoint if asked is not None else None) or (load.url if load else "")
    host = urlsplit(url).hostname
    if not host or not _loopback(host) or (run is not None and run.env.gpu_list):
        return None
    return "cpu"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def no_ceiling_note(result: Result, run: Run | None, kind: str = "memory") -> str:
    """Why a result has no `kind` ceiling (memory, GEMM): an unknown server's device, or
    no roofline run here."""
    device = roofline_device(result, run)
    return UNKNOWN_SERVER if device is None else NO_CEILING.format(kind=kind, device=device)


def memory_ceiling(result: Result, run: Run | None) -> MemoryCeiling | None:
    """The measured memory ceiling of the result's device, else its datasheet's."""
    return measured_memory_ceiling(result, run) or datasheet_memory_ceiling(
        device_name(result, run)
    )


def measured_memory_ceiling(result: Result, run: Run | None) -> MemoryCeiling | None:
    """The run's measured memory bandwidth of the result's device, in the power regime
    the result ran in where the ceilings have regimes (results.ceilings.ceiling_for)."""
    ceilings = run.env.ceilings_or_none if run else None
    device = roofline_device(result, run)
    stem = ceiling_key(device, "memory") if device else None
    held = ceiling_for(result, ceilings, stem) if stem and ceilings else None
    if ceilings is None or held is None or held.value <= 0:
        return None
    regime = f", {held.regime}" if held.regime else ""
    source = f"measured{regime}, run {ceilings.source_run}"
    return MemoryCeiling(held.value, source, measured=True)


def gpu_datasheet(name: str | None) -> GpuDatasheet | None:
    """The datasheet of a GPU named `name`, if it is a known one."""
    if not name:
        return None
    return next((sheet for sheet in GPU_DATASHEETS
                 if re.search(sheet.pattern, name, flags=re.IGNORECASE)), None)  # fmt: skip


def datasheet_memory_ceiling(name: str | None) -> MemoryCeiling | None:
    """The datasheet's memory bandwidth of a GPU named `name`, if it is a known one."""
    sheet = gpu_datasheet(name)
    if sheet is None:
        return None
    return MemoryCeiling(sheet.memory_gbps, f"datasheet: {sheet.label}", measured=False)


def device_name(result: Result, run: Run | None) -> str | None:
    """The GPU's name: as the framework gave it (details.extra), else nvidia-smi's
    for the result's device index in the run's fingerprint. None on a CPU."""
    device = result.case.device
    if not device.startswith("cuda"):
        return None
    name = result.details.extra.get("device_name")
    if isinstance(name, str):
        return name
    gpus = run.env.gpu_list if run else ()
    index = int(device.partition(":")[2] or 0)
    return gpus[index].name if index < len(gpus) else None
