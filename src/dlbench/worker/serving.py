"""Serving cases: warm the prepared step up, then let MLPerf LoadGen drive it.

The first call and the warm-up are timed as in the step loop (compilation is
reported apart); they also tell LoadGen what to expect, so that it generates
enough queries for the run's minimum duration. Then LoadGen runs one test
(single-stream, multi-stream, offline, or server at --target-qps), or, with
--find-peak, server tests at rates chosen by bisection until the highest rate
whose latency percentile keeps the bound is known to 5%.

Why a bisection and not LoadGen's FindPeakPerformance mode: that mode judges
each rate by LoadGen's whole verdict, early stopping included, which a short
run at a low rate never satisfies (a 99th percentile needs 662 queries), so
it needs MLPerf-length runs. "Keeps the bound" here is LoadGen's own
performance constraint (the percentile's latency at most the bound); each
run's full verdict is still reported beside it.

The energy counters and the resource monitor bracket each test, never a
query, as they bracket the step loop.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from dlbench.backends.base import Backend, Job, Prepared
from dlbench.errors import CaseError
from dlbench.measure.instruments import Instruments, Reading
from dlbench.measure.peak_search import Search
from dlbench.measure.timer import Timing, time_once
from dlbench.results.details import LoadGen
from dlbench.results.records import Result
from dlbench.spec.case import MIN_P99_QUERIES, OFFICIAL_MIN_TIME_S, Settings
from dlbench.spec.case_parts import DEFAULT_LATENCY_PERCENTILE
from dlbench.spec.loads import LoadGenLoad
from dlbench.spec.loop_kinds import case_load
from dlbench.spec.record_dict import from_dict, to_dict
from dlbench.untyped import JSONObject
from dlbench.worker.files import case_files_dir
from dlbench.worker.loadgen_log import DETAIL_LOG, LoadGenOutcome, loadgen_outcome
from dlbench.worker.loadgen_sut import QueryServer
from dlbench.worker.progress import report_progress
from dlbench.worker.result import BARE, ProcessSetup
from dlbench.worker.steps import finish_steps, prepare_steps, step_measurement

if TYPE_CHECKING:
    from mlperf_loadgen import TestSettings  # imported where a test runs

TEST_SCENARIOS = {
    "single-stream": "SingleStream",
    "multi-stream": "MultiStream",
    "server": "Server",
    "offline": "Offline",
}
# LoadGen's own cost per query from Python is a few µs: no step is expected faster,
# and the queries it generates ahead (twice the duration's worth) stay bounded.
MIN_EXPECTED_S = 5e-6
MAX_GENERATED_QUERIES = 2_000_000
# mlperf.conf's minimum query counts where it sets one; LoadGen's default elsewhere
OFFICIAL_MIN_QUERIES = {"multi-stream": MIN_P99_QUERIES}
LOADGEN_DEFAULT_MIN_QUERIES = 100
# A server run with this many bounds' worth of queries outstanding can never keep
# the bound: LoadGen stops issuing (and says so), rather than queueing for minutes.
OVERLOAD_BOUNDS = 20
MIN_OUTSTANDING = 64
MAX_PEAK_TRIES = 10
PEAK_PRECISION = 0.05
# a failing rate that kept this little of the CPUs busy: no lower rate will pass
IDLE_LOAD = 0.25
# a try at a low rate lasts min_iters / rate; never more than this many --min-time
MAX_STRETCH = 4
NOT_OFFICIAL = (
    f"not an official MLPerf result: a short run (MLPerf's minimum is {OFFICIAL_MIN_TIME_S:g} s)"
)
OFFICIAL_NOTE = (
    "MLPerf's minimum duration and query counts (--official); still not a submission "
    "(no accuracy run, audit or review)"
)


@dataclass(frozen=True)
class ServedTest:
    """One LoadGen test: what LoadGen concluded and what the system under test saw."""

    target_qps: float | None
    outcome: LoadGenOutcome
    latencies_s: list[float]
    reading: Reading
    log_dir: Path

    @property
    def holds(self) -> bool:  # measure.peak_search's name
        return self.keeps_bound

    @property
    def keeps_bound(self) -> bool:
        """LoadGen's performance constraint held and nothing cut the run short."""
        return self.outcome.perf_constraints_met is True and not self.outcome.errors

    def brief(self) -> JSONObject:
        """What the find-peak table keeps of a try."""
        latency = self.outcome.latency_ms
        return {
            "target_qps": self.target_qps,
            "samples_per_s": self.outcome.samples_per_s,
            "latency_ms": latency,
            "keeps_bound": self.keeps_bound,
            "verdict": self.outcome.verdict,
            "invalid_reason": self.outcome.invalid_reason,
            "over_bound": self.outcome.over_bound,
            "log_dir": str(self.log_dir),
        }


