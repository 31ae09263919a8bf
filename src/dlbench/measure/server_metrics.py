"""A server's own counters over the measured window, read from its Prometheus /metrics.

`ServerWindow.open()` reads `/metrics` just before the load starts, `close()` just
after it ends; between them a task on the client's event loop reads it every
SAMPLE_INTERVAL_S for the gauges (KV-cache use, requests running and waiting). A
scrape during the load only fetches the text and keeps it: parsing waits for the
window's end, so the loop that times the requests' chunks spends on a scrape only
the HTTP exchange (measured in `scrape_ms`; docs/guides/llm-serving.md gives the
cost). Counters and histograms are the end's reading minus the start's
(measure.exposition).

Which server it is follows from the names it exposes, by FAMILIES: each family's
name for each figure, the first one present read (vLLM renamed some across
versions). A server without /metrics, one whose names none of FAMILIES uses, or a
scrape that fails leaves the record's `unread` saying why in one line: the case
is measured all the same.

A server counts a request when its engine has finished it, which can be a moment
after the client read its last chunk: at the end, the window waits (up to
SETTLE_S) until the server has counted as many requests as the client had
answered, and says so where it never did.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import httpx

from dlbench.measure.exposition import (
    CountersWentBack,
    NotExposition,
    Scrape,
    histogram_window,
    increase,
    parse_scrape,
    ratio_window,
)
from dlbench.measure.openai_stream import DEADLINE_PASSED
from dlbench.measure.server_counters import GaugeSamples, ServerCounters, ServerTiming
from dlbench.measure.token_latency import TokenTimes

METRICS_PATH = "/metrics"
# Gauges are read twice a second: fine enough for a peak of KV-cache use on loads of
# seconds to minutes, and each read costs the client's loop well under a millisecond
SAMPLE_INTERVAL_S = 0.5
# A scrape's whole answer, or it is a failed one (a server that streams without end)
SCRAPE_DEADLINE_S = 5.0
# The most text a /metrics answer may hold (vLLM's is about 100 kB)
MAX_SCRAPE_BYTES = 16 * 1024 * 1024
# How long the window's end waits for the server to count the requests answered
SETTLE_S = 2.0
SETTLE_POLL_S = 0.05


@dataclass(frozen=True)
class Family:
    """One server's names for the figures dlbench reads (sample names, as exposed).
    A latency is a histogram in seconds; a tuple lists the names versions used, the
    first present read."""

    name: str
    prefix: str  # every name of the family starts with it: how the server is told
    ttft: tuple[str, ...] = ()
    per_token: tuple[str, ...] = ()
    e2e: tuple[str, ...] = ()
    queue: tuple[str, ...] = ()
    # a per-token mean from a counter of seconds and a counter of tokens, where the
    # server keeps no histogram of it
    per_token_counters: tuple[str, str] | None = None
    prefix_cache_queries: tuple[str, ...] = ()  # prompt tokens looked up
    prefix_cache_hits: tuple[str, ...] = ()  # of those, served from the cache
    preemptions: tuple[str, ...] = ()
    kv_cache: tuple[str, ...] = ()  # a fraction of the cache, 0-1
    running: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()


# Each server's names, from its documentation (vLLM's read from a real server too).
FAMILIES = (
    Family(
        "vLLM",
        "vllm:",
        ttft=("vllm:time_to_first_token_seconds",),
        per_token=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        e2e=("vllm:e2e_request_latency_seconds",),
        queue=("vllm:request_queue_time_seconds",),
        prefix_cache_queries=(
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ),
        prefix_cache_hits=("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        preemptions=("vllm:num_preemptions_total",),
        kv_cache=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        running=("vllm:num_requests_running",),
        waiting=("vllm:num_requests_waiting",),
    ),
    Family(
        "SGLang",
        "sglang:",
        ttft=("sglang:time_to_first_token_seconds",),
        per_token=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        e2e=("sglang:e2e_request_latency_seconds",),
        queue=("sglang:queue_time_seconds",),
        prefix_cache_queries=("sglang:prompt_tokens_total",),
        prefix_cache_hits=("sglang:cached_tokens_total",),
        preemptions=("sglang:num_retracted_requests_total",),
        kv_cache=("sglang:token_usage",),
        running=("sglang:num_running_reqs",),
        waiting=("sglang:num_queue_reqs",),
    ),
    Family(
        "TGI",
        "tgi_",
        per_token=("tgi_request_mean_time_per_token_duration",),
        e2e=("tgi_request_duration",),
        queue=("tgi_request_queue_duration",),
        running=("tgi_batch_current_size",),
        waiting=("tgi_queue_size",),
    ),
    Family(
        "llama.cpp",
        "llamacpp:",
        per_token_counters=(
            "llamacpp:tokens_predicted_seconds_total",
            "llamacpp:tokens_predicted_total",
        ),
        kv_cache=("llamacpp:kv_cache_usage_ratio",),
        running=("llamacpp:requests_processing",),
        waiting=("llamacpp:requests_deferred",),
    ),
)
KNOWN = ", ".join(f"{f.name}'s {f.prefix}*" for f in FAMILIES)


class Unreadable(Exception):
    """Why the server's counters cannot be read (one line)."""


