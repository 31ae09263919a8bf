"""An OpenAI-compatible server under load: warm it up, drive the profile, judge the SLOs.

The client is one event loop (worker.endpoint_load) over one HTTP connection pool
with no cap on connections (httpx's default of 100 would queue requests in the
client and add the wait to their TTFT). The warm-up requests go out one at a time
on that pool first, so the measured requests find connections open and the
server's first-request costs paid. The instruments bracket the loaded region.

Tokens are counted from the server's usage report, else with --tokenizer, else
as streamed chunks (said in the record). A request's TTFT, TPOT and inter-token
gaps come from its chunks (measure.token_latency); the SLOs judge each request
(goodput) and the run's percentiles (the verdict --find-peak searches on).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from dlbench.backends.base import Backend, Job
from dlbench.measure.instruments import Instruments, Reading
from dlbench.measure.load_profile import LoadProfile
from dlbench.measure.openai_api import request_body
from dlbench.measure.openai_stream import CONNECT_TIMEOUT_S, StreamedRequest, stream_request
from dlbench.measure.stats import percentile
from dlbench.measure.token_latency import TokenTimes, token_latencies
from dlbench.results.details import Details, EndpointLoad, Generation
from dlbench.results.records import STATUS_FAILED, Result
from dlbench.spec.case import DEFAULT_SLO_PERCENTILE, Case, Settings
from dlbench.worker.endpoint_load import Budget, LoadOutcome, drive
from dlbench.worker.files import case_files_dir
from dlbench.worker.generation import generation_record
from dlbench.worker.progress import report_progress
from dlbench.worker.result import result_from
from dlbench.workloads.requests import (
    Conversation,
    PromptText,
    RequestSet,
    TokenizerText,
    WordText,
)

# The most conversations one load may start (a closed loop at a fast server)
MAX_CONVERSATIONS = 1_000_000
FIRST_ERRORS = 5
DATASET_FILE = "requests.jsonl"
# How an answer's output tokens were counted, most exact first
USAGE, LENGTH = "server usage", "max_tokens (finish_reason length)"
TOKENIZER, CHUNKS = "tokenizer", "streamed chunks"
COUNTED_BY = (USAGE, LENGTH, TOKENIZER, CHUNKS)


@dataclass
class Loaded:
    """One load's outcome and its instruments' reading."""

    outcome: LoadOutcome
    reading: Reading


class Session:
    """The requests of one case, sent on one client."""

    def __init__(self, case: Case, requests: RequestSet, client: httpx.AsyncClient) -> None:
        assert case.endpoint is not None and case.served_model is not None  # the plan's
        self.case, self.requests, self.client = case, requests, client
        self.url, self.model = case.endpoint, case.served_model
        self.server_header: str | None = None

    async def conversation(self, conversation: Conversation) -> list[StreamedRequest]:
        """Its turns in order, each prompt the conversation so far; a failed turn
        ends it (the next would lack the answer it follows)."""
        history: list[dict[str, str]] = []
        records = []
        for turn in conversation.turns:
            history.append({"role": "user", "content": turn.text})
            prompt = turn.text if len(history) == 1 else list(history)
            body = request_body(self.case.api, self.model, prompt, turn.output_tokens)
            record = await stream_request(self.client, self.url, self.case.api, body)
            records.append(record)
            if not record.ok:
                break
            history.append({"role": "assistant", "content": record.text})
        return records

    async def warm_up(self, count: int) -> list[StreamedRequest]:
        records = []
        for index in range(count):
            records += await self.conversation(self.requests.conversation(index, warmup=True))
        return records

    async def load(self, profile: LoadProfile, budget: Budget, seed: int,
                   device: str) -> Loaded:  # fmt: skip
        async def send(index: int) -> list[StreamedRequest]:
            return await self.conversation(self.requests.conversation(index))

        # the device is the server's: energy is metered where the work runs, or said
        # to be unmeasurable from here
        instruments = Instruments(device)
        instruments.start()
        outcome = await drive(profile, send, budget, seed)
        return Loaded(outcome, instruments.stop())


def client_for(settings: Settings) -> httpx.AsyncClient:
    """No cap on connections (a capped pool queues in the client); a read may wait
    as long as the case may run."""
    timeout = httpx.Timeout(settings.timeout_s or None, connect=CONNECT_TIMEOUT_S)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    return httpx.AsyncClient(timeout=timeout, limits=limits)


def prompt_text(case: Case) -> PromptText:
    return TokenizerText(Path(case.tokenizer)) if case.tokenizer else WordText()


def run_endpoint(backend: Backend, job: Job, settings: Settings) -> Result:
    """Warm the server up, put the case's load on it, and judge its SLOs."""
    case = job.case
    text = prompt_text(case)
    requests = RequestSet(job.params, job.seed, text)
    profile = LoadProfile.of(case.concurrency, case.request_rate, case.burstiness)
    budget = Budget(settings.min_time_s, settings.min_iters, MAX_CONVERSATIONS)

    async def measure() -> tuple[list[StreamedRequest], Loaded]:
        async with client_for(settings) as client:
            session = Session(case, requests, client)
            warm = await session.warm_up(settings.warmup_iters)
            report_progress(f"warmed up: {len(warm)} requests; {profile.describe()}")
            return warm, await session.load(profile, budget, job.seed, job.device)

    setup_start = time.perf_counter()
    warm, loaded = asyncio.run(measure())
    return endpoint_result(job, loaded, warm, text, requests, profile, setup_start)


