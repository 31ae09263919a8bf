"""A generation engine as a server: MLPerf LoadGen's Server scenario with token latencies.

Queries arrive as LoadGen's Poisson process at --target-qps; each is one of the
case's seeded prompts, answered with exactly osl tokens by the backend's serving
engine (backends.serving_engine: continuous batching where the engine has it,
else `streams` generators one request at a time each). LoadGen judges TTFT and
TPOT at the SLO percentile against --ttft-ms and --tpot-ms (use_token_latencies,
FirstTokenComplete), as MLPerf's LLM benchmarks are judged; --find-peak searches
(measure.peak_search) for the highest rate whose bounds hold, confirmed.

Warm-up requests run one at a time first (the engine's first call and compilation
apart). After the test, every answered request's tokens are held to the torch
reference's for its prompt: a server that batches must still compute the same
tokens. The result's Generation record is dlbench's own reading of the chosen
test's requests, from LoadGen's issue callback for each (LoadGen's clock starts at the
scheduled arrival, a little earlier); LoadGen's own percentiles are beside it.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from dlbench.backends.base import Backend, Job
from dlbench.errors import CaseError, ReferenceUnavailable
from dlbench.measure.instruments import Instruments, Reading
from dlbench.measure.peak_search import Found, Search, alone_misses
from dlbench.measure.token_latency import token_latencies
from dlbench.reference.decoder import reference_tokens
from dlbench.results.details import Generation, LoadGen, TokenCheck
from dlbench.results.records import Result
from dlbench.spec.case import OFFICIAL_MIN_TIME_S, Settings
from dlbench.spec.loads import GenerationServerLoad
from dlbench.spec.loop_kinds import case_load
from dlbench.spec.record_dict import from_dict, to_dict
from dlbench.spec.registry import precision_info
from dlbench.spec.worker_request import CaseOutputs
from dlbench.untyped import JSONObject
from dlbench.worker.files import case_files_dir
from dlbench.worker.generation import generation_record
from dlbench.worker.loadgen_log import DETAIL_LOG, LoadGenOutcome, loadgen_outcome
from dlbench.worker.placement import require_placement
from dlbench.worker.progress import report_progress
from dlbench.worker.result import BARE, Measurement, ProcessSetup, Verdict, result_from
from dlbench.worker.serving import idle_miss
from dlbench.worker.token_check import check_tokens, failure
from dlbench.worker.token_sut import Answered, TokenQueryServer

if TYPE_CHECKING:
    from mlperf_loadgen import TestSettings  # imported where a test runs

# The QSL: this many seeded prompts, each checked against the reference's tokens
PROMPTS = 8
# A try at a low rate would last min_iters / rate: it takes fewer queries (never under
# MIN_TRY_QUERIES), so that it lasts at most this many --min-time
MAX_STRETCH = 4
MIN_TRY_QUERIES = 8
# --find-peak looks no lower than this fraction of the rate the warm-up suggests
FLOOR_FRACTION = 1 / 64
# LoadGen stops issuing past this many outstanding queries per stream (an overload
# that can never keep its bounds would otherwise queue for minutes)
OUTSTANDING_PER_STREAM = 32
NOT_OFFICIAL = (
    f"not an official MLPerf result: a short run (MLPerf's minimum is {OFFICIAL_MIN_TIME_S:g} s)"
)


@dataclass(frozen=True)
class TokenTest:
    """One LoadGen test of the server: LoadGen's outcome and the requests answered."""

    target_qps: float
    outcome: LoadGenOutcome
    answered: list[Answered]
    reading: Reading
    log_dir: Path

    @property
    def holds(self) -> bool:
        """LoadGen's TTFT and TPOT constraints held, and no query failed."""
        return self.outcome.perf_constraints_met is True and not self.outcome.errors

    def brief(self) -> JSONObject:
        kept = (
            "samples_per_s",
            "latency_ms",
            "verdict",
            "invalid_reason",
            "ttft_percentiles_ms",
            "tpot_percentiles_ms",
        )
        outcome = to_dict(self.outcome)
        return {"target_qps": self.target_qps, "keeps_bound": self.holds,
                "log_dir": str(self.log_dir), **{k: outcome.get(k) for k in kept}}  # fmt: skip


