"""An OpenAI-compatible server under load: warm it up, drive the profile, judge the SLOs.

The client is one event loop (worker.endpoint_load) over one HTTP connection pool
with no cap on connections (httpx's default of 100 would queue requests in the
client and add the wait to their TTFT). The warm-up requests go out one at a time
on that pool first, so the measured requests find connections open and the
server's first-request costs paid. The instruments bracket the loaded region.

Tokens are counted from the server's usage report, else with --tokenizer, else
as streamed chunks (said in the record). A request's TTFT, TPOT and inter-token
gaps come from its chunks (measure.token_latency); the SLOs judge each request
(goodput) and the run's percentiles (the verdict --find-peak searches on). An open
loop's TTFT and end-to-end latency count from each request's scheduled arrival
(measure.load_profile), the client's own health is kept beside them
(measure.client_health), and --client-processes N spreads the load over N client
processes (worker.client_processes). The model's work per step, for the roofline,
comes from the workload dlbench serves, else the served model's config.json
(results.roofline_bound).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from multiprocessing.connection import Connection

import httpx

from dlbench.backends.base import Backend, Job
from dlbench.errors import CaseError
from dlbench.measure.client_health import health_of
from dlbench.measure.client_limits import connection_limit, raise_open_files
from dlbench.measure.instruments import Instruments, Reading
from dlbench.measure.load_profile import (
    CONCURRENCY,
    POISSON,
    RATE,
    SCHEDULE,
    LoadProfile,
    latency_clock,
)
from dlbench.measure.openai_api import length_fields, request_body
from dlbench.measure.openai_auth import auth_headers, redacted
from dlbench.measure.openai_stream import (
    CONNECT_TIMEOUT_S,
    FEW_TOKENS,
    StreamedRequest,
    negotiate,
    stream_request,
)
from dlbench.measure.peak_search import Found, Search, alone_misses
from dlbench.measure.saturation import load_the_test
from dlbench.measure.server_metrics import ServerWindow, client_means
from dlbench.measure.stats import percentile
from dlbench.measure.token_latency import TokenTimes, token_latencies
from dlbench.results.details import Details, EndpointLoad, Generation, LoadStep
from dlbench.results.records import Result
from dlbench.spec.case import Case, Settings
from dlbench.spec.case_parts import DEFAULT_SLO_PERCENTILE
from dlbench.spec.loads import ClientLoad, ForeignServerLoad, SloBounds
from dlbench.spec.loop_kinds import case_load
from dlbench.spec.worker_request import CaseOutputs
from dlbench.worker.client_processes import spread, wait_for_start
from dlbench.worker.endpoint_load import Budget, LoadOutcome, Send, Share, StopSignal, drive
from dlbench.worker.files import case_files_dir
from dlbench.worker.generation import generation_record
from dlbench.worker.model_work import endpoint_work
from dlbench.worker.progress import report_progress
from dlbench.worker.result import BARE, Measurement, ProcessSetup, Verdict, result_from
from dlbench.workloads.requests import (
    Conversation,
    PromptText,
    RequestSet,
    new_salt,
    prompt_text,
)

# The most conversations one load may start (a closed loop at a fast server)
MAX_CONVERSATIONS = 1_000_000
FIRST_ERRORS = 5
DATASET_FILE = "requests.jsonl"
# How an answer's output tokens were counted, most exact first
TOKEN_IDS, USAGE, LENGTH = "token ids", "server usage", "max_tokens (finish_reason length)"
TOKENIZER, CHUNKS = "tokenizer", "streamed chunks"
COUNTED_BY = (TOKEN_IDS, USAGE, LENGTH, TOKENIZER, CHUNKS)


@dataclass(frozen=True)
class Loaded:
    """One load: its outcome, its instruments' reading, and what was judged of it."""

    outcome: LoadOutcome
    reading: Reading
    profile: LoadProfile
    offset: int  # the index of its first conversation
    record: EndpointLoad
    times: list[TokenTimes]  # the answered requests' clocks

    @property
    def holds(self) -> bool:
        return bool(self.record.slo_holds)


@dataclass(frozen=True)
class LoadTarget:
    """Where a case's load goes and what it is: the server's address, the model the
    requests name, the case's load (its kind's record: an endpoint's, or a served
    engine's), and the client processes it is spread over."""

    url: str
    model: str
    load: ClientLoad
    processes: int = 1