def endpoint_result(job: Job, loaded: Loaded, warm: list[StreamedRequest], text: PromptText,
                    requests: RequestSet, profile: LoadProfile,
                    setup_start: float) -> Result:  # fmt: skip
    """The Result of one load: e2e latency samples, token latencies, the SLO verdict."""
    case, outcome = job.case, loaded.outcome
    done = [r for r in outcome.requests if r.ok]
    counted, counted_by = _output_tokens(done, text)
    times = [TokenTimes(r.sent_s, r.chunk_times_s, n) for r, n in zip(done, counted, strict=True)]
    record = EndpointLoad(
        url=case.endpoint or "",
        served_model=case.served_model or "",
        api=case.api,
        profile=profile.describe(),
        conversations=outcome.conversations,
        requests=len(outcome.requests),
        ok=len(done),
        duration_s=outcome.duration_s,
        tokens_counted_by=counted_by if done else None,
        saturated=outcome.saturated,
        cancelled=outcome.cancelled,
    )
    _count_errors(record, outcome.requests)
    record.short_answers = sum(
        r.max_tokens is not None and n < r.max_tokens for r, n in zip(done, counted, strict=True)
    )
    _rates(record, done, counted, outcome.duration_s)
    judge_slos(record, case, times, outcome.duration_s)
    record.dataset_file, record.dataset_digest = _write_dataset(requests, outcome.conversations)
    if outcome.send_lag_s:
        record.send_lag_p99_ms = percentile(sorted(outcome.send_lag_s), 99) * 1000.0
    samples_s = [t.e2e_s for t in times]
    result = result_from(
        job,
        loaded.reading,
        samples_s,
        device=job.device,
        batch=1,
        samples_done=len(done),
        details=Details(),
        rate=record.requests_per_s,
        warmup_s=[r.done_s - r.sent_s for r in warm if r.done_s is not None],
    )
    isl = round(record.prompt_tokens_mean or job.params["isl"])
    latencies = token_latencies(times) if times else None
    if latencies is not None:
        result.details.generation = generation_record(
            Generation(), latencies, 1, isl, job.params["osl"]
        )
    result.details.endpoint = record
    result.details.loop_wall_s = outcome.duration_s
    result.setup_s = outcome.started_s - setup_start  # the warm-up, before the load
    _fail_where_unusable(result, record)
    return result


def _output_tokens(done: list[StreamedRequest], text: PromptText) -> tuple[list[int], str]:
    """Each answer's output tokens: the server's usage; else max_tokens where the server
    says it stopped there; else the tokenizer's count of the text (vLLM's and
    GuideLLM's way: decoded text may re-encode to fewer tokens); else its chunks. And
    by which (the least exact any answer needed)."""
    counts, used = [], set()
    for record in done:
        count, way = _counted(record, text)
        counts.append(count)
        used.add(way)
    least = max(used, key=COUNTED_BY.index) if used else USAGE
    return counts, least