def family_of(scrape: Scrape) -> Family | None:
    """The first family of FAMILIES whose names the scrape holds."""
    names = scrape.names()
    return next((f for f in FAMILIES if any(n.startswith(f.prefix) for n in names)), None)


def present(scrape: Scrape, candidates: Sequence[str]) -> str | None:
    """The first of a figure's names that the scrape holds."""
    names = scrape.names()
    return next((name for name in candidates if name in names), None)


def window_figures(family: Family, start: Scrape, end: Scrape,
                   samples: Sequence[Scrape]) -> ServerCounters:  # fmt: skip
    """The family's figures for the window between two readings, its gauges from
    the readings taken during it; CountersWentBack where a counter fell."""

    def timing(names: tuple[str, ...]) -> ServerTiming | None:
        name = present(end, names)
        return histogram_window(start, end, name) if name else None

    def counter(names: tuple[str, ...]) -> float | None:
        name = present(end, names)
        return increase(start, end, name) if name else None

    per_token = timing(family.per_token)
    if per_token is None and family.per_token_counters is not None:
        per_token = ratio_window(start, end, *family.per_token_counters)
    return ServerCounters(
        family=family.name,
        ttft=timing(family.ttft),
        per_token=per_token,
        e2e=timing(family.e2e),
        queue=timing(family.queue),
        prefix_cache_queries=counter(family.prefix_cache_queries),
        prefix_cache_hits=counter(family.prefix_cache_hits),
        preemptions=counter(family.preemptions),
        kv_cache=gauge(samples, family.kv_cache, highest=True),
        running=gauge(samples, family.running),
        waiting=gauge(samples, family.waiting),
    )


def gauge(samples: Sequence[Scrape], names: tuple[str, ...],
          highest: bool = False) -> GaugeSamples | None:  # fmt: skip
    """A gauge's peak and mean over the samples that hold it: per reading, the sum over
    its series (requests of every engine), or for a fraction (`highest`) the fullest."""
    readings = []
    name = None
    for scrape in samples:
        name = name or present(scrape, names)
        value = None if name is None else (scrape.highest(name) if highest else scrape.total(name))
        if value is not None:
            readings.append(value)
    if name is None or not readings:
        return None
    return GaugeSamples(name, len(readings), max(readings), sum(readings) / len(readings))


def client_means(counters: ServerCounters, times: Sequence[TokenTimes]) -> ServerCounters:
    """`counters` with the client's means over the same answered requests: TTFT, the
    time per token after the first (every request's tokens weighted alike, as a
    server's per-token histogram counts them) and end-to-end, in ms; none beside no
    server figures."""
    if not times or counters.unread is not None:
        return counters
    decode = [(t.decode_s, (t.output_tokens or len(t.token_times_s)) - 1) for t in times]
    tokens_after_first = sum(steps for _, steps in decode if steps > 0)
    return replace(
        counters,
        client_ttft_mean_ms=1000.0 * sum(t.ttft_s for t in times) / len(times),
        client_per_token_mean_ms=(
            1000.0 * sum(s for s, steps in decode if steps > 0) / tokens_after_first
            if tokens_after_first
            else None
        ),
        client_e2e_mean_ms=1000.0 * sum(t.e2e_s for t in times) / len(times),
    )


