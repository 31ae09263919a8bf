"""Energy over the measured region: RAPL's package counters, the reading's
arithmetic, and a result that says why it has none instead of reporting 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import dlbench
from factories import make_result, make_run

from dlbench.measure import energy, gpu_telemetry
from dlbench.measure.energy import (
    EnergyMeter,
    EnergyReading,
    EnergyUse,
    RaplCounter,
    rapl_package_zones,
)
from dlbench.measure.instruments import Measured, Reading
from dlbench.measure.monitor import ResourceUse
from dlbench.report.table import no_energy
from dlbench.results.details import Details
from dlbench.results.metrics import METRICS, read


def fake_zone(root: Path, name: str, microjoules: int, max_range: int = 10**9) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(f"{microjoules}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_range}\n")
    return zone


def test_rapl_counts_package_zones_only_and_unwraps_overflow(tmp_path):
    package = fake_zone(tmp_path, "intel-rapl:0", 999_000_000)
    fake_zone(tmp_path, "intel-rapl:0:0", 5)  # a core sub-zone: inside the package already
    zones, reason = rapl_package_zones(tmp_path)
    assert zones == [package] and reason == ""
    counter = RaplCounter(zones)
    assert counter() == 0.0
    # the counter wraps past max_energy_range_uj: 999 J -> 1000 J (= 0) -> 2 J is 3 J
    (package / "energy_uj").write_text("2000000\n")
    assert counter() == pytest.approx(3.0)


def test_without_rapl_the_reason_is_named(tmp_path):
    assert "absent" in rapl_package_zones(tmp_path / "missing")[1]
    assert "no RAPL package zone" in rapl_package_zones(tmp_path)[1]


def test_a_meter_reports_joules_per_sample_or_why_not(monkeypatch):
    clock = iter([0.0, 2.0, 0.0, 1.0])
    monkeypatch.setattr(energy.time, "perf_counter", lambda: next(clock))
    joules = iter([100.0, 150.0])
    meter = EnergyMeter("test counter", lambda: next(joules), None, min_region_s=0.2)
    meter.start()
    details = meter.stop().to_details(samples=25)
    assert details.joules == 50.0 and details.seconds == 2.0
    assert details.mean_power_w == 25.0 and details.joules_per_sample == 2.0

    unmetered = EnergyMeter(None, None, "no counter here", min_region_s=0)
    unmetered.start()
    assert unmetered.stop().to_details(10) == EnergyUse(unmeasurable="no counter here")


def test_a_region_too_short_or_a_stuck_counter_is_unmeasurable_not_zero(monkeypatch):
    clock = iter([0.0, 0.01, 0.0, 5.0])
    monkeypatch.setattr(energy.time, "perf_counter", lambda: next(clock))
    short = EnergyMeter("c", lambda: 1.0, None, min_region_s=0.2)
    short.start()
    assert "shorter" in short.stop().unmeasurable
    stuck = EnergyMeter("c", lambda: 1.0, None, min_region_s=0.2)
    stuck.start()
    assert "did not advance" in stuck.stop().unmeasurable
    assert EnergyReading(unmeasurable="x").to_details(3) == EnergyUse(unmeasurable="x")


class SteadyGpu:
    """NVML's part the meter reads: a total-energy counter of a GPU drawing 300 W."""

    def __init__(self, clock: list[float]) -> None:
        self._clock = clock

    def total_energy_j(self) -> float:
        return 300.0 * self._clock[0]

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("region_s", "joules"), [(0.5, None), (0.99, None), (1.5, 450.0)])
def test_gpu_energy_needs_a_region_of_a_second(monkeypatch, region_s, joules):
    """NVML's energy counter advances in steps of up to ~100 ms: below 1 s a region's
    joules could be 10% off or more, so the reading says why it has none."""
    clock = [0.0]
    monkeypatch.setattr(energy.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(
        gpu_telemetry.GpuTelemetry, "open", classmethod(lambda cls, i: (SteadyGpu(clock), None))
    )
    meter = EnergyMeter.for_device("cuda:0")
    meter.start()
    clock[0] = region_s
    reading = meter.stop()
    assert reading.joules == (pytest.approx(joules) if joules else None)
    if joules is None:
        assert f"shorter than the {energy.NVML_MIN_REGION_S} s" in (reading.unmeasurable or "")
        assert "nvml" in (reading.unmeasurable or "")


def test_a_reading_records_its_window_and_energy_as_the_details_own_keys():
    """The instruments' record (Measured) is the base of Details: its fields are
    details keys, written and read back like any other (a new quantity is one field
    in measure/instruments.py, none in results/)."""
    usage = ResourceUse(100.0, 10.0, None, None, wall_start_epoch_s=5.0, wall_end_epoch_s=7.0)
    reading = Reading(usage, EnergyReading("test counter", 4.0, 2.0))
    details = reading.recorded_in(Details(loop_wall_s=2.0), samples_done=8)
    data = details.to_dict()
    assert data == {
        "measured_wall": [5.0, 7.0],
        "energy": {
            "source": "test counter",
            "joules": 4.0,
            "seconds": 2.0,
            "mean_power_w": 2.0,
            "joules_per_sample": 0.5,
        },
        "loop_wall_s": 2.0,
    }
    assert Details.from_dict(json.loads(json.dumps(data))) == details
    assert issubclass(Details, Measured)
    # a process that meters nothing (a DDP rank) still records its window
    unmetered = Reading(usage, None).recorded_in(Details(), samples_done=8)
    assert unmetered.to_dict() == {"measured_wall": [5.0, 7.0]}


def test_energy_is_a_metric_and_missing_energy_is_listed_with_its_reason():
    measured = make_result(details={"energy": {"joules_per_sample": 0.5, "mean_power_w": 300}})
    missing = make_result(details={"energy": {"unmeasurable": "no RAPL here"}})
    assert read(METRICS["energy"], measured) == 0.5 and read(METRICS["power"], measured) == 300
    assert read(METRICS["energy"], missing) is None
    assert no_energy(make_run([measured, missing, missing])) == ["no RAPL here"]


@pytest.mark.integration
def test_a_cpu_result_carries_an_energy_reading_or_its_reason(tmp_path):
    out = tmp_path / "run.json"
    done = dlbench("run", "-w", "mlp", "-f", "null", "--min-time", "0.3", "--json", str(out))
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())["results"]
    reading = result["details"]["energy"]
    if "unmeasurable" in reading:
        assert reading["unmeasurable"] and f"energy: unmeasurable ({reading['unmeasurable']})" in (
            done.stdout
        )
    else:
        assert reading["joules_per_sample"] > 0 and reading["source"].startswith("rapl")