def endpoint_target(case: Case) -> LoadTarget:
    """An endpoint case's: the server and model its plan named."""
    load = case_load(case, ForeignServerLoad)
    assert load.endpoint is not None and load.served_model is not None  # the plan's
    return LoadTarget(load.endpoint, load.served_model, load, load.client_processes or 1)


class Session:
    """The requests of one case, sent on one client."""

    def __init__(self, target: LoadTarget, requests: RequestSet, client: httpx.AsyncClient,
                 device: str, timeout_s: float | None = None) -> None:  # fmt: skip
        self.target, self.requests, self.client, self.device = target, requests, client, device
        self.timeout_s = timeout_s  # the client's deadline, for its client processes
        self.url, self.model, self.api = target.url, target.model, target.load.api
        self.token_ids_field: str | None = None  # as negotiate found the server answers
        self.length_fields: list[str] = []  # those the requests sent (openai_api.LENGTH_FIELDS)

    async def negotiate(self) -> None:
        """Whether, and how, the server sends token ids: asked as the check before the
        run asked (measure.openai_stream.negotiate), outside the measured region."""
        turn = self.requests.conversation(0, warmup=True).turns[0]
        body = request_body(self.api, self.model, turn.text,
                            min(FEW_TOKENS, turn.output_tokens))  # fmt: skip
        found = await negotiate(self.client, self.url, self.api, body)
        self.token_ids_field = found.token_ids_field

    async def conversation(self, conversation: Conversation) -> list[StreamedRequest]:
        """Its turns in order, each prompt the conversation so far; a failed turn
        ends it (the next would lack the answer it follows)."""
        history: list[dict[str, str]] = []
        records = []
        for turn in conversation.turns:
            history.append({"role": "user", "content": turn.text})
            prompt = turn.text if len(history) == 1 else list(history)
            body = request_body(self.api, self.model, prompt, turn.output_tokens,
                                self.token_ids_field)  # fmt: skip
            self.length_fields = self.length_fields or length_fields(body)
            record = await stream_request(self.client, self.url, self.api, body)
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

    def sender(self, offset: int) -> Send:
        """Conversation i of a load whose conversations start at `offset`."""

        async def send(index: int) -> list[StreamedRequest]:
            return await self.conversation(self.requests.conversation(offset + index))

        return send

    async def load(self, profile: LoadProfile, budget: Budget, seed: int,
                   offset: int = 0) -> Loaded:  # fmt: skip
        """One load; its conversations start at `offset` (each try of a search sends
        requests of its own: a server's prefix cache would serve repeats faster)."""
        # the device is the server's: energy is metered where the work runs, or said
        # to be unmeasurable from here
        instruments = Instruments(self.device)
        # the server's own counters over the same window, read just outside it
        server = ServerWindow(self.client, self.url, self.model)

        async def begin() -> None:
            await server.open()
            instruments.start()

        processes = self.target.processes
        if processes > 1:  # their start-up before the region (client_processes.spread)
            share = ClientShare(self.target, self.requests.params, self.requests.seed,
                                self.requests.salt, self.token_ids_field, self.timeout_s,
                                self.device, profile, budget, seed, offset)  # fmt: skip
            outcome = await spread(client_process, share, processes, begin)
        else:
            await begin()
            outcome = await drive(profile, self.sender(offset), budget, seed)
        reading = instruments.stop()
        counters = await server.close(answered=sum(r.ok for r in outcome.requests))
        record, times = judged(self.target, outcome, profile, self.requests.text)
        record = replace(record, server=client_means(counters, times))
        return Loaded(outcome, reading, profile, offset, record, times)


@dataclass(frozen=True)
class ClientShare:
    """What a client process needs to rebuild the session and run its share of a load
    (worker.client_processes): the same requests (seed and salt), the token-id field
    negotiated, the client's deadline."""

    target: LoadTarget
    params: dict[str, int]
    seed: int
    salt: str | None
    token_ids_field: str | None
    timeout_s: float | None
    device: str
    profile: LoadProfile
    budget: Budget
    load_seed: int
    offset: int