def _counted(record: StreamedRequest, text: PromptText) -> tuple[int, str]:
    if record.output_tokens is not None:
        return record.output_tokens, USAGE
    if record.ran_to_length:
        assert record.max_tokens is not None
        return record.max_tokens, LENGTH
    counted = text.count(record.text)
    if counted is not None:
        return counted, TOKENIZER
    return len(record.chunk_times_s), CHUNKS


def _count_errors(record: EndpointLoad, sent: list[StreamedRequest]) -> None:
    failed = [r for r in sent if not r.ok]
    record.errors = dict(Counter(r.error_kind or "client" for r in failed))
    record.first_errors = [r.error or "" for r in failed[:FIRST_ERRORS]]


def _rates(record: EndpointLoad, done: list[StreamedRequest], counted: list[int],
           duration_s: float) -> None:  # fmt: skip
    if duration_s <= 0 or not done:
        return
    record.requests_per_s = len(done) / duration_s
    record.output_tokens_per_s = sum(counted) / duration_s
    record.output_tokens_mean = sum(counted) / len(done)
    prompts = [r.prompt_tokens for r in done if r.prompt_tokens is not None]
    if prompts:
        record.prompt_tokens_mean = sum(prompts) / len(prompts)


def judge_slos(record: EndpointLoad, case: Case, times: list[TokenTimes],
               duration_s: float) -> None:  # fmt: skip
    """Goodput (the answered requests within both bounds, per second) and the
    verdict: each bound kept at the percentile, no request failed, no saturation."""
    if case.ttft_ms is None and case.tpot_ms is None:
        return
    level = case.slo_percentile or DEFAULT_SLO_PERCENTILE
    record.slo_percentile, record.ttft_bound_ms, record.tpot_bound_ms = (
        level, case.ttft_ms, case.tpot_ms,
    )  # fmt: skip
    good = sum(_within(t, case) for t in times)
    record.slo_met_share = good / record.requests if record.requests else 0.0
    record.goodput_per_s = good / duration_s if duration_s > 0 else 0.0
    ttft_ms, tpot_ms = slo_percentiles(times, level)
    kept = all(
        bound is None or (value is not None and value <= bound)
        for bound, value in ((case.ttft_ms, ttft_ms), (case.tpot_ms, tpot_ms))
    )
    failed = record.requests - record.ok
    record.slo_holds = bool(times) and kept and not failed and record.saturated is None


def slo_percentiles(times: list[TokenTimes], level: float) -> tuple[float | None, float | None]:
    """TTFT and TPOT at the SLO's percentile, in ms (None where none was measured)."""
    ttft = sorted(t.ttft_s * 1000.0 for t in times)
    tpot = sorted(t.tpot_s * 1000.0 for t in times if t.tpot_s is not None)
    return (percentile(ttft, level) if ttft else None,
            percentile(tpot, level) if tpot else None)  # fmt: skip


def _within(times: TokenTimes, case: Case) -> bool:
    if case.ttft_ms is not None and times.ttft_s * 1000.0 > case.ttft_ms:
        return False
    tpot = times.tpot_s
    return case.tpot_ms is None or tpot is None or tpot * 1000.0 <= case.tpot_ms


def _write_dataset(requests: RequestSet, conversations: int) -> tuple[str, str]:
    """The conversations sent, one JSON line each, beside the run; and their digest."""
    lines = []
    for index in range(conversations):
        conversation = requests.conversation(index)
        lines.append(json.dumps(asdict(conversation), separators=(",", ":")))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    folder = case_files_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DATASET_FILE
    path.write_bytes(data)
    return str(path), hashlib.sha256(data).hexdigest()


def _fail_where_unusable(result: Result, record: EndpointLoad) -> None:
    """No answered request, or a saturated server: the numbers describe no steady load."""
    if record.saturated:
        result.status, result.error = STATUS_FAILED, f"saturated: {record.saturated}"
    elif not record.ok:
        first = record.first_errors[0] if record.first_errors else "none was sent"
        result.status = STATUS_FAILED
        result.error = f"no request was answered ({record.requests} sent): {first}"
