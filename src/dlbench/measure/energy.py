"""Energy over the measured region, from the hardware's own cumulative counters.

A GPU case reads NVML's total-energy counter (millijoules since the driver
loaded) of its device; a CPU case reads RAPL's package counters under
/sys/class/powercap. Both count the whole device or socket, not this process
alone: an idle neighbour adds its share, which is why the region's length
and the machine's load are recorded beside it. Where no counter can be read
(no driver, a VM without RAPL, a counter only root may read) the reading says
why, and is never 0.

The counters are read just before the timed loop and just after it, never
inside: reading them costs tens of microseconds. A region shorter than its
counter resolves (MIN_REGION_S) has no joules, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")
# The shortest region each counter gives meaningful joules for. NVML's total-energy
# counter advances in steps of up to ~100 ms (A100 and H100 sample their power for
# 25 ms of every 100 ms and integrate that; older GPUs update less often), so each
# end of a region may lag by one update: the joules cover a window off by up to
# 100 ms, at most 10% of a 1 s region. RAPL's counters update about every
# millisecond, so 0.2 s keeps that error near 0.5%.
NVML_MIN_REGION_S = 1.0
RAPL_MIN_REGION_S = 0.2


@dataclass(frozen=True)
class EnergyReading:
    """Joules over a region, or why there are none (`unmeasurable`)."""

    source: str | None = None
    joules: float | None = None
    seconds: float | None = None
    unmeasurable: str | None = None

    def to_details(self, samples: float) -> EnergyUse:
        """The Result's `energy` entry: per sample and mean power, or the reason."""
        if self.unmeasurable is not None or self.joules is None or not self.seconds:
            return EnergyUse(unmeasurable=self.unmeasurable or "no reading")
        return EnergyUse(
            source=self.source,
            joules=round(self.joules, 6),
            seconds=round(self.seconds, 6),
            mean_power_w=round(self.joules / self.seconds, 3),
            joules_per_sample=self.joules / samples if samples else None,
        )


@dataclass(frozen=True)
class EnergyUse:
    """What a result keeps of its energy reading (details.energy): the joules over the
    measured region, per sample and as mean power, or why there are none. Stored as
    it is, so a new energy figure is one field here."""

    source: str | None = None
    joules: float | None = None
    seconds: float | None = None
    mean_power_w: float | None = None
    joules_per_sample: float | None = None
    unmeasurable: str | None = None


Counter = Callable[[], float]  # cumulative joules


class EnergyMeter:
    """start() just before the region, stop() just after; build it with `for_device`.

    A region shorter than `min_region_s`, the least its counter resolves, is
    unmeasurable (see NVML_MIN_REGION_S).
    """

    def __init__(
        self,
        source: str | None,
        counter: Counter | None,
        reason: str | None,
        close: Callable[[], None] | None = None,
        *,
        min_region_s: float,
    ) -> None:
        self._source, self._counter, self._reason = source, counter, reason
        self._close = close
        self._min_region_s = min_region_s
        self._start_j = 0.0
        self._start_s = 0.0

    @classmethod
    def for_device(cls, device: str) -> EnergyMeter:
        """NVML for a CUDA device, RAPL for the CPU; a meter that says why where neither."""
        if device.startswith("cuda"):
            return cls._nvml(device)
        if device == "cpu":
            return cls._rapl()
        return cls(None, None, f"no energy counter is read on {device} devices", min_region_s=0)

    @classmethod
    def _nvml(cls, device: str) -> EnergyMeter:
        from dlbench.measure.gpu_telemetry import GpuTelemetry, device_indices

        telemetry, reason = GpuTelemetry.open(device_indices(device))
        if telemetry is None:
            return cls(None, None, reason or "NVML unavailable", min_region_s=0)
        try:
            telemetry.total_energy_j()
        except Exception as exc:  # pre-Volta GPUs and some drivers have no energy counter
            telemetry.close()
            reason = f"NVML has no total-energy counter here ({exc})"
            return cls(None, None, reason, min_region_s=0)
        return cls(
            "nvml total energy (whole GPU)",
            telemetry.total_energy_j,
            None,
            telemetry.close,
            min_region_s=NVML_MIN_REGION_S,
        )

    @classmethod
    def _rapl(cls) -> EnergyMeter:
        zones, reason = rapl_package_zones()
        if not zones:
            return cls(None, None, reason, min_region_s=0)
        return cls(
            f"rapl package energy ({len(zones)} socket(s), whole package)",
            RaplCounter(zones),
            None,
            min_region_s=RAPL_MIN_REGION_S,
        )

    def start(self) -> None:
        if self._counter is not None:
            self._start_j = self._counter()
        self._start_s = time.perf_counter()

    def stop(self) -> EnergyReading:
        seconds = time.perf_counter() - self._start_s
        if self._counter is None:
            return EnergyReading(unmeasurable=self._reason)
        try:
            joules = self._counter() - self._start_j
        finally:
            if self._close is not None:
                self._close()
        if seconds < self._min_region_s:
            return EnergyReading(
                unmeasurable=f"measured region {seconds:.3f} s is shorter than the "
                f"{self._min_region_s} s its energy counter resolves ({self._source})"
            )
        if joules <= 0:
            return EnergyReading(unmeasurable="the energy counter did not advance")
        return EnergyReading(self._source, joules, seconds)


def rapl_package_zones(root: Path = POWERCAP) -> tuple[list[Path], str]:
    """The readable package-level RAPL zones, or ([], why none)."""
    if not root.is_dir():
        return [], "no RAPL interface: /sys/class/powercap is absent, as in most VMs"
    zones = sorted(
        zone
        for zone in root.glob("*rapl:*")
        if zone.name.count(":") == 1 and (zone / "energy_uj").exists()
    )
    if not zones:
        return [], "no RAPL package zone under /sys/class/powercap"
    try:
        for zone in zones:
            int((zone / "energy_uj").read_text())
    except PermissionError:
        return [], "RAPL counters are readable by root only on this machine"
    except (OSError, ValueError) as exc:
        return [], f"RAPL counter unreadable ({exc})"
    return zones, ""


class RaplCounter:
    """Cumulative joules over the package zones, unwrapping each counter's overflow."""

    def __init__(self, zones: list[Path]) -> None:
        self._zones = zones
        self._ranges = [_read_int(zone / "max_energy_range_uj") for zone in zones]
        self._last = [_read_int(zone / "energy_uj") for zone in zones]
        self._total_uj = 0

    def __call__(self) -> float:
        for index, zone in enumerate(self._zones):
            now = _read_int(zone / "energy_uj")
            delta = now - self._last[index]
            if delta < 0:  # the counter wrapped past max_energy_range_uj
                delta += self._ranges[index] or 0
            self._total_uj += delta
            self._last[index] = now
        return self._total_uj / 1e6


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return 0