def client_process(job: ClientShare, share: Share, stop: StopSignal,
                   connection: Connection) -> None:  # fmt: skip
    """A client process's share of a load (worker.client_processes' target)."""
    raise_open_files()
    requests = RequestSet(job.params, job.seed, load_text(job.target.load), job.salt)
    loop = asyncio.new_event_loop()
    client = client_for(job.timeout_s)
    try:
        session = Session(job.target, requests, client, job.device, job.timeout_s)
        session.token_ids_field = job.token_ids_field
        if job.profile.kind == RATE:
            load_the_test()  # before READY: never inside the load
        share = wait_for_start(connection, share)
        outcome = loop.run_until_complete(
            drive(job.profile, session.sender(job.offset), job.budget, job.load_seed, share, stop)
        )
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()
    connection.send(outcome)


def client_for(timeout_s: float | None) -> httpx.AsyncClient:
    """No cap on connections (a capped pool queues in the client); a read may wait
    as long as the case may run."""
    timeout = httpx.Timeout(timeout_s or None, connect=CONNECT_TIMEOUT_S)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    return httpx.AsyncClient(timeout=timeout, limits=limits, headers=auth_headers())


def load_text(load: ClientLoad) -> PromptText:
    """The text a load's prompts are made of: an endpoint's --tokenizer's (a served
    engine's prompts are its workload's token ids: worker.served_engine)."""
    return prompt_text(load.tokenizer if isinstance(load, ForeignServerLoad) else None)


# Given the run's event loop, a future it completes once the server has exited
ExitWatch = Callable[[asyncio.AbstractEventLoop], "asyncio.Future[None]"]


class ServerExited(CaseError):
    """The server run_endpoint was watching exited while it was loaded."""


def _cancel_all_once(loop: asyncio.AbstractEventLoop,
                     exited: asyncio.Future[None]) -> asyncio.Future[None]:  # fmt: skip
    """`exited`, which cancels every task of `loop` when it completes (not when it is
    cancelled): the requests in flight, and the load that waits on them."""

    def cancel_all(future: asyncio.Future[None]) -> None:
        if not future.cancelled():
            for task in asyncio.all_tasks(loop):
                task.cancel()

    exited.add_done_callback(cancel_all)
    return exited


