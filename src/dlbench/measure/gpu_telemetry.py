"""GPU telemetry through NVML (pynvml, from the nvidia-ml-py package), read by the parent.

NVML answers questions about the whole device from any process, so the
parent can watch the worker's GPU without touching the worker. Everything
here degrades: no pynvml, no driver, no device, or a GPU that does not
report some field all yield less data, never an exception, because
telemetry must not fail a benchmark.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, TypeVar

from dlbench.untyped import JSONValue

if TYPE_CHECKING:  # pynvml is imported where NVML is opened, and ships no types
    from pynvml import c_nvmlDevice_t as NvmlHandle  # a device's handle

# Clock-event ("throttle") reason bits: the nvmlClocksEventReason* values of nvml.h
# (and of pynvml, named in each comment), whose nvmlClocksEventReasonAll is 0x1FF.
# Written out so the mapping works without pynvml; the test holds each to the
# binding. GPU idle (0x1) and the applications-clocks setting (0x2) are left out:
# they are not limits a benchmark ran into. (pynvml also carries 0x200 and 0x400
# under the deprecated nvmlClocksThrottleReason* names only; nvml.h defines
# neither, so no driver sets them and they are not named here.)
THROTTLE_REASONS: dict[int, str] = {
    0x4: "power",  # SwPowerCap: software power cap
    0x8: "hw-slowdown",  # HwSlowdown: over temperature, power brake or fast trigger
    0x10: "sync-boost",  # SyncBoost: held to the clocks of other GPUs in its group
    0x20: "thermal",  # SwThermalSlowdown
    0x40: "hw-thermal",  # HwThermalSlowdown
    0x80: "hw-power-brake",  # HwPowerBrakeSlowdown: external power brake
    0x100: "display-clock",  # DisplayClockSetting
}
# Which flags count as "a limit held the clocks down" in the verdict, and as what.
VERDICT_GROUPS: dict[str, frozenset[str]] = {
    "thermal": frozenset({"thermal", "hw-thermal"}),
    "power": frozenset({"power", "hw-power-brake"}),
    "hw-slowdown": frozenset({"hw-slowdown"}),
}
# A limit hit in one sample in twenty is noise; in more than one in ten it shapes the result.
VERDICT_FRACTION = 0.1
MIB = 1024 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class GpuTelemetryReading:
    """One GPU at one point of a case's timeline (measure.timeline), as NVML reported it.

    A field the device could not report (many GPUs lack power or clock-reason readings;
    NVML may list none of the worker's processes) is None, and left out of the JSON."""

    index: int  # the CUDA device index the case used
    gpu_util_percent: float | None = None
    gpu_mem_used_mb: float | None = None  # the whole device's
    gpu_process_mem_mb: float | None = None  # the worker's processes' own
    sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    # the clock-event reasons that are limits (throttle_names); () where none held
    throttle: tuple[str, ...] | None = None
    # keys a reading stored otherwise holds (a schema-2 test fixture's `memory_used_mb`),
    # kept as they came after the named ones, read-only: spec.record_dict's REST_FIELD,
    # spelt out here because measure sits below spec
    other: Mapping[str, JSONValue] = field(
        default_factory=lambda: MappingProxyType({}), metadata={"rest": True}
    )


def throttle_names(mask: int) -> list[str]:
    """Readable names of the limiting bits set in an NVML clock-event reasons mask."""
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def throttle_verdict(points: Iterable[Sequence[GpuTelemetryReading]]) -> str | None:
    """ "thermal", "power", "thermal, power"...: limits that held the clocks down, from
    each timeline point's GPU readings.

    A limit is named when more than VERDICT_FRACTION of the timeline points
    with a GPU throttle reading have it on any device; None when none does.
    """
    with_reading = 0
    hits = dict.fromkeys(VERDICT_GROUPS, 0)
    for readings in points:
        reasons = [d.throttle for d in readings if d.throttle is not None]
        if not reasons:
            continue
        with_reading += 1
        flags = {flag for each in reasons for flag in each}
        for group, members in VERDICT_GROUPS.items():
            if flags & members:
                hits[group] += 1
    named = [g for g, n in hits.items() if with_reading and n / with_reading > VERDICT_FRACTION]
    return ", ".join(named) or None


def device_indices(device: str) -> list[int]:
    """The CUDA device indices a case's device string uses; [] for the CPU.

    "auto" may still land on the CPU; the caller finds out from the Result.
    """
    if device == "cpu":
        return []
    _, _, index = device.partition(":")
    return [int(index)] if index.isdigit() else [0]


class GpuTelemetry:
    """Reads NVML for a fixed set of devices; build it with `GpuTelemetry.open`."""

    def __init__(self, nvml: ModuleType, handles: list[tuple[int, NvmlHandle]]) -> None:
        self._nvml = nvml
        self._handles = handles
        self._closed = False

    @classmethod
    def open(cls, indices: Sequence[int]) -> tuple[GpuTelemetry | None, str | None]:
        """(telemetry, None), or (None, a one-line reason) where none can be had."""
        try:
            import pynvml
        except ImportError:
            return None, "no GPU telemetry: pynvml not installed (pip install nvidia-ml-py)"
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError_LibraryNotFound:
            return None, "no GPU: NVML library not found"
        except pynvml.NVMLError_DriverNotLoaded:
            return None, "no GPU: no NVIDIA driver"
        except Exception as exc:  # any other NVML or ctypes failure means no telemetry
            return None, f"no GPU telemetry: NVML did not start ({exc})"
        try:
            count = pynvml.nvmlDeviceGetCount()
            if count == 0:
                raise LookupError("no GPU: NVML sees no devices")
            handles = [(index, _handle(pynvml, index, count)) for index in indices]
        except Exception as exc:
            _shutdown(pynvml)
            reason = str(exc) if isinstance(exc, LookupError) else f"NVML failed ({exc})"
            return None, reason if reason.startswith("no GPU") else f"no GPU telemetry: {reason}"
        return cls(pynvml, handles), None

    def read(self, pids: int | Collection[int]) -> tuple[GpuTelemetryReading, ...]:
        """One reading per device; a field the device cannot report is None."""
        wanted = {pids} if isinstance(pids, int) else set(pids)
        return tuple(self._read_device(index, handle, wanted) for index, handle in self._handles)

    def total_energy_j(self) -> float:
        """Joules these devices used since their driver loaded (NVML's cumulative counter)."""
        nvml = self._nvml
        return sum(nvml.nvmlDeviceGetTotalEnergyConsumption(h) for _, h in self._handles) / 1e3

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _shutdown(self._nvml)

    def _read_device(self, index: int, handle: NvmlHandle, pids: set[int]) -> GpuTelemetryReading:
        nvml = self._nvml
        # Each field on its own: many GPUs lack power or clock-reason readings.
        return GpuTelemetryReading(
            index=index,
            gpu_util_percent=_field(lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)),
            gpu_mem_used_mb=_field(lambda: _mib(nvml.nvmlDeviceGetMemoryInfo(handle).used)),
            gpu_process_mem_mb=_field(lambda: _process_memory(nvml, handle, pids)),
            sm_clock_mhz=_field(
                lambda: int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
            ),
            temperature_c=_field(
                lambda: int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
            ),
            power_w=_field(lambda: round(nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0, 1)),
            throttle=_field(lambda: tuple(throttle_names(_clock_event_reasons(nvml, handle)))),
        )