class ServerWindow:
    """A server's /metrics over one load: open() before it, close() after it."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str | None,
                 interval_s: float = SAMPLE_INTERVAL_S,
                 deadline_s: float = SCRAPE_DEADLINE_S) -> None:  # fmt: skip
        self.client, self.model = client, model
        self.url = base_url.rstrip("/") + METRICS_PATH
        self.interval_s, self.deadline_s = interval_s, deadline_s
        self._unread: str | None = None
        self._family: Family | None = None
        self._start: Scrape | None = None
        self._start_s = 0.0
        self._texts: list[str] = []
        self._scrape_s: list[float] = []
        self._sampler: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Read the window's start (and which server this is); start sampling."""
        try:
            self._start_s = time.perf_counter()
            self._start = parse_scrape(await self._scrape(), self.model)
        except Unreadable as why:
            self._unread = str(why)
            return
        except NotExposition as why:
            self._unread = f"its {METRICS_PATH} is not Prometheus text ({why})"
            return
        self._family = family_of(self._start)
        if self._family is None:
            self._unread = f"its {METRICS_PATH} holds none of the names dlbench reads ({KNOWN})"
            return
        self._sampler = asyncio.get_running_loop().create_task(self._sample())

    async def close(self, answered: int) -> ServerCounters:
        """Read the window's end once the server has counted the `answered` requests
        (or SETTLE_S has passed), and the figures between the two readings."""
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        if self._unread is not None or self._family is None or self._start is None:
            return ServerCounters(unread=self._unread or "not read")
        try:
            end, note = await self._settled_end(self._family, self._start, answered)
            figures = window_figures(self._family, self._start, end, self._samples())
        except Unreadable as why:
            return ServerCounters(family=self._family.name, unread=str(why))
        except (NotExposition, CountersWentBack) as why:
            return ServerCounters(family=self._family.name, unread=f"at the window's end: {why}")
        return replace(
            figures,
            window_s=time.perf_counter() - self._start_s,
            sample_interval_s=self.interval_s,
            scrape_ms=1000.0 * statistics.fmean(self._scrape_s) if self._scrape_s else None,
            note=note,
        )

    def _samples(self) -> list[Scrape]:
        """The readings kept during the window, parsed; one that is not exposition text
        is left out (its gauges are missing one reading, never the window's figures)."""
        samples = []
        for text in self._texts:
            try:
                samples.append(parse_scrape(text, self.model))
            except NotExposition:
                continue
        return samples

    async def _settled_end(self, family: Family, start: Scrape,
                           answered: int) -> tuple[Scrape, str | None]:  # fmt: skip
        """The end's reading, taken again until the server's count of finished requests
        has grown by `answered`, or SETTLE_S has passed (then said in the note)."""
        names = family.e2e or family.ttft
        settle_by = time.perf_counter() + SETTLE_S
        while True:
            end = parse_scrape(await self._scrape(), self.model)
            name = present(end, names)
            if name is None:
                return end, None  # nothing counts requests: nothing to wait for
            counted = increase(start, end, name + "_count") or 0.0
            if counted >= answered:
                return end, None
            if time.perf_counter() >= settle_by:
                return end, (f"the server had counted {counted:g} of the {answered} requests "
                             f"answered when last read, {SETTLE_S:g} s after the load")  # fmt: skip
            await asyncio.sleep(SETTLE_POLL_S)

    async def _sample(self) -> None:
        """Keep a reading's text every interval; a failed one is left out."""
        while True:
            await asyncio.sleep(self.interval_s)
            began = time.perf_counter()
            try:
                self._texts.append(await self._scrape())
            except Unreadable:
                continue
            self._scrape_s.append(time.perf_counter() - began)

    async def _scrape(self) -> str:
        """/metrics' text within the deadline; Unreadable saying why not."""
        try:
            return await asyncio.wait_for(self._fetch(), self.deadline_s)
        except DEADLINE_PASSED:
            raise Unreadable(
                f"its {METRICS_PATH} did not answer whole within {self.deadline_s:g} s"
            ) from None
        except httpx.HTTPError as exc:
            why = f"its {METRICS_PATH} could not be read: {type(exc).__name__}"
            raise Unreadable(why) from None

    async def _fetch(self) -> str:
        async with self.client.stream("GET", self.url) as reply:
            if reply.status_code == 404:
                raise Unreadable(f"the server has no {METRICS_PATH} (HTTP 404)")
            if reply.status_code != 200:
                raise Unreadable(f"its {METRICS_PATH} answered HTTP {reply.status_code}")
            data = bytearray()
            async for chunk in reply.aiter_bytes():
                data += chunk
                if len(data) > MAX_SCRAPE_BYTES:
                    raise Unreadable(f"its {METRICS_PATH} is over {MAX_SCRAPE_BYTES} bytes")
        return data.decode("utf-8", "replace")