def run_token_serving(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
    """Serve the case's prompts under LoadGen; one Result (tokens checked)."""
    import mlperf_loadgen as lg  # imported here: the generation loop never loads it

    load = case_load(job.case, GenerationServerLoad)
    streams = int(load.streams or 1)
    setup_start = time.perf_counter()
    engine = backend.prepare_serving(job, streams)
    record = engine.details.generation
    converting_s = (record.convert_s or 0.0) if record and record.converted_now else 0.0
    setup_s = time.perf_counter() - setup_start - converting_s
    require_placement(job.device, engine.details)
    isl, osl = job.params["isl"], job.params["osl"]
    inputs = job.inputs(PROMPTS)["input_ids"]
    prompts = [[int(t) for t in row] for row in inputs]
    server = TokenQueryServer(lg, engine, prompts, osl)
    try:
        first = server.serve_alone(0)
        # a search starts from the warm-up's rate: never from the first call (compilation)
        warmups = max(settings.warmup_iters, 1 if load.find_peak else 0)
        warm = [server.serve_alone((i + 1) % PROMPTS) for i in range(warmups)]
        tester = _Tester(lg, server, job, settings)
        chosen, found = _measure(tester, warm or [first])
    finally:
        server.close()
    samples = tuple(a.times.e2e_s for a in chosen.answered)
    latencies = token_latencies([a.times for a in chosen.answered])
    generation = generation_record(record or Generation(), latencies, 1, isl, osl)
    energy = chosen.reading.recorded_in(engine.details, len(samples)).energy
    joules = energy.joules_per_sample if energy else None
    generation = replace(
        generation,
        energy_per_output_token_j=joules / osl if joules is not None else None,
        tokens=_token_check(job, [first, *warm, *chosen.answered]),
    )
    usage = chosen.reading.usage
    details = replace(
        engine.details,
        generation=generation,
        loadgen=_loadgen_record(job, settings, engine.batching, chosen, found),
        loop_wall_s=usage.wall_end_epoch_s - usage.wall_start_epoch_s,
    )
    measured = Measurement(
        chosen.reading, samples, device=engine.device, batch=1, samples_done=len(samples),
        details=details, rate=chosen.outcome.samples_per_s,
        first_call_ms=first.times.e2e_s * 1000.0,
        warmup_s=tuple(a.times.e2e_s for a in warm),
    )  # fmt: skip
    error = failure(generation.tokens) if generation.tokens is not None else None
    return result_from(
        job, measured, setup_s=setup_s, verdict=Verdict(error=error), process=process
    )


def _measure(tester: _Tester, warm: list[Answered]) -> tuple[TokenTest, Found[TokenTest] | None]:
    """The test at --target-qps, or the search for the peak rate and its chosen test."""
    case, load = tester.job.case, tester.load
    if not load.find_peak:
        return tester.run(float(load.target_qps or 0.0)), None
    e2e_s = statistics.median(a.times.e2e_s for a in warm)
    # one request alone misses a bound: no rate can keep it; one try shows it
    alone = _alone_misses(warm, load.ttft_ms, load.tpot_ms)
    # The peak lies between one request at a time (1/e2e) and every stream as fast as one
    # alone (streams/e2e), which no shared CPU reaches: a continuous-batching step of 32
    # sequences is several times one's. Their geometric mean leaves the fewest tries
    # either way, and a search that starts low spends its tries on rates that drain.
    start = 0.8 * math.sqrt(load.streams or 1) / max(e2e_s, 1e-6)
    if alone is not None:
        test = tester.run(start / 4)
        return test, Found([(start / 4, test)], None, test, alone)
    cpus = case.threads
    search: Search[TokenTest] = Search(
        start=start, floor=start * FLOOR_FRACTION, unit=" QPS",
        give_up=lambda qps, test: idle_miss(qps, test.reading, cpus, "the TTFT/TPOT bounds"),
    )  # fmt: skip
    found = search.run(tester.run)
    return found.reported, found


def _alone_misses(warm: list[Answered], ttft_ms: float | None, tpot_ms: float | None) -> str | None:
    ttft = 1000.0 * statistics.median(a.times.ttft_s for a in warm)
    tpots = [a.times.tpot_s for a in warm if a.times.tpot_s is not None]
    tpot = 1000.0 * statistics.median(tpots) if tpots else None
    return alone_misses(ttft, tpot, ttft_ms, tpot_ms)


class _Tester:
    """Runs LoadGen server tests on one system under test, each logged apart."""

    def __init__(
        self, lg: ModuleType, server: TokenQueryServer, job: Job, settings: Settings
    ) -> None:
        self.lg, self.server, self.job, self.settings = lg, server, job, settings
        self.load = case_load(job.case, GenerationServerLoad)
        self.count = 0
        self.root = case_files_dir(job.outputs) / "loadgen"

    def run(self, target_qps: float) -> TokenTest:
        self.count += 1
        folder = self.root / f"test-{self.count:02d}-qps-{target_qps:.6g}"
        folder.mkdir(parents=True, exist_ok=True)
        log = self.lg.LogSettings()
        log.log_output.outdir = str(folder)
        log.enable_trace = False
        self.server.reset()
        instruments = Instruments(self.job.device)
        instruments.start()
        # a path that does not exist: LoadGen would read ./audit.config from the user's folder
        settings = self._settings(target_qps)
        self.lg.StartTestWithLogSettings(self.server.sut, self.server.qsl, settings, log,
                                         str(folder / "no-audit.config"))  # fmt: skip
        reading = instruments.stop()
        self.server.raise_if_failed()
        detail = folder / DETAIL_LOG
        if not detail.is_file():
            raise CaseError(f"LoadGen wrote no {DETAIL_LOG} in {folder}")
        test = TokenTest(target_qps, loadgen_outcome(detail, "server", 1),
                         list(self.server.answered), reading, folder)  # fmt: skip
        if self.load.find_peak:
            percentile = float(self.load.slo_percentile or 99.0)
            _report_try(self.job.outputs, self.count, test, percentile)
        return test

    def _settings(self, target_qps: float) -> TestSettings:
        lg, load, settings = self.lg, self.load, self.settings
        test = lg.TestSettings()
        test.scenario = lg.TestScenario.Server
        test.mode = lg.TestMode.PerformanceOnly
        test.min_duration_ms = max(1, round(settings.min_time_s * 1000))
        longest_s = MAX_STRETCH * max(settings.min_time_s, 1.0)
        affordable = max(MIN_TRY_QUERIES, math.ceil(target_qps * longest_s))
        test.min_query_count = min(settings.min_iters, affordable)
        test.qsl_rng_seed = test.sample_index_rng_seed = settings.seed
        test.schedule_rng_seed = settings.seed
        test.server_target_qps = target_qps
        test.use_token_latencies = True
        ttft_ms, tpot_ms = float(load.ttft_ms or 0.0), float(load.tpot_ms or 0.0)
        test.ttft_latency = round(ttft_ms * 1e6)  # ns
        test.tpot_latency = round(tpot_ms * 1e6)
        test.server_target_latency_percentile = float(load.slo_percentile or 99.0) / 100.0
        # a whole request within both bounds: LoadGen's overall latency target
        osl = self.job.params["osl"]
        test.server_target_latency_ns = round((ttft_ms + tpot_ms * (osl - 1)) * 1e6)
        test.server_max_async_queries = OUTSTANDING_PER_STREAM * max(1, load.streams or 1)
        return test


def _report_try(outputs: CaseOutputs, count: int, test: TokenTest, percentile: float) -> None:
    held = f"{percentile:g}"
    ttft = (test.outcome.ttft_percentiles_ms or {}).get(held, math.nan)
    tpot = (test.outcome.tpot_percentiles_ms or {}).get(held, math.nan)
    verdict = "holds" if test.holds else "misses"
    report_progress(
        outputs,
        f"find-peak try {count}: {test.target_qps:.4g} QPS, TTFT p{held} "
        f"{ttft:.3g} ms, TPOT p{held} {tpot:.3g} ms ({verdict} the bounds)",
    )


def _loadgen_record(
    job: Job, settings: Settings, batching: str, chosen: TokenTest, found: Found[TokenTest] | None
) -> LoadGen:
    load = case_load(job.case, GenerationServerLoad)
    details: JSONObject = {
        "scenario": "server", "note": NOT_OFFICIAL, "min_duration_s": settings.min_time_s,
        **to_dict(chosen.outcome), "log_dir": str(chosen.log_dir), "target_qps": chosen.target_qps,
        "percentile": load.slo_percentile, "streams": load.streams,
        "ttft_bound_ms": load.ttft_ms, "tpot_bound_ms": load.tpot_ms,
        "batching": batching,
    }  # fmt: skip
    if found is not None:
        details["tries"] = [test.brief() for _, test in found.tries]
        details["peak_qps"] = found.peak
        details["peak_confirmed"] = found.note is None
        details["peak_note"] = found.note
    return from_dict(LoadGen, details)


def _token_check(job: Job, answered: list[Answered]) -> TokenCheck:
    """Every answered request's tokens against the reference's for its prompt."""
    try:
        reference = reference_tokens(job.case_inputs(PROMPTS))
    except ReferenceUnavailable as exc:
        return TokenCheck(verdict=f"not checked: {exc}")
    rows = [a.prompt_index for a in answered]
    expected = {name: values[rows] for name, values in reference.items()}
    tolerance = precision_info(job.case.precision).tolerance or 0.0
    return check_tokens([a.tokens for a in answered], expected, tolerance)
