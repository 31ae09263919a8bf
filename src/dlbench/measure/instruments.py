"""The instruments that bracket every measured region, and what they record.

The step loop, the epoch loop, a DDP rank and a LoadGen test each time their
own work, and nothing else: each starts `Instruments` just before its region
and stops them just after (outside the timed steps), then hands the `Reading`
to the worker's `result_from` (worker.result), which records it into the
result's details (`Reading.recorded_in`).

`Measured` is what the instruments record there. A result's details
(results.details.Details) are a `Measured`, so its fields are details fields
(same JSON keys, same readers) without a line in results/. A newly measured
quantity is therefore three files: its meter and record (a module of
measure/, as energy.py holds EnergyMeter and EnergyUse), this module (its
field on Measured, its start and stop in Instruments, its line in
Reading.recorded_in), and its Metric (results/metrics.py). No loop changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

from dlbench.measure.energy import EnergyMeter, EnergyReading, EnergyUse
from dlbench.measure.monitor import ProcessMonitor, ResourceUse


@dataclass(frozen=True)
class Measured:
    """What the instruments record into a result's details (the base of Details)."""

    # the region's wall-clock bounds (epoch seconds): they pick it out of the parent's
    # timeline
    measured_wall: tuple[float, ...] | None = None
    energy: EnergyUse | None = None


M = TypeVar("M", bound=Measured)


@dataclass(frozen=True)
class Reading:
    """What the instruments saw over one measured region."""

    usage: ResourceUse
    # None where this process meters nothing (a DDP rank whose CPU rank 0 meters)
    energy: EnergyReading | None

    def recorded_in(self, record: M, samples_done: float) -> M:
        """`record` (a result's details) with the region's place on the wall clock and
        its energy per sample."""
        window = (self.usage.wall_start_epoch_s, self.usage.wall_end_epoch_s)
        if self.energy is None:
            return replace(record, measured_wall=window)
        return replace(record, measured_wall=window, energy=self.energy.to_details(samples_done))


class Instruments:
    """The resource monitor and the energy meter: start() just before the region,
    stop() just after. Neither samples during it: each reads its counters twice."""

    def __init__(self, device: str, meter_energy: bool = True) -> None:
        self._monitor = ProcessMonitor()
        self._meter = EnergyMeter.for_device(device) if meter_energy else None

    def start(self) -> None:
        self._monitor.start()
        if self._meter is not None:
            self._meter.start()

    def stop(self) -> Reading:
        energy = self._meter.stop() if self._meter is not None else None
        return Reading(self._monitor.stop(), energy)
