"""The parent-side resource timeline: sampler, GPU telemetry fallbacks, PNG, runner wiring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from conftest import FAST, null_case
from factories import make_result, make_run

from dlbench.errors import UserError
from dlbench.launch.runner import run_case
from dlbench.measure import gpu_telemetry
from dlbench.measure.gpu_telemetry import (
    GpuTelemetry,
    GpuTelemetryReading,
    device_indices,
    throttle_names,
    throttle_verdict,
)
from dlbench.measure.timeline import TimelinePoint, TimelineSampler, TimelineSummary
from dlbench.report.timeline_plot import write_timeline_png, write_timeline_pngs
from dlbench.results.details import Details
from dlbench.results.files import read_json
from dlbench.results.records import Result, Run
from dlbench.spec.case import Settings
from dlbench.spec.record_dict import REST_FIELD, from_dict, to_dict

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def spawn(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


@pytest.fixture
def sleeper():
    child = spawn("import time; time.sleep(60)")
    yield child
    child.kill()
    child.wait()


@pytest.mark.alone
@pytest.mark.slow
def test_sampler_follows_a_busy_child():
    child = spawn("import time\nend = time.time() + 1.5\nwhile time.time() < end: pass")
    sampler = TimelineSampler(child.pid, interval=0.2)
    try:
        while child.poll() is None:
            time.sleep(sampler.interval)
            sampler.sample()
    finally:
        child.wait()
    points = sampler.points
    assert len(points) >= 4
    times = [p.t for p in points]
    assert times == sorted(times) and len(set(times)) == len(times)
    # Python's start-up reads files; every point after it is pure spinning.
    assert max(p.cpu_percent for p in points) > 50
    assert sum(p.cpu_percent for p in points[1:-1]) / len(points[1:-1]) > 50
    # the child may have exited, unreaped, before the last point: it has no memory left
    assert all(p.rss_mb is not None and p.rss_mb > 0 for p in points[:-1])
    assert all(len(p.cpu_cores) == psutil.cpu_count() for p in points)
    assert all(0 <= c <= 100 for p in points for c in p.cpu_cores)
    assert all(
        p.system_cpu_percent == pytest.approx(sum(p.cpu_cores) / len(p.cpu_cores), abs=0.1)
        for p in points
    )
    assert points[0].gpu is None and "gpu" not in to_dict(points[0])


@pytest.mark.alone
def test_an_exited_unreaped_process_gives_a_last_point_covering_its_end():
    # A measured region shorter than the interval falls between two points; the
    # point taken at the exit (the zombie keeps its CPU times) is the one covering it.
    child = spawn("import time\nend = time.time() + 0.6\nwhile time.time() < end: pass")
    sampler = TimelineSampler(child.pid, interval=5.0)
    try:
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.05)
        sampler.sample()
        sampler.sample()  # sampling ended with the exit: no second point
    finally:
        child.wait()
    (last,) = sampler.points
    assert last.cpu_percent > 50  # the spinning, up to the exit
    assert last.rss_mb is None and "rss_mb" not in to_dict(last)
    assert not sampler.active


@pytest.mark.integration
def test_sampling_a_process_that_exited_ends_quietly():
    child = spawn("pass")
    sampler = TimelineSampler(child.pid)
    child.wait()  # reaped: the pid no longer exists
    sampler.sample()
    sampler.sample()
    assert sampler.points == ()
    assert not sampler.active
    assert sampler.summary() == TimelineSummary(samples=0, window="whole case")


@pytest.mark.integration
def test_a_pid_that_never_existed_samples_nothing():
    child = spawn("pass")
    child.wait()
    sampler = TimelineSampler(child.pid)
    sampler.sample()
    assert not sampler.active and sampler.points == ()


@pytest.mark.integration
def test_points_are_halved_and_the_interval_doubled_at_the_cap(sleeper):
    sampler = TimelineSampler(sleeper.pid, interval=0.5, max_points=20)
    for _ in range(100):
        sampler.sample()
        assert len(sampler.points) <= 20
    # Sample 21 halves 21 points to 11; then every 10th sample halves again.
    assert len(sampler.points) == 20
    assert sampler.interval == 0.5 * 2**8
    times = [p.t for p in sampler.points]
    assert times == sorted(times)
    assert sampler.points[0].t < 0.5  # the start of the case is kept


@pytest.mark.alone
def test_the_child_of_the_sampled_process_counts(sleeper):
    # A shell that waits for its own busy child: the shell is idle, the grandchild busy.
    parent = spawn(
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        "'import time\\nend = time.time() + 0.8\\nwhile time.time() < end: pass'])"
    )
    sampler = TimelineSampler(parent.pid, interval=0.2)
    try:
        time.sleep(0.5)
        sampler.sample()
    finally:
        parent.wait()
    # the shell alone reads ~0%; its busy child, counted, a core's worth where it has one
    # (48% in a full-suite run that left something else busy on both cores)
    assert sampler.points and sampler.points[0].cpu_percent > 25


def record(point: dict) -> TimelinePoint:
    """A point given as its JSON (the readings every point has: 0 unless given)."""
    return from_dict(TimelinePoint, {"cpu_percent": 0.0, "cpu_cores": [], **point})


def synthetic_sampler(points: list[dict], origin: float = 1000.0) -> TimelineSampler:
    sampler = TimelineSampler.__new__(TimelineSampler)
    sampler.origin_epoch_s = origin
    sampler._points = [record(p) for p in points]
    return sampler


def test_summary_uses_the_points_inside_the_window():
    points = [
        {"t": 0.5, "cpu_percent": 10.0, "system_cpu_percent": 5.0, "rss_mb": 50.0, "load1": 1.0},
        {"t": 1.0, "cpu_percent": 90.0, "system_cpu_percent": 45.0, "rss_mb": 80.0, "load1": 2.0},
        {"t": 1.5, "cpu_percent": 100.0, "system_cpu_percent": 55.0, "rss_mb": 90.0, "load1": 3.0},
        {"t": 2.0, "cpu_percent": 5.0, "system_cpu_percent": 2.0, "rss_mb": 200.0},
    ]
    sampler = synthetic_sampler(points)
    inside = sampler.summary((1000.9, 1001.6))
    assert inside == TimelineSummary(
        samples=2,
        window="measured",
        load_avg_mean=2.5,
        cpu_percent_mean=95.0,
        system_cpu_percent_mean=50.0,
        rss_mb_max=90.0,
    )
    # a reading with no data is left out of the JSON, as before it was typed
    assert to_dict(inside) == {"samples": 2, "window": "measured", "load_avg_mean": 2.5,
                               "cpu_percent_mean": 95.0, "system_cpu_percent_mean": 50.0,
                               "rss_mb_max": 90.0}  # fmt: skip
    everything = sampler.summary(None)
    assert everything.samples == 4 and everything.window == "whole case"
    assert everything.rss_mb_max == 200.0
    assert everything.load_avg_mean == 2.0  # the point without a load is left out
    # A window no point falls into (a case shorter than one interval) uses them all.
    assert sampler.summary((2000.0, 2001.0)).samples == 4


def gpu_point(t: float, throttle: list[str], util: float = 90.0) -> dict:
    device = {
        "index": 0,
        "gpu_util_percent": util,
        "gpu_mem_used_mb": 1000.0 + t,
        "sm_clock_mhz": 1800,
        "temperature_c": 60 + int(t),
        "power_w": 300.0,
        "throttle": throttle,
    }
    return {"t": t, "cpu_percent": 100.0, "rss_mb": 10.0, "gpu": [device]}


def test_summary_adds_gpu_means_maxima_and_the_throttle_verdict():
    points = [gpu_point(float(t), ["thermal"] if t < 3 else []) for t in range(10)]
    points[0]["gpu"][0]["gpu_process_mem_mb"] = 512.0
    summary = synthetic_sampler(points).summary()
    assert summary.gpu_util_mean == 90.0
    assert summary.gpu_mem_used_mb_max == 1009.0
    assert summary.gpu_process_mem_mb_max == 512.0
    assert summary.sm_clock_mhz_mean == 1800
    assert summary.temperature_c_max == 69
    assert summary.power_w_mean == 300.0
    assert summary.throttle == "thermal"


def test_throttle_bits_map_to_names():
    assert throttle_names(0) == []
    assert throttle_names(0x1 | 0x2) == []  # GPU idle and application clocks are not limits
    assert throttle_names(0x4) == ["power"]
    assert throttle_names(0x20 | 0x40) == ["thermal", "hw-thermal"]
    assert throttle_names(0x8 | 0x80 | 0x10) == ["hw-slowdown", "sync-boost", "hw-power-brake"]
    assert throttle_names(0x1FF) == [
        "power",
        "hw-slowdown",
        "sync-boost",
        "thermal",
        "hw-thermal",
        "hw-power-brake",
        "display-clock",
    ]


def test_throttle_bits_are_the_clock_event_reasons_nvml_defines():
    """Each named bit is the binding's nvmlClocksEventReason* value and inside
    nvmlClocksEventReasonAll: a bit NVML does not define is never named."""
    pynvml = pytest.importorskip("pynvml")
    binding = {
        "power": "SwPowerCap",
        "hw-slowdown": "HwSlowdown",
        "sync-boost": "SyncBoost",
        "thermal": "SwThermalSlowdown",
        "hw-thermal": "HwThermalSlowdown",
        "hw-power-brake": "HwPowerBrakeSlowdown",
        "display-clock": "DisplayClockSetting",
    }
    named = {name: bit for bit, name in gpu_telemetry.THROTTLE_REASONS.items()}
    assert set(named) == set(binding)
    for name, reason in binding.items():
        assert named[name] == getattr(pynvml, f"nvmlClocksEventReason{reason}"), name
    defined = pynvml.nvmlClocksEventReasonAll
    assert all(bit & defined == bit for bit in gpu_telemetry.THROTTLE_REASONS)
    assert throttle_names(0x200 | 0x400) == []  # pynvml's deprecated extras only


def test_throttle_verdict_needs_more_than_a_tenth_of_the_samples():
    def points(flags_per_point: list[list[str]]) -> list[tuple[GpuTelemetryReading, ...]]:
        return [
            record(gpu_point(float(i), flags)).gpu or () for i, flags in enumerate(flags_per_point)
        ]

    assert throttle_verdict([]) is None
    assert throttle_verdict([()]) is None  # no GPU readings
    assert throttle_verdict(points([[]] * 20)) is None
    assert throttle_verdict(points([["thermal"]] * 2 + [[]] * 18)) is None  # exactly 10%
    assert throttle_verdict(points([["hw-thermal"]] * 3 + [[]] * 17)) == "thermal"
    assert throttle_verdict(points([["power"]] * 10 + [[]] * 10)) == "power"
    mixed = [["thermal", "power"]] * 5 + [["hw-power-brake"]] * 5 + [[]] * 10
    assert throttle_verdict(points(mixed)) == "thermal, power"
    assert throttle_verdict(points([["sync-boost"]] * 20)) is None  # not a limit
    # Points whose devices gave no throttle reading do not dilute the fraction.
    unread = [(GpuTelemetryReading(index=0, gpu_util_percent=1.0),)] * 100
    assert throttle_verdict(points([["power"]] * 2) + unread) == "power"


def test_device_strings_name_cuda_indices():
    assert device_indices("cpu") == []
    assert device_indices("auto") == [0]
    assert device_indices("cuda") == [0]
    assert device_indices("cuda:1") == [1]


def test_gpu_telemetry_degrades_to_a_reason_without_a_gpu():
    telemetry, reason = GpuTelemetry.open([0])
    if telemetry is not None:  # a machine with a GPU: the real thing must read
        try:
            assert telemetry.read(0)[0].index == 0
        finally:
            telemetry.close()
        pytest.skip("this machine has an NVIDIA GPU")
    assert reason and reason.startswith("no GPU") and "\n" not in reason


def test_gpu_telemetry_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    assert GpuTelemetry.open([0]) == (
        None,
        "no GPU telemetry: pynvml not installed (pip install nvidia-ml-py)",
    )


class FakeNvml:
    """Just enough of pynvml for one device without power readings."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    class NVMLError(Exception):
        pass

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=87, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=3 * 1024 * 1024 * 1024)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [
            SimpleNamespace(pid=4242, usedGpuMemory=512 * 1024 * 1024),
            SimpleNamespace(pid=1, usedGpuMemory=1024 * 1024 * 1024),
        ]

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return 1410

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 71

    def nvmlDeviceGetPowerUsage(self, handle):
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x1 | 0x4 | 0x20

    def nvmlShutdown(self):
        self.shut = True