def _field(read: Callable[[], T | None]) -> T | None:
    """One NVML reading, None where the device cannot give it (NVML raises)."""
    try:
        return read()
    except Exception:
        return None


def _handle(nvml: ModuleType, index: int, count: int) -> NvmlHandle:
    """NVML's handle for CUDA device `index`, honouring CUDA_VISIBLE_DEVICES.

    The worker inherits this process's CUDA_VISIBLE_DEVICES, so its cuda:N is
    the N-th visible device. (CUDA orders devices fastest-first and NVML by PCI
    bus unless CUDA_DEVICE_ORDER=PCI_BUS_ID; on a machine of identical GPUs,
    the usual case, the two agree.)
    """
    setting = os.environ.get("CUDA_VISIBLE_DEVICES")
    if setting is None:
        target = str(index)
    else:
        visible = [v.strip() for v in setting.split(",") if v.strip()]
        if index >= len(visible):
            raise LookupError(f"no GPU: cuda:{index} is not in CUDA_VISIBLE_DEVICES")
        target = visible[index]
    if target.startswith(("GPU-", "MIG-")):
        return nvml.nvmlDeviceGetHandleByUUID(target)
    if not target.isdigit() or int(target) >= count:
        raise LookupError(f"no GPU: device {target} not found (NVML sees {count})")
    return nvml.nvmlDeviceGetHandleByIndex(int(target))


def _clock_event_reasons(nvml: ModuleType, handle: NvmlHandle) -> int:
    """The current reasons mask; the newer name first, the deprecated one on older drivers."""
    if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons"):
        try:
            return int(nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
        except Exception:
            pass  # a driver older than the binding lacks the new entry point
    return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def _process_memory(nvml: ModuleType, handle: NvmlHandle, pids: set[int]) -> float | None:
    """GPU memory of the worker's processes, or None where NVML does not list them.

    Inside a container NVML may report host pids, which then match nothing.
    """
    used = [
        p.usedGpuMemory
        for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        if p.pid in pids and p.usedGpuMemory is not None
    ]
    return _mib(sum(used)) if used else None


def _mib(value: int) -> float:
    return round(value / MIB, 1)


def _shutdown(nvml: ModuleType) -> None:
    with contextlib.suppress(Exception):  # nothing left to clean up matters to the benchmark
        nvml.nvmlShutdown()