@dataclass(frozen=True)
class Served:
    """A served case's measurement, in the step loop's terms plus LoadGen's own."""

    timing: Timing
    reading: Reading
    samples_per_s: float
    details: LoadGen


def measure_served(prepared: Prepared, job: Job, settings: Settings) -> Served:
    """Warm up, then run LoadGen's test(s) on the prepared step."""
    import mlperf_loadgen as lg  # imported here: the step loop never loads it

    case, load = job.case, case_load(job.case, LoadGenLoad)
    batch = prepared.batch_size or job.batch_size
    scenario = case.effective_scenario(batch)
    with prepared.context():
        clock = time.perf_counter
        first_call_s = time_once(prepared.step, clock)
        warmup_s = [time_once(prepared.step, clock) for _ in range(settings.warmup_iters)]
        service_s = statistics.median(warmup_s or [first_call_s])
        fastest_s = min(warmup_s or [first_call_s])
        server = QueryServer(
            lg, _streams(prepared, load.streams), prepared.context, scenario, batch
        )
        try:
            tester = _Tester(lg, server, job, settings, scenario, batch, fastest_s)
            if load.find_peak:
                capacity = (load.streams or 1) / max(service_s, MIN_EXPECTED_S)
                # a try at a lower rate would take LoadGen's minimum queries past MAX_STRETCH
                floor = settings.min_iters / (MAX_STRETCH * max(settings.min_time_s, 1e-3))
                bound = float(load.latency_bound_ms or 0.0)
                percentile = load.latency_percentile or DEFAULT_LATENCY_PERCENTILE
                tries, chosen, why = search_peak(
                    tester.run,
                    capacity,
                    service_s,
                    bound,
                    floor,
                    case.threads,
                    percentile,
                    say=functools.partial(report_progress, job.outputs),
                )
            else:
                chosen = tester.run(load.target_qps)
                tries, why = [chosen], None
        finally:
            server.close()
    usage = chosen.reading.usage
    loop_wall_s = usage.wall_end_epoch_s - usage.wall_start_epoch_s
    timing = Timing(first_call_s, warmup_s, chosen.latencies_s, loop_wall_s)
    details = _details(job, settings, scenario, chosen, tries if load.find_peak else None, why)
    rate = chosen.outcome.samples_per_s
    if rate is None:  # LoadGen's log had no rate: samples completed over the test's time
        rate = len(chosen.latencies_s) * batch / max(timing.loop_wall_s, 1e-9)
        details["samples_per_s_source"] = "dlbench: samples completed over the test's wall time"
    return Served(timing, chosen.reading, rate, from_dict(LoadGen, details))


def _streams(prepared: Prepared, streams: int | None) -> list[Callable[[], object]]:
    """One step per server stream (each with its own request state where the
    backend needs that); the prepared step alone for the other scenarios."""
    count = streams or 1
    if prepared.new_stream is None:
        return [prepared.step] * count
    return [prepared.step] + [prepared.new_stream() for _ in range(count - 1)]


