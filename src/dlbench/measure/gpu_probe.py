"""The GPU's SM clock, power and clock limits, read by the worker itself (NVML).

The parent's timeline (measure.gpu_telemetry) samples NVML every 0.5 s; a
ceiling's burst lasts 150 ms, so the worker that runs it reads NVML at each
window's end instead. The device is found by its UUID, which the framework
reports, so CUDA_VISIBLE_DEVICES and device ordering cannot pick another GPU.
Everything degrades as the timeline's telemetry does: no pynvml, no driver or
no such device give no probe and a one-line reason, and a field the device does
not report is None.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from dlbench.measure.gpu_telemetry import VERDICT_GROUPS, throttle_names

if TYPE_CHECKING:  # pynvml is imported where NVML is opened, and ships no types
    from pynvml import c_nvmlDevice_t as NvmlHandle  # a device's handle

T = TypeVar("T")

# NVML_FI_DEV_POWER_INSTANT: the power drawn now, in mW. nvmlDeviceGetPowerUsage
# averages over 1 s on Ampere and newer, which a 150 ms burst cannot show: on an
# H100 it read 157 W where the instant reading was 853 W, 60 ms into a GEMM burst.
POWER_INSTANT_FIELD = 186
POWER_INSTANT = "instant (NVML field)"
POWER_AVERAGE = "NVML power usage (averaged over 1 s on Ampere and newer)"
# The clock-event reasons that mean a limit held the clock down (power, thermal,
# hardware slowdown), as the timeline's throttle verdict groups them
CLOCK_LIMITS = frozenset().union(*VERDICT_GROUPS.values())


@dataclass(frozen=True)
class GpuReading:
    """One NVML reading of the device: None where it does not report a field."""

    sm_clock_mhz: int | None = None
    power_w: float | None = None
    temperature_c: int | None = None
    # the clock-event reasons that held the clock down (CLOCK_LIMITS), by name
    limits: tuple[str, ...] = ()


class GpuProbe:
    """Reads one device's NVML fields; build it with `GpuProbe.open`."""

    def __init__(self, nvml: ModuleType, handle: NvmlHandle, instant_power: bool) -> None:
        self._nvml = nvml
        self._handle = handle
        self._instant_power = instant_power
        self.power_source = POWER_INSTANT if instant_power else POWER_AVERAGE

    @classmethod
    def open(cls, uuid: str) -> tuple[GpuProbe | None, str | None]:
        """(probe, None) for the GPU of this UUID ("GPU-..." or the bare hex), or
        (None, why there is none)."""
        try:
            import pynvml
        except ImportError:
            return None, "no NVML: pynvml not installed (pip install nvidia-ml-py)"
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # no library, no driver: no readings, never a failure
            return None, f"no NVML ({type(exc).__name__})"
        name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(name)
        except Exception as exc:
            _shutdown(pynvml)
            return None, f"NVML has no device {name} ({type(exc).__name__})"
        return cls(pynvml, handle, _instant_power_w(pynvml, handle) is not None), None

    def read(self) -> GpuReading:
        nvml, handle = self._nvml, self._handle
        power = _instant_power_w(nvml, handle) if self._instant_power else None
        if power is None:
            power = _or_none(lambda: round(nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0, 1))
        reasons = _or_none(lambda: _clock_event_reasons(nvml, handle))
        return GpuReading(
            sm_clock_mhz=_or_none(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            power_w=power,
            temperature_c=_or_none(
                lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            ),
            limits=tuple(n for n in throttle_names(reasons or 0) if n in CLOCK_LIMITS),
        )

    def close(self) -> None:
        _shutdown(self._nvml)


def _instant_power_w(nvml: ModuleType, handle: NvmlHandle) -> float | None:
    """The instant power field, or None where the driver does not have it."""

    def read() -> float | None:
        (value,) = nvml.nvmlDeviceGetFieldValues(handle, [POWER_INSTANT_FIELD])
        return round(value.value.uiVal / 1000.0, 1) if value.nvmlReturn == 0 else None

    return _or_none(read)


def _clock_event_reasons(nvml: ModuleType, handle: NvmlHandle) -> int:
    """The reasons mask; the newer entry point first, the deprecated one on old bindings."""
    if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons"):
        return int(nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
    return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def _or_none(read: Callable[[], T]) -> T | None:
    """The field, or None where the device or driver does not report it."""
    try:
        return read()
    except Exception:
        return None


def _shutdown(nvml: ModuleType) -> None:
    with contextlib.suppress(Exception):  # nothing left to clean up matters to the benchmark
        nvml.nvmlShutdown()