def test_each_nvml_field_is_read_on_its_own():
    nvml = FakeNvml()
    telemetry = GpuTelemetry(nvml, [(0, "handle")])
    [device] = telemetry.read({4242, 4243})
    assert to_dict(device) == {
        "index": 0,
        "gpu_util_percent": 87.0,
        "gpu_mem_used_mb": 3072.0,
        "gpu_process_mem_mb": 512.0,
        "sm_clock_mhz": 1410,
        "temperature_c": 71,
        "throttle": ["power", "thermal"],
    }  # no power_w: this GPU cannot report it
    assert device.power_w is None and device.throttle == ("power", "thermal")
    assert telemetry.read(77)[0].gpu_process_mem_mb is None  # the worker is not listed
    telemetry.close()
    telemetry.close()
    assert nvml.shut


def test_old_drivers_fall_back_to_the_throttle_reasons_call():
    nvml = FakeNvml()
    nvml.nvmlDeviceGetCurrentClocksEventReasons = None  # present but unusable
    nvml.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: 0x40
    [device] = GpuTelemetry(nvml, [(0, "handle")]).read(1)
    assert device.throttle == ("hw-thermal",)


def test_cuda_visible_devices_picks_the_nvml_device(monkeypatch):
    nvml = SimpleNamespace(
        nvmlDeviceGetHandleByIndex=lambda i: f"nvml{i}",
        nvmlDeviceGetHandleByUUID=lambda u: f"uuid:{u}",
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu_telemetry._handle(nvml, 1, 4) == "nvml1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert gpu_telemetry._handle(nvml, 1, 4) == "nvml3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    assert gpu_telemetry._handle(nvml, 0, 4) == "uuid:GPU-abc"
    with pytest.raises(LookupError, match="not in CUDA_VISIBLE_DEVICES"):
        gpu_telemetry._handle(nvml, 1, 4)


def timeline_result(with_gpu: bool) -> Result:
    points = []
    for i in range(30):
        point = {
            "t": i * 0.5,
            "cpu_percent": 100.0 + i,
            "cpu_cores": [float(10 * (i % 10)), 100.0, 50.0, 0.0],
            "system_cpu_percent": 40.0,
            "rss_mb": 100.0 + 5 * i,
            "load1": 1.5,
        }
        if with_gpu:
            point["gpu"] = [gpu_point(i, ["power"] if i > 20 else [])["gpu"][0]]
        points.append(point)
    origin = 1_700_000_000.0
    details = {
        "timeline": {"points": points, "origin_epoch_s": origin},
        "measured_wall": [origin + 3.0, origin + 12.0],
        "training": {
            "epochs": [
                {"start_epoch_s": origin + 3 * e, "end_epoch_s": origin + 3 * e + 3}
                for e in (1, 2, 3)
            ]
        },
    }
    return make_result(
        workload="mnist-cnn",
        framework="null",
        compile="default",
        mode="train",
        device="cuda:0" if with_gpu else "cpu",
        batch_size=64,
        threads=4,
        details=details,
    )


@pytest.mark.parametrize("with_gpu", [False, True])
def test_timeline_png_is_written(tmp_path, with_gpu):
    path = write_timeline_png(timeline_result(with_gpu), tmp_path / "sub" / "t.png")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000


def test_timeline_png_without_a_timeline_says_so(tmp_path):
    result = replace(timeline_result(False), details=Details(threads={"intra_op": 1}))
    with pytest.raises(ValueError, match="has no resource timeline"):
        write_timeline_png(result, tmp_path / "t.png")
    assert not (tmp_path / "t.png").exists()


@pytest.mark.integration
def test_timeline_pngs_for_a_run(tmp_path):
    bare = replace(timeline_result(False), details=Details())
    run = make_run([timeline_result(False), bare, timeline_result(False)], id="20240101-000000")
    paths = write_timeline_pngs([run], tmp_path)
    assert len(paths) == 2 and len(set(paths)) == 2
    assert all(p.parent == tmp_path and p.name.startswith("20240101-000000-") for p in paths)
    assert all(p.read_bytes().startswith(PNG_SIGNATURE) for p in paths)


@pytest.mark.integration
def test_a_case_gets_a_timeline_from_the_runner():
    result = run_case(null_case(sleep_ms="5"), FAST)
    assert result.ok, result.error
    timeline = result.details.timeline.points
    assert timeline and all(isinstance(p, TimelinePoint) and p.cpu_cores for p in timeline)
    # the last point is taken at the worker's exit, when it may have no memory left to read
    assert all(p.rss_mb is not None for p in timeline[:-1])
    assert result.details.timeline.summary.samples >= 1
    assert result.details.timeline.origin_epoch_s <= time.time()
    assert result.details.timeline.gpu_telemetry is None  # a CPU case does not look for a GPU
    assert result.details.timeline.throttle is None
    # the CPUs the worker may run on, which the interference flag judges (results.flags)
    assert result.details.timeline.cpu_set == tuple(sorted(os.sched_getaffinity(0)))
    stored = Result.from_dict(result.to_dict()).details.timeline
    assert stored is not None and stored.cpu_set == result.details.timeline.cpu_set


@pytest.mark.slow
def test_a_longer_case_summarises_its_measured_region():
    settings = Settings(min_time_s=1.5, min_iters=3, warmup_iters=0, timeout_s=60)
    result = run_case(null_case(sleep_ms="20"), settings)
    assert result.ok, result.error
    timeline = result.details.timeline.points
    assert len(timeline) >= 3
    summary = result.details.timeline.summary
    if result.details.measured_wall is not None:
        assert summary.window == "measured"
    assert summary.cpu_percent_mean < 50  # the step sleeps
    assert summary.rss_mb_max > 10


@pytest.mark.integration
def test_a_timed_out_case_keeps_its_timeline():
    settings = Settings(min_time_s=0.0, min_iters=1, warmup_iters=0, timeout_s=1.0)
    start = time.monotonic()
    result = run_case(null_case(fault="hang"), settings)
    assert result.error.startswith("timed out after 1 s")
    assert time.monotonic() - start < 10
    assert len(result.details.timeline.points) >= 1


@pytest.mark.integration
def test_gpu_cases_say_why_they_have_no_gpu_telemetry(monkeypatch):
    monkeypatch.setattr(
        GpuTelemetry, "open", classmethod(lambda cls, indices: (None, "no GPU: test says so"))
    )
    case = null_case(fault="raise")
    case = type(case)(**{**case.__dict__, "device": "cuda:0"})
    result = run_case(case, FAST)
    assert result.details.timeline.gpu_telemetry == "no GPU: test says so"
    assert isinstance(result.details.timeline.points, tuple)


SCHEMA_3 = Path(__file__).parent / "fixtures" / "schema-3-runs"


def test_a_stored_timeline_reads_into_points_with_their_values():
    stored = json.loads((SCHEMA_3 / "mixed-run.json").read_text())
    run = read_json(SCHEMA_3 / "mixed-run.json")
    first = stored["results"][0]["details"]["timeline"]["points"][0]
    point = run.results[0].details.timeline.points[0]
    assert isinstance(point, TimelinePoint)
    assert (point.t, point.cpu_percent, point.cpu_cores) == (0.105, 86.1, (100.0, 36.4))
    assert (point.rss_mb, point.system_cpu_percent, point.load1) == (25.5, 68.2, 0.45)
    assert point.iowait_percent == 0.0 and point.gpu is None  # read, not left out
    assert to_dict(point) == first  # the same keys, in the same order


def test_a_point_writes_back_only_the_readings_it_has():
    bare = {"t": 0.5, "cpu_percent": 12.0, "cpu_cores": [10.0, 14.0]}
    assert list(to_dict(record(bare))) == ["t", "cpu_percent", "cpu_cores"]
    device = {"index": 1, "gpu_util_percent": 3.0, "sm_clock_mhz": 1410, "throttle": []}
    with_gpu = {**bare, "load1": 0.25, "gpu": [device]}
    point = record(with_gpu)
    assert point.gpu == (
        GpuTelemetryReading(index=1, gpu_util_percent=3.0, sm_clock_mhz=1410, throttle=()),
    )
    assert json.dumps(to_dict(point)) == json.dumps(with_gpu)  # [] kept, absent left out


def test_a_gpu_reading_and_a_point_keep_keys_they_do_not_name():
    # the schema-2 fixture's readings name their fields otherwise: kept, after the named
    odd = {"index": 0, "gpu_util_percent": 95.0, "memory_used_mb": 1000.0, "clock_events": []}
    reading = from_dict(GpuTelemetryReading, odd)
    assert reading.other == {"memory_used_mb": 1000.0, "clock_events": []}
    assert to_dict(reading) == odd
    point = {"t": 1.0, "cpu_percent": 1.0, "cpu_cores": []}
    data = make_run([make_result(details={"timeline": {"points": [point]}})]).to_dict()
    Run.from_dict(data, "test")
    # a run another tool wrote or edited still shows: the key kept, written back after
    data["results"][0]["details"]["timeline"]["points"][0]["cpu_temp"] = 50
    loaded = Run.from_dict(data, "test")
    (kept,) = loaded.results[0].details.timeline.points
    assert kept.other == {"cpu_temp": 50} and to_dict(kept) == {**point, "cpu_temp": 50}
    data["results"][0]["details"]["timeline"]["points"][0] = {**point, "t": "1.0"}
    with pytest.raises(UserError, match=r"timeline\.points\[0\]\.t: expected float, not str"):
        Run.from_dict(data, "test")


def test_the_gpu_reading_spells_the_serialisers_rest_field():
    # measure sits below spec, so GpuTelemetryReading writes REST_FIELD's metadata out itself
    (other,) = [f for f in fields(GpuTelemetryReading) if f.name == "other"]
    assert dict(other.metadata) == REST_FIELD