class _Tester:
    """Runs LoadGen tests on one system under test, each logged to a folder of its own."""

    def __init__(
        self,
        lg: ModuleType,
        server: QueryServer,
        job: Job,
        settings: Settings,
        scenario: str,
        batch: int,
        fastest_s: float,
    ) -> None:
        self.lg, self.server, self.job, self.settings = lg, server, job, settings
        self.scenario, self.batch, self.fastest_s = scenario, batch, fastest_s
        self.count = 0
        self.root = case_files_dir(job.outputs) / "loadgen"

    def run(self, target_qps: float | None) -> ServedTest:
        self.count += 1
        name = f"test-{self.count:02d}" + (f"-qps-{target_qps:.6g}" if target_qps else "")
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        log = self.lg.LogSettings()
        log.log_output.outdir = str(folder)
        log.enable_trace = False  # a trace of every query would be GBs on long runs
        test = self._test_settings(target_qps)
        self.server.reset()
        instruments = Instruments(self.job.device)
        instruments.start()
        # a path that does not exist: LoadGen reads ./audit.config (a compliance
        # test's overrides) from the working directory, which is the user's
        self.lg.StartTestWithLogSettings(
            self.server.sut, self.server.qsl, test, log, str(folder / "no-audit.config")
        )
        reading = instruments.stop()
        self.server.raise_if_failed()
        detail = folder / DETAIL_LOG
        if not detail.is_file():
            raise CaseError(f"LoadGen wrote no {DETAIL_LOG} in {folder}")
        outcome = loadgen_outcome(detail, self.scenario, self.batch)
        return ServedTest(target_qps, outcome, self.server.latencies_s, reading, folder)

    def _test_settings(self, target_qps: float | None) -> TestSettings:
        lg, load, settings = self.lg, case_load(self.job.case, LoadGenLoad), self.settings
        test = lg.TestSettings()
        test.scenario = getattr(lg.TestScenario, TEST_SCENARIOS[self.scenario])
        test.mode = lg.TestMode.PerformanceOnly
        duration_s = settings.min_time_s
        test.min_duration_ms = max(1, round(duration_s * 1000))
        queries = settings.min_iters
        if settings.official:
            official = OFFICIAL_MIN_QUERIES.get(self.scenario, LOADGEN_DEFAULT_MIN_QUERIES)
            queries = max(queries, official)
        test.min_query_count = queries * (self.batch if self.scenario == "offline" else 1)
        test.qsl_rng_seed = test.sample_index_rng_seed = settings.seed
        test.schedule_rng_seed = settings.seed
        # LoadGen ends a run that used up the queries it generated for twice the
        # duration at the expected rate: expect the fastest warm-up step, or faster
        expected_s = max(self.fastest_s / 2, MIN_EXPECTED_S, 2 * duration_s / MAX_GENERATED_QUERIES)
        if self.scenario == "single-stream":
            test.single_stream_expected_latency_ns = round(expected_s * 1e9)
        elif self.scenario == "multi-stream":
            test.multi_stream_samples_per_query = self.batch
            test.multi_stream_expected_latency_ns = round(expected_s * 1e9)
        elif self.scenario == "offline":
            # LoadGen issues expected QPS x duration samples in one query, each a
            # Python object in the callback: bounded like the other scenarios' queries
            # (a capped run that ends early is INVALID for its duration, and says so)
            expected_qps = self.batch / max(self.fastest_s, MIN_EXPECTED_S)
            most_qps = MAX_GENERATED_QUERIES / (2 * max(duration_s, 1e-3))
            test.offline_expected_qps = min(expected_qps, most_qps)
        else:
            assert target_qps is not None and load.latency_bound_ms is not None
            bound_s = load.latency_bound_ms / 1000.0
            test.server_target_qps = target_qps
            test.server_target_latency_ns = round(bound_s * 1e9)
            percentile = load.latency_percentile or DEFAULT_LATENCY_PERCENTILE
            test.server_target_latency_percentile = percentile / 100.0
            test.server_max_async_queries = max(
                MIN_OUTSTANDING, math.ceil(target_qps * bound_s * OVERLOAD_BOUNDS)
            )
        return test


