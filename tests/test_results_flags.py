"""Flags: decided once from the samples, the threads and the parent's timeline,
and shown wherever results are. Fake timelines for the rules; real processes
for a planted CPU hog, oversubscription and the null case's CPU use."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import cli, dlbench
from factories import make_result

from dlbench.measure.stats import summarize
from dlbench.results.details import HEADERS_BUILT
from dlbench.results.flags import COMPILE_BUILT_HEADERS, result_flags
from dlbench.spec.case import MIN_P99_QUERIES
from dlbench.worker.compile_cache import COLD, SHARED, headers_built_between

CPUS = 2


def point(t: float, worker: float, system: float, gpu_util: float | None = None) -> dict:
    gpu = [{"index": 0, "gpu_util_percent": gpu_util}] if gpu_util is not None else None
    return {"t": t, "cpu_percent": worker, "system_cpu_percent": system,
            "cpu_cores": [system, system], **({"gpu": gpu} if gpu else {})}  # fmt: skip


def with_timeline(points: list[dict], window=(1.0, 5.0), **values) -> object:
    given = values.pop("details", {})
    details = {
        "timeline": {"points": points, "origin_epoch_s": 1000.0, **given.pop("timeline", {})},
        "measured_wall": [1000.0 + window[0], 1000.0 + window[1]],
        **given,
    }
    samples = values.pop("samples", [1.0] * 1000)
    values.setdefault("threads", 1)
    return make_result(latency_ms=summarize(samples), details=details, **values)


def test_a_quiet_well_sampled_result_has_no_flags():
    quiet = [point(t * 0.5, worker=100, system=50) for t in range(12)]
    assert result_flags(with_timeline(quiet), CPUS) == ()


def test_other_processes_busy_while_measured_is_interference():
    # a 2-thread case on two cores gets one and a half; something else takes the rest
    busy = [point(t * 0.5, worker=150, system=100) for t in range(12)]
    assert "interference" in result_flags(with_timeline(busy, threads=2), CPUS)
    # CPUs waiting on I/O count too
    waiting = [{**point(t * 0.5, worker=160, system=80), "iowait_percent": 20} for t in range(12)]
    assert "interference" in result_flags(with_timeline(waiting, threads=2), CPUS)
    # the same load outside the measured region does not count
    before = [point(t * 0.5, worker=150, system=100 if t < 3 else 75) for t in range(12)]
    assert "interference" not in result_flags(with_timeline(before, threads=2), CPUS)


WINDOW = (1.0, 11.0)  # a 10 s measured window, sampled every 0.5 s


def hogged(seconds: float, other: float = 2 / 3, background: float = 0.0) -> list[dict]:
    """A 2-thread case on two CPUs whose first `seconds` of its window another process
    shares (`other` CPUs taken, 2/3 for one spinning hog beside two threads), with
    `background` CPUs busy outside the worker all along."""
    points = []
    for i in range(1, 25):
        t = i * 0.5
        taken = other if WINDOW[0] < t <= WINDOW[0] + seconds else background
        points.append(point(t, worker=100 * (2 - taken), system=100.0))
    return points


def interference(points: list[dict], threads: int = 2, **values) -> bool:
    judged = with_timeline(points, window=WINDOW, threads=threads, **values)
    return "interference" in result_flags(judged, CPUS)


def test_a_hog_on_a_tenth_of_the_window_is_interference_and_on_a_twentieth_is_not():
    assert interference(hogged(1.0))  # 10% of the 10 s window
    assert not interference(hogged(0.5))  # 5%


def test_a_hog_on_four_seconds_of_ten_is_no_longer_diluted_away():
    points = hogged(4.0)
    # the old rule: the window's mean share of the machine busy outside the worker,
    # against 0.25, is 0.4 * (2/3) / 2 = 0.13, so the hog went unflagged
    inside = [p for p in points if WINDOW[0] < p["t"] <= WINDOW[1]]
    mean = sum((p["system_cpu_percent"] - p["cpu_percent"] / 2) / 100 for p in inside) / 20
    assert mean == pytest.approx(0.4 * (2 / 3) / 2) and mean < 0.25
    assert interference(points)


def test_background_noise_on_an_idle_machine_is_never_interference():
    # daemons and the parent's sampling: a few % of a CPU, and a one-point burst
    # to 0.2 CPU; each point's tick-based readings jitter by a few % more
    for seed in range(20):
        rng = np.random.default_rng(seed)
        points = hogged(0.5, other=0.2, background=0.05)
        for p in points:
            jitter = float(rng.uniform(-4, 4))
            p["cpu_percent"] = min(200.0, p["cpu_percent"] + jitter)
        assert not interference(points), seed


def test_other_processes_on_the_cpus_the_case_leaves_spare_do_not_contend():
    # one thread on two CPUs: one hog runs on the free CPU, two take the case's
    one_hog = [point(t * 0.5, worker=100, system=100) for t in range(1, 25)]
    assert not interference(one_hog, threads=1)
    two_hogs = [point(t * 0.5, worker=67, system=100) for t in range(1, 25)]
    assert interference(two_hogs, threads=1)


def test_only_the_cpus_the_worker_may_run_on_count():
    # four CPUs, the worker pinned to the first two (taskset): busy CPUs 2 and 3 are
    # someone else's business, a busy CPU 1 beside a 2-thread case is not
    def four(t: float, cores: list[float], worker: float) -> dict:
        return {"t": t, "cpu_percent": worker, "cpu_cores": cores}

    elsewhere = [four(t * 0.5, [100, 100, 100, 100], 200) for t in range(1, 25)]
    inside = [four(t * 0.5, [100, 100, 0, 0], 120) for t in range(1, 25)]

    def pinned() -> dict:
        return {"details": {"timeline": {"cpu_set": [0, 1]}}}

    assert not interference(elsewhere, **pinned())
    assert interference(inside, **pinned())
    # a timeline written before the CPU set was recorded: every CPU counts
    assert interference(elsewhere, threads=4)


def test_each_point_counts_for_the_part_of_its_interval_inside_the_window():
    # sampled every 2 s (a long case's halved timeline): one contended point is 20%
    slow = [point(t * 2.0, worker=100 if t == 3 else 200, system=100) for t in range(1, 7)]
    assert interference(slow)
    # a point straddling the window's start counts for its part inside: (0.5, 1.25]
    # gives 0.25 s, and with the next point 0.75 s, 7.5% of the window
    times = [0.5, 1.25, *(1.25 + 0.5 * i for i in range(1, 20))]
    straddling = [point(t, worker=100 if t in (1.25, 1.75) else 200, system=100) for t in times]
    assert not interference(straddling)
    # a contended point whose interval ends as the window starts is not inside it
    edge = [point(t * 0.5, worker=100 if t == 2 else 200, system=100) for t in range(1, 25)]
    assert not interference(edge)
    # a window shorter than one interval is judged by the point that holds it
    short = [point(0.5, worker=200, system=100), point(1.0, worker=100, system=100)]
    assert "interference" in result_flags(with_timeline(short, window=(0.6, 0.7), threads=2), CPUS)


def test_an_idle_worker_inside_the_timing_is_a_stall_unless_its_gpu_is_busy():
    stall = [point(t * 0.5, worker=0 if 4 <= t <= 7 else 100, system=2) for t in range(12)]
    assert "stalled" in result_flags(with_timeline(stall), CPUS)
    short = [point(t * 0.5, worker=0 if t == 4 else 100, system=2) for t in range(12)]
    assert "stalled" not in result_flags(with_timeline(short), CPUS)
    waiting = [point(t * 0.5, worker=1, system=2, gpu_util=99) for t in range(12)]
    assert "stalled" not in result_flags(with_timeline(waiting), CPUS)


def test_a_stall_counts_every_interval_its_idle_points_report():
    from dlbench.measure.timeline import TimelinePoint
    from dlbench.results.flags import longest_stall_s
    from dlbench.spec.record_dict import from_dict

    def stall(points: list[dict]) -> float:
        return longest_stall_s([from_dict(TimelinePoint, p) for p in points])

    # each point covers the 0.5 s since the one before: three idle points are 1.5 s idle
    three = [point(t * 0.5, worker=0 if 4 <= t <= 6 else 100, system=2) for t in range(10)]
    assert stall(three) == pytest.approx(1.5)
    assert "stalled" in result_flags(with_timeline(three), CPUS)
    two = [point(t * 0.5, worker=0 if 4 <= t <= 5 else 100, system=2) for t in range(10)]
    assert stall(two) == pytest.approx(1.0)
    assert "stalled" not in result_flags(with_timeline(two), CPUS)  # not over a second
    # one idle point at a long sampling interval (a long training run's 2 s) is a stall
    slow = [point(t * 2.0, worker=0 if t == 3 else 100, system=2) for t in range(6)]
    assert stall(slow) == pytest.approx(2.0)


def test_oversubscription_counts_every_ddp_rank():
    quiet = [point(t * 0.5, worker=100, system=50) for t in range(12)]
    assert "oversubscribed" in result_flags(with_timeline(quiet, threads=4), CPUS)
    two_ranks = make_result(threads=2, nproc=2, ddp=True, latency_ms=summarize([1.0] * 1000))
    assert "oversubscribed" in result_flags(two_ranks, CPUS)
    assert "oversubscribed" not in result_flags(two_ranks, 4)


def test_p99_from_too_few_samples_and_throttles_are_flagged():
    few = with_timeline([], samples=[1.0] * (MIN_P99_QUERIES - 1))
    assert "low-n-p99" in result_flags(few, CPUS)
    spread = [1.0, 2.0] * 500  # IQR over median 2/3: noisy
    hot = with_timeline([], details={"timeline": {"throttle": "thermal, power"}}, samples=spread)
    assert result_flags(hot, CPUS) == ("noisy", "throttled:thermal", "throttled:power")
    # time-to-train results have a handful of epochs, and no p99 to judge
    epochs = with_timeline([], samples=[5.0, 4.0], details={"training": {"epochs": [{}, {}]}})
    assert "low-n-p99" not in result_flags(epochs, CPUS)


def test_a_first_call_that_built_the_compilers_headers_is_flagged_and_a_cold_one_is_not():
    built = with_timeline([], details={"compile_cache": COLD + HEADERS_BUILT})
    assert result_flags(built, CPUS) == (COMPILE_BUILT_HEADERS,)
    for cache in (COLD, SHARED, None):
        assert result_flags(with_timeline([], details={"compile_cache": cache}), CPUS) == ()


@pytest.mark.parametrize("suffix", [".gch", ".pch"])  # g++'s, and other compilers'
def test_headers_count_where_written_while_the_case_compiled(tmp_path, monkeypatch, suffix):
    """Read from the folder the worker's own torch._inductor.codecache names (here a
    folder of this test's, under that module's name and attribute)."""
    monkeypatch.setitem(
        sys.modules, "torch._inductor.codecache", SimpleNamespace(_HEADER_DIR=str(tmp_path))
    )
    header = tmp_path / f"c1.h{suffix}"
    header.write_bytes(b"")
    (tmp_path / "c1.h").write_bytes(b"")  # the header's source: not a build
    os.utime(header, (1000.0, 1000.0))
    assert headers_built_between(999.0, 1001.0)
    assert not headers_built_between(1001.0, 1010.0)  # before the case began: warm
    assert not headers_built_between(990.0, 999.0)  # in its timed loop: not its compile
    os.utime(tmp_path / "c1.h", (1005.0, 1005.0))
    assert not headers_built_between(1001.0, 1010.0)
    monkeypatch.delitem(sys.modules, "torch._inductor.codecache")
    assert not headers_built_between(0.0, 2000.0)  # no compile in this process


def test_a_merged_result_is_flagged_by_its_own_first_call_not_its_processes():
    """Under --repeat the merged first call is the newest process's: a first process
    that built the headers leaves no flag on a result whose first call did not."""
    from dlbench.results.repeats import add_process

    built = with_timeline([], details={"compile_cache": COLD + HEADERS_BUILT}, samples=[1.0] * 700)
    later = with_timeline([], details={"compile_cache": COLD}, samples=[1.0] * 700)
    built = replace(built, flags=result_flags(built, CPUS))
    later = replace(later, flags=result_flags(later, CPUS))
    assert COMPILE_BUILT_HEADERS in add_process(add_process(None, later), built).flags
    assert COMPILE_BUILT_HEADERS not in add_process(add_process(None, built), later).flags


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.alone
@pytest.mark.slow
def test_a_planted_cpu_hog_is_flagged_interference_and_shown(tmp_path):
    # one hog per CPU beside a case whose threads ask for every CPU: no CPU is spare,
    # whatever the machine. (Two hogs beside a 1-thread case on 2 CPUs take a third
    # of a CPU from it over a long window, but the null case's is a few hundredths
    # of a second, in which the scheduler favours the newly started worker.)
    cpus = len(os.sched_getaffinity(0))
    context = multiprocessing.get_context("spawn")
    hogs = [context.Process(target=_spin, args=(25.0,)) for _ in range(cpus)]
    for hog in hogs:
        hog.start()
    try:
        time.sleep(1.0)
        out = tmp_path / "run.json"
        done = dlbench("run", "-w", "mlp", "-f", "null", "--threads", str(cpus), "--min-time",
                       "3", "--json", str(out), "--csv", str(tmp_path / "run.csv"))  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()
            hog.join()
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())["results"]
    assert "interference" in result["flags"], result["details"]["timeline"].get("summary")
    assert "interference" in done.stdout
    assert "interference" in (tmp_path / "run.csv").read_text()


@pytest.mark.integration
def test_oversubscription_is_flagged_and_refused_with_strict(tmp_path):
    out = tmp_path / "run.json"
    too_many = str(2 * len(os.sched_getaffinity(0)))  # over this machine's CPUs, whatever it has
    done = dlbench("run", "-w", "mlp", "-f", "null", "--threads", too_many, "--min-time", "0.1",
                   "--json", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())["results"]
    assert "oversubscribed" in result["flags"]
    refused = cli("run", "-w", "mlp", "-f", "null", "--threads", too_many, "--strict")
    assert refused.returncode == 2
    assert "--strict" in refused.stderr and f"{too_many} threads" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.integration
def test_the_null_case_uses_one_core_with_numpys_blas_pool_at_one_thread(tmp_path):
    out = tmp_path / "run.json"
    done = dlbench("run", "-w", "mlp", "-f", "null", "--min-time", "1", "--json", str(out))
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())["results"]
    assert result["details"]["numpy_blas"]["threads"] == 1
    # one Python loop: about one core, not NumPy's pool spinning beside it
    # (161-199% before, on this project's 2-CPU machines)
    assert result["cpu_percent"] < 130, result["cpu_percent"]


@pytest.mark.integration
def test_a_timed_out_oversubscribed_case_still_says_so():
    from dataclasses import replace

    from conftest import null_case

    from dlbench.launch.runner import run_case
    from dlbench.spec.case import Settings

    too_many = 2 * len(os.sched_getaffinity(0))  # over this machine's CPUs
    case = replace(null_case(fault="hang"), threads=too_many)
    settings = Settings(min_time_s=0.0, min_iters=1, warmup_iters=0, timeout_s=2.0)
    result = run_case(case, settings)
    assert result.status == "failed" and result.error.startswith("timed out")
    assert "oversubscribed" in result.flags, result.flags


def test_noisy_is_decided_here_and_kept_only_among_the_flags():
    spread = with_timeline([], samples=[1.0, 2.0] * 500)
    assert result_flags(spread, CPUS) == ("noisy",)
    spread = replace(spread, flags=result_flags(spread, CPUS))
    assert spread.noisy and spread.to_dict()["noisy"] is True  # read from the flags
    # a time-to-train result's samples are its epochs, the first holding compilation
    training = {"training": {"epochs": [{}, {}, {}]}}
    epochs = with_timeline([], samples=[9.0, 2.0, 2.0], details=training)
    assert "noisy" not in result_flags(epochs, CPUS)


def test_a_result_written_before_flags_reads_its_noisy_field_and_throttle_as_flags():
    from dlbench.report.table import flags
    from dlbench.results.records import Result

    old = make_result(details={"timeline": {"throttle": "thermal"}}).to_dict()
    del old["flags"]
    old["noisy"] = True
    loaded = Result.from_dict(old)
    assert loaded.flags == ("noisy", "throttled:thermal") and loaded.noisy
    assert flags(loaded) == "noisy, throttled:thermal"
    # with flags recorded, the flags are the whole story: the table adds nothing
    hot = {"timeline": {"throttle": "power"}}
    shown = make_result(flags=["interference", "low-n-p99"], details=hot)
    assert flags(shown) == "interference, low-n-p99" and not shown.noisy


@pytest.mark.parametrize(
    ("pipelined", "expected"),
    [
        # kernels filled 95% of each step's interval: the device was the limit
        ({"marker": "cuda-events", "interval_ms": 10.0, "device_busy": 0.95}, False),
        # kernels filled 60%: the device waited for the host the rest
        ({"marker": "cuda-events", "interval_ms": 10.0, "device_busy": 0.6}, True),
        # no profiler: the host needs nearly the whole interval to issue one step
        ({"marker": "window-mean", "interval_ms": 10.0, "host_issue_ms": 9.5}, True),
        ({"marker": "window-mean", "interval_ms": 10.0, "host_issue_ms": 2.0}, False),
        # a synchronous device is its own host: never judged
        ({"marker": "host-clock", "interval_ms": 10.0, "host_issue_ms": 10.0}, False),
    ],
)
def test_a_pipelined_device_waiting_for_its_host_is_host_bound(pipelined, expected):
    result = with_timeline([], details={"pipelined": pipelined, "timing_mode": "throughput"})
    assert ("host-bound" in result_flags(result, CPUS)) is expected
