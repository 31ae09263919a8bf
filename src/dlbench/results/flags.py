"""What a reader must know beside a result's numbers: one list of flags, decided here.

The parent sets `Result.flags` once a case has ended, from what the worker
recorded (samples, threads) and what the parent saw (its resource timeline
over the measured region, NVML's clock-event reasons). Tables, the HTML
report and CSV show the list; nothing else decides a flag.

- `noisy`: the latency samples' IQR is over 10% of the median; for a result
  merged from --repeat processes, the IQR of the process medians. A
  time-to-train result of one process is exempt (its samples are its epochs,
  and the first holds compilation).
- `interference`: other processes contended for the case's CPUs over at least
  INTERFERENCE_COVER of the measured window's duration. A timeline point is
  contended when other processes (busy time on the CPUs the worker may run on,
  hypervisor steal included, minus the worker's own, plus I/O wait) took more
  than CONTENDED_CPUS beyond the CPUs the case leaves spare (those minus its
  threads). Judged point by point, so a hog on a tenth of the window is not
  diluted away by the quiet rest, as a mean over the window was.
- `stalled`: inside the measured region the worker's CPU stayed near zero for
  over STALL_SECONDS with no GPU busy on its behalf (a machine or I/O stall
  the timing then contains).
- `oversubscribed`: more threads than CPUs available to the worker.
- `throttled:<reason>`: the GPU reported a power or thermal limit holding its
  clocks down in over 10% of the measured samples.
- `low-n-p99`: a p99 from fewer samples than MLPerf's early-stopping rule asks
  for a 99th percentile (MIN_P99_QUERIES).
- `over-bound`: a server run's latency percentile exceeded its bound (LoadGen's
  performance constraint), or --find-peak found no rate within it.
- `loadgen-invalid`: LoadGen judged the run INVALID (too short for its early
  stopping, too few queries, a constraint missed: details.loadgen says which).
- `request-errors`: an endpoint's requests failed (refused, timed out, an HTTP error,
  a broken stream); details.endpoint counts them by kind and keeps the first ones.
- `short-answers`: an endpoint answered requests with fewer tokens than asked.
- `over-slo`: an endpoint missed its TTFT or TPOT bound at its percentile (or had a
  failed request), or --find-peak found no load whose SLOs held.
- `prefix-cache-warm`: an endpoint run not designed to share prefixes (no --param
  prefix_pct, one turn) whose server's prefix cache served more than
  PREFIX_WARM_SHARE of its prompt tokens (beyond CHAT_HEAD_TOKENS a request on the
  chat API): a cache warmed before the run (an earlier run's prompts) served it, and
  its TTFT and throughput are of less work than asked.
- `int8-no-vnni`: an int8 case on a CPU without int8 dot-product units (VNNI,
  AMX, Arm's dot product): measured all the same, and expect little gain.
- `host-bound`: a throughput-mode result on an asynchronous device (a GPU) whose
  device sat idle waiting for the host: its kernels took under DEVICE_BUSY_FLOOR
  of a step's interval (one profiled step), or, where no profiler could time
  them, the host took HOST_ISSUE_SHARE of the interval to issue a step onto an
  empty queue. The device, not the harness or the host, must be the limit for a
  figure to be the hardware's. A text generation on a GPU likewise, where its
  kernels filled under DEVICE_BUSY_FLOOR of the median decode (profiled after the
  timed generations: details.generation.decode_device_busy).
- `client-bound`: the endpoint client could not keep up with what it measured
  (measure.client_health.client_bound: its busiest event loop at CPU_BOUND of a
  core, or its lag at p50 or p99 above LAG_FLOOR_MS and LAG_SHARE of the inter-token
  gap at the same percentile): its latencies hold its own delay; --client-processes
  spreads the load.
- `compile-built-headers`: Inductor's precompiled headers were built while the case
  compiled (before its timed loop; in a time-to-train case, before its last epoch
  ended), as a user's first compile on a machine builds them (details.compile_cache):
  its first call (a time-to-train case's first epoch, an export's set-up) holds that
  one-time build and is not comparable with a later run's; its steady state is not.
  Judged on a merged result's own details, whose first call is its newest process's.
- `above-ceiling`: a generation's decode or prefill faster than the memory or GEMM
  ceiling allows (results.decode_bound, results.roofline_bound: beyond
  ceilings.ABOVE_CEILING of a measured ceiling, any of a datasheet's). It cannot be:
  work skipped or cached, a token miscounted, a precision mislabelled or the ceiling
  wrong. The run's ceilings decide it, so results.limits sets it as the case ends;
  the rule's threshold and meaning are here with the others.

A result written before flags were recorded kept `noisy` as a field of its
own and the GPU's throttle verdict in its details (details.timeline.throttle
since): `stored_flags` reads them as flags when the result is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeGuard

from dlbench.measure.client_health import client_bound
from dlbench.measure.gpu_telemetry import GpuTelemetryReading
from dlbench.measure.openai_api import CHAT
from dlbench.measure.stats import NOISE_THRESHOLD, LatencyStats
from dlbench.measure.timeline import TimelinePoint
from dlbench.results.details import HEADERS_BUILT, Details
from dlbench.spec.case import MIN_P99_QUERIES, Case
from dlbench.spec.loads import LoadProfile
from dlbench.spec.loop_kinds import load_part

# A point is contended when other processes took more than this many CPUs' worth of
# time beyond the case's spare CPUs. Idle background (daemons, the parent's own
# sampling: a few % of one CPU) and the timeline's tick-based readings (10 ms ticks,
# a few % per 0.5 s point) stay well below it: quiet points of real torch cases read
# 0-0.05, at most 0.15. A spinning hog beside N busy threads on N CPUs takes
# N/(N+1) of a CPU, never under a half (docs/methodology.md#interference).
CONTENDED_CPUS = 0.25
# The case is flagged when contended points cover this share of its measured window.
INTERFERENCE_COVER = 0.10
# Below this the worker is doing nothing (a Python loop alone reads ~100).
STALL_CPU_PERCENT = 5.0
STALL_SECONDS = 1.0
# A GPU this busy is working for the worker while its CPU waits.
GPU_BUSY_PERCENT = 5.0
# A device busy for less of each step than this waited for the host the rest of it
# (a GPU-bound step keeps its queue full: the gaps between kernels are launch
# latency, a few microseconds each, well under 5% of a millisecond-scale step).
DEVICE_BUSY_FLOOR = 0.85
# Without a kernel time: the host needs this share of the interval to issue a step.
HOST_ISSUE_SHARE = 0.9
HOST_BOUND = "host-bound"
CLIENT_BOUND = "client-bound"
ABOVE_CEILING = "above-ceiling"
COMPILE_BUILT_HEADERS = "compile-built-headers"
NOISY = "noisy"
LOW_N_P99 = "low-n-p99"
# the prefix of every GPU throttle flag (`throttled:thermal`, `throttled:power`)
THROTTLED = "throttled:"
# An endpoint run whose prompts share nothing by design (distinct seeded text, salted per
# run by default) hits a server's prefix cache only where every request starts alike: on
# the chat API, the chat template's head (role tags, a default system prompt: 20-30
# tokens in Llama 3's and ChatML's), cached in whole blocks (16 tokens on a GPU's vLLM,
# 128 on its CPU build), so at most CHAT_HEAD_TOKENS a request; on the completions API
# nothing (a BOS token fills no block). A share served beyond that above
# PREFIX_WARM_SHARE was cached before the run: an earlier run of the same prompts leaves
# every whole block of each but the one holding its last token (which is always
# computed), 112 of a 128-token prompt in 16-token blocks (87%), and one of a tenth as
# many requests still 9%.
CHAT_HEAD_TOKENS = 32
PREFIX_WARM_SHARE = 0.05
PREFIX_CACHE_WARM = "prefix-cache-warm"
# Judged again on a merged result's own numbers; its processes' other flags carry over.
JUDGED_ON_MERGED = frozenset({NOISY, LOW_N_P99, COMPILE_BUILT_HEADERS})


class Judged(Protocol):
    """What the rules read of a result: a results.records.Result. Named by its shape,
    not imported, because records asks this module for `stored_flags` when it loads one."""

    @property
    def case(self) -> Case: ...
    @property
    def latency_ms(self) -> LatencyStats | None: ...
    @property
    def details(self) -> Details: ...


def result_flags(result: Judged, cpus_available: int) -> tuple[str, ...]:
    """The flags of one finished result, in a fixed order."""
    details = result.details
    measured = measured_points(details)
    found: list[str] = []
    # An endpoint's work is on its server (on this machine, its own processes), and
    # the client waits idle on the network: contention and stalls are not its to judge.
    local = details.endpoint is None
    if not under_load(details) and _noisy(result.latency_ms, details):
        found.append(NOISY)
    if local and contended_share(details, result.case.threads_in_use) >= INTERFERENCE_COVER:
        found.append("interference")
    if not under_load(details) and measured and longest_stall_s(measured) > STALL_SECONDS:
        found.append("stalled")
    if result.case.threads_in_use > cpus_available:
        found.append("oversubscribed")
    found += throttle_flags(details.timeline.throttle if details.timeline else None)
    if too_few_for_p99(result.latency_ms, details):
        found.append(LOW_N_P99)
    if details.int8_dot_units == ():
        found.append("int8-no-vnni")
    if built_headers(details):
        found.append(COMPILE_BUILT_HEADERS)
    if host_bound(details):
        found.append(HOST_BOUND)
    found += endpoint_flags(details)
    if prefix_cache_warm(details, result.case):
        found.append(PREFIX_CACHE_WARM)
    loadgen = details.loadgen
    if loadgen is not None:
        if loadgen.perf_constraints_met is False:
            found.append("over-bound")
        if loadgen.verdict == "INVALID":
            found.append("loadgen-invalid")
    return tuple(found)


def host_bound(details: Details) -> bool:
    """Whether a pipelined result's device, or a generation's GPU in its decode, waited
    for its host (HOST_BOUND above). A synchronous device (host-clock markers) is its
    host: never judged."""
    busy = details.generation.decode_device_busy if details.generation else None
    if busy is not None:
        return busy < DEVICE_BUSY_FLOOR
    pipelined = details.pipelined
    if pipelined is None or pipelined.marker == "host-clock" or not pipelined.interval_ms:
        return False
    if pipelined.device_busy is not None:
        return pipelined.device_busy < DEVICE_BUSY_FLOOR
    issue = pipelined.host_issue_ms
    return issue is not None and issue >= HOST_ISSUE_SHARE * pipelined.interval_ms


def under_load(details: Details) -> bool:
    """Requests arriving at their own times (an endpoint, LoadGen's server scenario):
    their latencies differ by design (the spread is the queue's, not noise), and the
    server waits idle between arrivals at a low rate (no stall)."""
    loadgen = details.loadgen
    return details.endpoint is not None or (loadgen is not None and loadgen.scenario == "server")


def endpoint_flags(details: Details) -> list[str]:
    """A server's run: requests that failed, answers shorter than asked, SLOs missed."""
    load = details.endpoint
    if load is None:
        return []
    found = []
    if load.errors:
        found.append("request-errors")
    if load.short_answers:
        found.append("short-answers")
    if load.slo_holds is False or (load.peak_axis is not None and load.peak is None):
        found.append("over-slo")
    tokens = details.generation
    itl = (tokens.itl_p50_ms, tokens.itl_p99_ms) if tokens else (None, None)
    if client_bound(load.client, *itl) is not None:
        found.append(CLIENT_BOUND)
    return found


def prefix_cache_warm(details: Details, case: Case) -> bool:
    """A run not designed to share prefixes (PREFIX_CACHE_WARM above) that its server's
    prefix cache served beyond a chat template's head."""
    load = details.endpoint
    server = load.server if load is not None else None
    if (
        load is None
        or server is None
        or not server.prefix_cache_queries
        or server.prefix_cache_hits is None
    ):
        return False
    params = dict(case.params)
    if params.get("prefix_pct", 0) > 0 or params.get("turns", 1) > 1:
        return False  # shared prefixes, or a conversation's history: served by design
    client = load_part(case, LoadProfile)
    head = CHAT_HEAD_TOKENS if client is not None and client.api == CHAT else 0
    beyond_head = server.prefix_cache_hits - head * load.requests
    return beyond_head > PREFIX_WARM_SHARE * server.prefix_cache_queries


def merged_flags(
    result: Judged, process_flags: Sequence[Sequence[str]], spread: float
) -> tuple[str, ...]:
    """The flags of a result merged from the processes it used (results.repeats): their
    flags, but noise and a p99's sample count judged again on the merged numbers. With
    several processes, noise is their disagreement: `spread`, the IQR over the median of
    their medians; with one, it is that process's own."""
    details = result.details
    kept = sorted({flag for flags in process_flags for flag in flags} - JUDGED_ON_MERGED)
    if len(process_flags) > 1:
        noisy = spread > NOISE_THRESHOLD
    else:
        noisy = _noisy(result.latency_ms, details) and not under_load(details)
    low_n = too_few_for_p99(result.latency_ms, details)
    built = [COMPILE_BUILT_HEADERS] if built_headers(details) else []
    return tuple(([NOISY] if noisy else []) + kept + ([LOW_N_P99] if low_n else []) + built)


def built_headers(details: Details) -> bool:
    """Inductor's precompiled headers built while the case compiled (worker.compile_cache)."""
    return details.compile_cache is not None and details.compile_cache.endswith(HEADERS_BUILT)


def stored_flags(noisy: object, details: Details) -> tuple[str, ...]:
    """The flags of a result written before flags were recorded, from what it kept
    instead: its own `noisy` field (as its JSON holds it) and its GPU's throttle verdict."""
    throttle = details.timeline.throttle if details.timeline else None
    return tuple(([NOISY] if noisy is True else []) + throttle_flags(throttle))


def throttle_flags(verdict: object) -> list[str]:
    """`throttled:<reason>` for each reason of the timeline's verdict ("thermal, power")."""
    if not isinstance(verdict, str):
        return []
    return [f"{THROTTLED}{name.strip()}" for name in verdict.split(",") if name.strip()]


def _noisy(stats: LatencyStats | None, details: Details) -> bool:
    return stats is not None and not _time_to_train(details) and stats.noisy


def too_few_for_p99(stats: LatencyStats | None, details: Details) -> bool:
    """Fewer samples than a p99 needs; a time-to-train result (its samples are
    epochs, and its p99 is not its number) is exempt."""
    return stats is not None and not _time_to_train(details) and stats.n < MIN_P99_QUERIES


def _time_to_train(details: Details) -> bool:
    return details.training is not None


def measured_points(details: Details) -> list[TimelinePoint]:
    """The timeline points whose interval overlaps the measured region ([] when
    either is missing). A point reports the interval since the one before it,
    so the first point after the region's end covers its last part."""
    timeline, window = details.timeline, details.measured_wall
    if timeline is None or window is None or len(window) != 2:
        return []
    origin = timeline.origin_epoch_s
    if origin is None:
        return []
    start, end = window[0] - origin, window[1] - origin
    points = sorted(timeline.points, key=_t)
    inside = [p for p in points if start < p.t <= end]
    after = next((p for p in points if p.t > end), None)
    return inside + ([after] if after is not None else [])


def contended_share(details: Details, threads: int) -> float:
    """The share (0..1) of the measured window covered by contended points.

    A point reports the interval since the point before it (the first, since the
    sampler's origin); each counts for the part of its interval inside the window.
    A window shorter than one interval is judged by the point that holds it. In a
    long case's halved timeline (measure.timeline) a kept point stands for the
    dropped one before it too: a sample of the same share."""
    timeline, window = details.timeline, details.measured_wall
    if timeline is None or timeline.origin_epoch_s is None or not _window(window):
        return 0.0
    start, end = window[0] - timeline.origin_epoch_s, window[1] - timeline.origin_epoch_s
    if end <= start:
        return 0.0
    covered, previous = 0.0, 0.0
    for point in sorted(timeline.points, key=_t):
        overlap = min(point.t, end) - max(previous, start)
        if overlap > 0 and contended(point, timeline.cpu_set, threads):
            covered += overlap
        previous = point.t
    return covered / (end - start)


def contended(point: TimelinePoint, cpu_set: Sequence[int] | None, threads: int) -> bool:
    """Whether other processes took more than CONTENDED_CPUS beyond the CPUs the case
    leaves spare during the point's interval (unknown readings: not contended)."""
    cores = _cores(point, cpu_set)
    if not cores:
        return False
    spare = max(0, len(cores) - threads)
    return other_cpus(point, cores) > spare + CONTENDED_CPUS


def other_cpus(point: TimelinePoint, cores: Sequence[float]) -> float:
    """CPUs' worth of time others took on `cores` (the point's busy % of the CPUs the
    worker may run on): their busy time minus the worker's own, plus the time they
    sat waiting for I/O (the sampler counts it idle; its share is the machine's)."""
    own = point.cpu_percent / 100
    iowait = point.iowait_percent
    waiting = iowait / 100 * len(cores) if iowait is not None else 0.0
    return max(0.0, sum(cores) / 100 - own + waiting)


def _cores(point: TimelinePoint, cpu_set: Sequence[int] | None) -> list[float]:
    """The busy % of each CPU the worker may run on (all of them for a timeline that
    did not record its CPU set); [] when the point has no per-CPU readings."""
    cores = point.cpu_cores
    if not cpu_set:
        return [float(c) for c in cores]
    return [float(cores[i]) for i in cpu_set if 0 <= i < len(cores)]


def _window(value: object) -> TypeGuard[Sequence[float]]:
    """A measured window: its start and end, two numbers (epoch seconds)."""
    return isinstance(value, list | tuple) and len(value) == 2 and all(map(_number, value))


def longest_stall_s(points: Sequence[TimelinePoint]) -> float:
    """The longest time covered by consecutive points with the worker (and its GPU)
    idle. A point reports the interval since the point before it, so a run of idle
    points starts at the point before the first (or at the first, for the list's
    first point, whose interval may lie partly outside the measured region)."""
    longest, run_start, previous_t = 0.0, None, None
    for point in points:
        if _idle(point):
            if run_start is None:
                run_start = previous_t if previous_t is not None else point.t
            longest = max(longest, point.t - run_start)
        else:
            run_start = None
        previous_t = point.t
    return longest


def _idle(point: TimelinePoint) -> bool:
    if point.cpu_percent > STALL_CPU_PERCENT:
        return False
    return not any(_gpu_busy(device) for device in point.gpu or ())


def _gpu_busy(device: GpuTelemetryReading) -> bool:
    util = device.gpu_util_percent
    return util is not None and util > GPU_BUSY_PERCENT


def _t(point: TimelinePoint) -> float:
    return point.t


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


# What each flag means, in the line a legend gives it (under the terminal table, in
# the HTML report); the module's docstring and docs/methodology.md say it in full. A
# `throttled:` flag is read by its prefix.
MEANINGS: dict[str, str] = {
    NOISY: "the steps' spread (IQR) is over 10% of their median: the figure moved while "
    "it was measured",
    "interference": "other processes used this case's CPUs during at least a tenth of its "
    "measurement",
    "stalled": "the case did nothing for over a second inside its measurement (a machine or "
    "I/O stall the timing holds)",
    "oversubscribed": "more threads than the CPUs available to the case",
    THROTTLED: "the GPU held its clocks down (the reason follows the colon) in over a tenth "
    "of the measurement",
    LOW_N_P99: "fewer samples than a 99th percentile needs (662, MLPerf's rule): its p99 "
    "is a rough estimate",
    "over-bound": "a served run's latency percentile exceeded its bound",
    "loadgen-invalid": "LoadGen judged the run invalid (details.loadgen says why)",
    "request-errors": "some of the server's requests failed (counted by kind in the result)",
    "short-answers": "the server answered some requests with fewer tokens than asked",
    "over-slo": "the server missed its TTFT or TPOT bound at its percentile",
    PREFIX_CACHE_WARM: "the server's prefix cache served prompts this run did not share by "
    "design: a cache warm from before the run, so less work than asked",
    "int8-no-vnni": "an int8 case on a CPU without int8 dot-product units: expect little gain",
    COMPILE_BUILT_HEADERS: "Inductor's precompiled headers were built as it compiled, once per "
    "user: its first call (or first epoch) is not comparable with a later run's",
    HOST_BOUND: "the GPU waited for the host: its kernels filled under 85% of a step",
    CLIENT_BOUND: "the benchmark's client could not keep up (its CPU or event-loop lag): its "
    "latencies hold its own delay; spread it with --client-processes",
    ABOVE_CEILING: "impossible: faster than the memory or GEMM ceiling allows (work skipped or "
    "cached, a miscounted token, a wrong precision or ceiling)",
}
# The flags that say a figure was disturbed while it was measured (the run's closing
# line names them and what to do), rather than describing the case or its server.
DISTURBED = frozenset({NOISY, "interference", "stalled", "oversubscribed"})


def meaning(flag: str) -> str:
    """A flag's one-line meaning (a throttle flag's by its prefix)."""
    if flag.startswith(THROTTLED):
        return MEANINGS[THROTTLED]
    return MEANINGS.get(flag, "see docs/methodology.md#flags")


def disturbed(flag: str) -> bool:
    """A figure disturbed while measured: something a quiet rerun would change (a GPU's
    power or thermal limit is the hardware's own regime, not a disturbance)."""
    return flag in DISTURBED