def search_peak(
    run_at: Callable[[float], ServedTest],
    capacity_qps: float,
    service_s: float,
    bound_ms: float,
    floor_qps: float,
    cpus: int,
    percentile: float = DEFAULT_LATENCY_PERCENTILE,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[list[ServedTest], ServedTest, str | None]:
    """The highest server rate that keeps the bound (measure.peak_search), over LoadGen runs.

    Starts at 80% of the rate the warm-up suggests the streams can serve, grows by
    half until a rate fails, halves until one passes, then bisects to PEAK_PRECISION;
    the rate found must pass a second run. It gives up where no lower rate can help:
    a rate that leaves the `cpus` mostly idle (IDLE_LOAD) and still misses the bound
    (a query that arrives alone is slower than the bound: cold caches, sleeping
    threads), or a rate below `floor_qps`. Returns every try, the one reported (the
    confirming run, else the best passing rate, else the lowest tried) and why, where
    no rate was confirmed. Each try's verdict is a line to `say` (the progress bar).
    """
    if service_s * 1000.0 > bound_ms:
        # no arrival rate makes a query faster than it is: one run to show it
        test = _try(run_at, capacity_qps / 2, 0, bound_ms, percentile, say)
        why = f"one query takes {service_s * 1000:.3g} ms, more than the {bound_ms:g} ms bound"
        return [test], test, why
    tried: list[ServedTest] = []

    def try_at(qps: float) -> ServedTest:
        tried.append(_try(run_at, qps, len(tried), bound_ms, percentile, say))
        return tried[-1]

    search: Search[ServedTest] = Search(
        start=0.8 * capacity_qps, floor=floor_qps, growth=1.5, precision=PEAK_PRECISION,
        max_tries=MAX_PEAK_TRIES, unit=" QPS",
        give_up=lambda qps, test: idle_miss(qps, test.reading, cpus, f"the {bound_ms:g} ms bound"),
    )  # fmt: skip
    found = search.run(try_at)
    return tried, found.reported, found.note


def idle_miss(qps: float, reading: Reading, cpus: int, missed: str) -> str | None:
    """Why no rate below `qps` (a try that missed `missed`) can keep it, where that try
    kept the CPUs mostly idle: a query arriving alone is slower than the bound (cold
    caches, sleeping threads). The load is measured: the warm-up's time overrates what
    small models serve (each query also pays the queue and LoadGen's calls from Python)."""
    load = reading.usage.cpu_percent / (100.0 * max(cpus, 1))
    if load > IDLE_LOAD:
        return None
    return (
        f"{missed} missed even at {qps:.3g} QPS, with {load:.0%} of the CPUs busy: "
        "a query arriving alone is slower than the bound"
    )


def _try(
    run_at: Callable[[float], ServedTest],
    qps: float,
    done: int,
    bound_ms: float,
    percentile: float,
    say: Callable[[str], None],
) -> ServedTest:
    test = run_at(qps)
    held = f"{percentile:g}"
    latency = test.outcome.latency_ms.get(held, float("nan"))
    verdict = "keeps" if test.keeps_bound else "misses"
    say(
        f"find-peak try {done + 1}: {qps:.4g} QPS, p{held} {latency:.3g} ms "
        f"({verdict} the {bound_ms:g} ms bound)"
    )
    return test


def _details(
    job: Job,
    settings: Settings,
    scenario: str,
    chosen: ServedTest,
    tries: list[ServedTest] | None,
    why: str | None,
) -> JSONObject:
    load = case_load(job.case, LoadGenLoad)
    details: JSONObject = {
        "scenario": scenario,
        "note": OFFICIAL_NOTE if settings.official else NOT_OFFICIAL,
        "min_duration_s": settings.min_time_s,
        **to_dict(chosen.outcome),
        "log_dir": str(chosen.log_dir),
    }
    if scenario == "server":
        details.update(
            target_qps=chosen.target_qps,
            bound_ms=load.latency_bound_ms,
            percentile=load.latency_percentile,
            streams=load.streams,
        )
    if tries is not None:
        details["tries"] = [t.brief() for t in tries]
        details["peak_qps"] = chosen.target_qps if chosen.keeps_bound else None
        details["peak_confirmed"] = why is None
        if why is not None:
            details["peak_note"] = why
    return details


def run_loadgen(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
    """The loadgen loop kind: MLPerf LoadGen's scenario around the prepared step."""
    prepared, setup_s = prepare_steps(backend, job)
    served = measure_served(prepared, job, settings)
    # LoadGen's own rate: a server's queries overlap, so batch / mean latency is not it
    measured = step_measurement(job, prepared, served.timing, served.reading, served.samples_per_s)
    measured = replace(measured, details=replace(measured.details, loadgen=served.details))
    return finish_steps(measured, job, prepared, setup_s, served.timing.loop_wall_s, None, process)