def run_endpoint_case(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
    """An endpoint case as its loop kind runs it: the server is someone else's, and
    its backend (no framework) is not used."""
    run = run_endpoint(job, settings, endpoint_target(job.case))
    return result_from(job, run.measured, setup_s=run.setup_s, verdict=run.verdict,
                       process=process)  # fmt: skip


@dataclass(frozen=True)
class EndpointRun:
    """What run_endpoint measured, for its caller to make the Result of: the load (the
    reported try of a search), the set-up before it (the warm-up), and whether its
    numbers describe a steady load."""

    measured: Measurement
    setup_s: float
    verdict: Verdict


def run_endpoint(job: Job, settings: Settings, target: LoadTarget,
                 requests: RequestSet | None = None,
                 new_session: Callable[..., Session] = Session,
                 server_exit: ExitWatch | None = None) -> EndpointRun:  # fmt: skip
    """Warm the server up, put the case's load on it (or search the highest load whose
    SLOs hold), and judge its SLOs. One event loop and one client for it all, so
    every load finds the connections the warm-up opened. `requests` and `new_session`:
    an engine dlbench serves sends its workload's own prompts (worker.served_engine),
    and `server_exit` watches the server it started: once that has exited, whatever
    the loop is doing is cancelled and ServerExited raised."""
    load = target.load
    if requests is None:
        # a salt of this process's own: no earlier run, nor another case of this one,
        # warmed a cache for its prompts (workloads.requests)
        requests = RequestSet(job.params, job.seed, load_text(load), new_salt())
    raise_open_files()  # the users the plan allowed (measure.client_limits)
    budget = Budget(settings.min_time_s, settings.min_iters, MAX_CONVERSATIONS)
    setup_start = time.perf_counter()
    loop = asyncio.new_event_loop()
    client = client_for(settings.timeout_s)
    exited = _cancel_all_once(loop, server_exit(loop)) if server_exit is not None else None
    try:
        session = new_session(target, requests, client, job.device, settings.timeout_s)
        if watches_its_queue(load):
            load_the_test()  # SciPy loaded here, in the set-up, not inside the load
        loop.run_until_complete(session.negotiate())
        warm = loop.run_until_complete(session.warm_up(settings.warmup_iters))
        report_progress(job.outputs, f"warmed up: {len(warm)} requests")
        if load.find_peak:
            say = functools.partial(report_progress, job.outputs)
            found = find_peak(session, loop, budget, job.seed, warm, say)
            loaded = found.reported
        else:
            profile = LoadProfile.of(load.concurrency, load.request_rate, load.burstiness)
            loaded = loop.run_until_complete(session.load(profile, budget, job.seed))
    except asyncio.CancelledError:
        if exited is None or not exited.done() or exited.cancelled():
            raise
        raise ServerExited("the server exited during the load") from None
    finally:
        if exited is not None:
            exited.cancel()  # a server that exits from now on cancels nothing
        loop.run_until_complete(client.aclose())
        loop.close()
    record = replace(loaded.record, token_ids_field=session.token_ids_field,
                     length_fields=tuple(session.length_fields))  # fmt: skip
    if load.find_peak:
        record = _with_search(record, found)
    loaded = replace(loaded, record=record)
    measured = endpoint_measurement(job, loaded, warm, requests)
    setup_s = loaded.outcome.started_s - setup_start  # the warm-up, before the load
    return EndpointRun(measured, setup_s, Verdict(error=_unusable(record)))


def watches_its_queue(load: ClientLoad) -> bool:
    """Whether the case's loads arrive on a schedule (a rate, or a rate search),
    which measure.saturation watches for a queue that only grows."""
    return load.request_rate is not None or (load.find_peak and load.concurrency is None)


def find_peak(
    session: Session,
    loop: asyncio.AbstractEventLoop,
    budget: Budget,
    seed: int,
    warm: list[StreamedRequest],
    say: Callable[[str], None],
) -> Found[Loaded]:
    """The highest concurrency (where the case gives one to start from) or request
    rate (from the case's, else from what one user got in the warm-up) whose SLOs
    hold; each try's verdict is a line to `say` (the progress bar)."""
    load = session.target.load
    search: Search[Loaded]  # its tries' outcomes (try_at below)
    if load.concurrency is not None:
        # no more users than this process can hold open (as the plan checked --concurrency)
        limit = connection_limit()
        search = Search(start=load.concurrency, floor=1, whole=True,
                        ceiling=limit.most if limit else None,
                        ceiling_why=f"one client process holds at most {limit.most} requests "
                                    f"open ({limit.why})" if limit else "")  # fmt: skip
    else:
        start = load.request_rate or _one_user_rate(warm)
        search = Search(start=start, floor=start / 64)
    # a request alone (the warm-up's best) already misses a bound: no load can keep the
    # SLOs, which one try shows (a descent to the floor would take hours at low rates)
    alone = _alone_misses(session, warm)
    tries = 0

    def try_at(at: float) -> Loaded:
        nonlocal tries
        if search.whole:
            profile = LoadProfile(CONCURRENCY, concurrency=int(at))
        else:
            profile = LoadProfile(RATE, rate=at, burstiness=load.burstiness or POISSON)
        loaded = loop.run_until_complete(
            session.load(profile, budget, seed, offset=tries * MAX_CONVERSATIONS)
        )
        tries += 1
        verdict = "holds" if loaded.holds else "misses"
        say(f"find-peak try {tries}: {profile.describe()}: {verdict} the SLOs")
        return loaded

    if alone is not None:
        loaded = try_at(search.start)
        return Found([(search.start, loaded)], None, loaded, alone)
    return search.run(try_at)


def _alone_misses(session: Session, warm: list[StreamedRequest]) -> str | None:
    """Why no load can hold, where the warm-up's best request (one at a time: the
    least any load can give) misses a bound."""
    done = [r for r in warm if r.ok]
    if not done:
        return None
    times = [TokenTimes(r.sent_s, r.chunk_times_s, _counted(r, session.requests.text)[0])
             for r in done]  # fmt: skip
    tpots = [t.tpot_s * 1000.0 for t in times if t.tpot_s is not None]
    load = session.target.load
    return alone_misses(min(t.ttft_s for t in times) * 1000.0, min(tpots) if tpots else None,
                        load.ttft_ms, load.tpot_ms)  # fmt: skip


def _one_user_rate(warm: list[StreamedRequest]) -> float:
    """Requests a second one user got in the warm-up: where a rate search starts."""
    spans = [r.done_s - r.sent_s for r in warm if r.ok and r.done_s is not None]
    return 1.0 / (sum(spans) / len(spans)) if spans else 1.0


def _with_search(record: EndpointLoad, found: Found[Loaded]) -> EndpointLoad:
    return replace(
        record,
        peak_axis=CONCURRENCY if found.reported.profile.kind == CONCURRENCY else RATE,
        peak=found.peak,
        peak_confirmed=found.note is None and found.peak is not None,
        peak_note=found.note,
        tries=tuple(_step(load, loaded) for load, loaded in found.tries),
    )


def _step(load: float, loaded: Loaded) -> LoadStep:
    record = loaded.record
    ttft, tpot = slo_percentiles(loaded.times, record.slo_percentile or DEFAULT_SLO_PERCENTILE)
    return LoadStep(load=load, holds=loaded.holds, requests_per_s=record.requests_per_s,
                    goodput_per_s=record.goodput_per_s, ttft_ms=ttft, tpot_ms=tpot,
                    errors=record.requests - record.ok, saturated=record.saturated)  # fmt: skip


def judged(target: LoadTarget, outcome: LoadOutcome, profile: LoadProfile,
           text: PromptText) -> tuple[EndpointLoad, list[TokenTimes]]:  # fmt: skip
    """What a load did: counts, errors, rates, the SLO verdict; and the answered
    requests' clocks."""
    done = [r for r in outcome.requests if r.ok]
    counted, counted_by = _output_tokens(done, text)
    clock = latency_clock(profile, target.load.latency_clock)
    times = [TokenTimes(_start(r, clock), r.chunk_times_s, n)
             for r, n in zip(done, counted, strict=True)]  # fmt: skip
    errors, first_errors = _errors(outcome.requests)
    rates = _Rates.of(done, counted, outcome.duration_s)
    record = EndpointLoad(
        url=target.url,
        served_model=target.model,
        api=target.load.api,
        profile=profile.describe(),
        conversations=outcome.conversations,
        requests=len(outcome.requests),
        ok=len(done),
        duration_s=outcome.duration_s,
        tokens_counted_by=counted_by if done else None,
        saturated=outcome.saturated,
        cancelled=outcome.cancelled,
        timed_from=clock,
        client=health_of(outcome.client, outcome.duration_s),
        short_answers=sum(
            r.max_tokens is not None and n < r.max_tokens
            for r, n in zip(done, counted, strict=True)
        ),
        send_lag_p99_ms=percentile(sorted(outcome.send_lag_s), 99) * 1000.0
        if outcome.send_lag_s
        else None,
        errors=errors,
        first_errors=tuple(first_errors),
        requests_per_s=rates.requests_per_s,
        output_tokens_per_s=rates.output_tokens_per_s,
        output_tokens_mean=rates.output_tokens_mean,
        prompt_tokens_mean=rates.prompt_tokens_mean,
    )
    return judge_slos(record, target.load, times, outcome.duration_s), times


def _start(request: StreamedRequest, clock: str) -> float:
    """Where a request's TTFT and end-to-end latency count from: when it was due on the
    schedule clock (where something scheduled it), else when it was sent."""
    if clock == SCHEDULE and request.due_s is not None:
        return request.due_s
    return request.sent_s


def endpoint_measurement(job: Job, loaded: Loaded, warm: list[StreamedRequest],
                         requests: RequestSet) -> Measurement:  # fmt: skip
    """What one load measured: e2e latency samples, token latencies, the SLO verdict,
    and the requests it sent, kept beside the run."""
    outcome, times = loaded.outcome, loaded.times
    dataset_file, dataset_digest = _write_dataset(
        requests, [loaded.offset + index for index in outcome.indices], job.outputs
    )
    record = replace(loaded.record, dataset_file=dataset_file, dataset_digest=dataset_digest,
                     salt=requests.salt)  # fmt: skip
    generation = None
    if times:
        isl = round(record.prompt_tokens_mean or job.params["isl"])
        osl = round(record.output_tokens_mean or job.params["osl"])
        generation = generation_record(Generation(), token_latencies(times), 1, isl,
                                       job.params["osl"])  # fmt: skip
        generation = endpoint_work(generation, job, isl, osl, record.server)
    return Measurement(
        loaded.reading,
        tuple(t.e2e_s for t in times),
        device=job.device,
        batch=1,
        samples_done=record.ok,
        details=Details(generation=generation, endpoint=record, loop_wall_s=outcome.duration_s),
        rate=record.requests_per_s,
        warmup_s=tuple(r.done_s - r.sent_s for r in warm if r.done_s is not None),
    )


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
    if record.token_ids is not None:
        return record.token_ids, TOKEN_IDS
    if record.output_tokens is not None:
        return record.output_tokens, USAGE
    if record.ran_to_length:
        assert record.max_tokens is not None
        return record.max_tokens, LENGTH
    counted = text.count(record.text)
    if counted is not None:
        return counted, TOKENIZER
    return len(record.chunk_times_s), CHUNKS


def _errors(sent: list[StreamedRequest]) -> tuple[dict[str, int], list[str]]:
    """The failed requests by kind, and the first few's words."""
    failed = [r for r in sent if not r.ok]
    # a server's words may echo what it was sent: the credentials are cut out
    first = [redacted(r.error or "") for r in failed[:FIRST_ERRORS]]
    return dict(Counter(r.error_kind or "client" for r in failed)), first


@dataclass(frozen=True)
class _Rates:
    """A load's rates over its duration (None where nothing was answered)."""

    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    output_tokens_mean: float | None = None
    prompt_tokens_mean: float | None = None

    @classmethod
    def of(cls, done: list[StreamedRequest], counted: list[int], duration_s: float) -> _Rates:
        if duration_s <= 0 or not done:
            return cls()
        prompts = [r.prompt_tokens for r in done if r.prompt_tokens is not None]
        return cls(
            requests_per_s=len(done) / duration_s,
            output_tokens_per_s=sum(counted) / duration_s,
            output_tokens_mean=sum(counted) / len(done),
            prompt_tokens_mean=sum(prompts) / len(prompts) if prompts else None,
        )


def judge_slos(record: EndpointLoad, bounds: SloBounds, times: list[TokenTimes],
               duration_s: float) -> EndpointLoad:  # fmt: skip
    """The record with goodput (the answered requests within both bounds, per second)
    and the verdict: each bound kept at the percentile, no request failed, no
    saturation."""
    if bounds.ttft_ms is None and bounds.tpot_ms is None:
        return record
    level = bounds.slo_percentile or DEFAULT_SLO_PERCENTILE
    good = sum(_within(t, bounds) for t in times)
    ttft_ms, tpot_ms = slo_percentiles(times, level)
    kept = all(
        bound is None or (value is not None and value <= bound)
        for bound, value in ((bounds.ttft_ms, ttft_ms), (bounds.tpot_ms, tpot_ms))
    )
    failed = record.requests - record.ok
    return replace(
        record,
        slo_percentile=level,
        ttft_bound_ms=bounds.ttft_ms,
        tpot_bound_ms=bounds.tpot_ms,
        slo_met_share=good / record.requests if record.requests else 0.0,
        goodput_per_s=good / duration_s if duration_s > 0 else 0.0,
        slo_holds=bool(times) and kept and not failed and record.saturated is None,
    )


def slo_percentiles(times: list[TokenTimes], level: float) -> tuple[float | None, float | None]:
    """TTFT and TPOT at the SLO's percentile, in ms (None where none was measured)."""
    ttft = sorted(t.ttft_s * 1000.0 for t in times)
    tpot = sorted(t.tpot_s * 1000.0 for t in times if t.tpot_s is not None)
    return (percentile(ttft, level) if ttft else None,
            percentile(tpot, level) if tpot else None)  # fmt: skip


def _within(times: TokenTimes, bounds: SloBounds) -> bool:
    if bounds.ttft_ms is not None and times.ttft_s * 1000.0 > bounds.ttft_ms:
        return False
    tpot = times.tpot_s
    return bounds.tpot_ms is None or tpot is None or tpot * 1000.0 <= bounds.tpot_ms


def _write_dataset(
    requests: RequestSet, indices: list[int], outputs: CaseOutputs
) -> tuple[str, str]:
    """The conversations sent, one JSON line each, beside the run; and their digest."""
    lines = []
    for index in indices:
        conversation = requests.conversation(index)
        lines.append(json.dumps(asdict(conversation), separators=(",", ":")))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    folder = case_files_dir(outputs)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DATASET_FILE
    path.write_bytes(data)
    return str(path), hashlib.sha256(data).hexdigest()


def _unusable(record: EndpointLoad) -> str | None:
    """Why a load's numbers describe no steady load (it fails the case): no answered
    request, or a saturated server. A search's result is its reported try (one that
    held, where any did): it fails only where no load held at all."""
    if record.peak_axis is not None:
        if record.peak is None:
            return f"no load kept the SLOs: {record.peak_note}"
    elif record.saturated:
        return f"saturated: {record.saturated}"
    elif not record.ok:
        first = record.first_errors[0] if record.first_errors else "none was sent"
        return f"no request was answered ({record.requests} sent): {first}"
    return None
