"""Load on an OpenAI-compatible server: when each request is sent, and what came back.

Three profiles, as the peer clients (vLLM's `bench serve`, GuideLLM, AIPerf) name them:
- synchronous: one request at a time, the next when the last has ended;
- concurrency N: N requests always in flight (a closed loop);
- rate R: requests sent at seeded random times, R per second on average, whatever
  the server does (an open loop). The gaps are gamma-distributed with shape
  `burstiness` and mean 1/R: a burstiness of 1 is a Poisson process, below 1
  burstier, above 1 more even (vLLM's definition).

Every request is a coroutine of one event loop in this process: nothing spins
while it waits, and the only work between chunks is parsing them. An open loop
records how late each request went out against its scheduled time, so a client
that cannot keep up says so instead of quietly lowering the rate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

from dlbench.measure.openai_stream import StreamedRequest

SYNCHRONOUS, CONCURRENCY, RATE = "synchronous", "concurrency", "rate"
PROFILES = (SYNCHRONOUS, CONCURRENCY, RATE)

Send = Callable[[int], Awaitable[StreamedRequest]]


@dataclass(frozen=True)
class LoadProfile:
    kind: str
    concurrency: int = 1
    rate: float | None = None  # requests per second (RATE)
    burstiness: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in PROFILES:
            raise ValueError(f"unknown load profile {self.kind!r}; allowed: {', '.join(PROFILES)}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency {self.concurrency}; allowed: 1 or more")
        if self.kind == RATE and (self.rate is None or self.rate <= 0):
            raise ValueError(f"rate {self.rate}; allowed: a number of requests/s above 0")
        if self.burstiness <= 0:
            raise ValueError(f"burstiness {self.burstiness:g}; allowed: above 0 (1: Poisson)")

    def describe(self) -> str:
        if self.kind == CONCURRENCY:
            return f"concurrency {self.concurrency}"
        if self.kind == RATE:
            return f"{self.rate:g} requests/s (burstiness {self.burstiness:g})"
        return SYNCHRONOUS


@dataclass
class LoadOutcome:
    """Each request's record, in request order, and the run's own clock."""

    requests: list[StreamedRequest]
    started_s: float
    ended_s: float
    send_lag_s: list[float]  # RATE: how late each request went out (s); else empty

    @property
    def duration_s(self) -> float:
        return self.ended_s - self.started_s


def arrival_offsets(rate: float, burstiness: float, count: int, seed: int) -> np.ndarray:
    """Seconds from the run's start at which each of `count` requests is due."""
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)
    gaps[0] = 0.0  # the first request opens the run
    return np.cumsum(gaps)


async def drive(profile: LoadProfile, send: Send, count: int, seed: int) -> LoadOutcome:
    """Send `count` requests (send(i) makes and sends the i-th) under `profile`."""
    started = time.perf_counter()
    lags: list[float] = []
    if profile.kind == SYNCHRONOUS:
        requests = [await send(index) for index in range(count)]
    elif profile.kind == CONCURRENCY:
        requests = await _closed_loop(send, count, profile.concurrency)
    else:
        assert profile.rate is not None  # LoadProfile checked it
        offsets = arrival_offsets(profile.rate, profile.burstiness, count, seed)
        requests, lags = await _open_loop(send, offsets)
    return LoadOutcome(requests, started, time.perf_counter(), lags)


async def _closed_loop(send: Send, count: int, concurrency: int) -> list[StreamedRequest]:
    results: list[StreamedRequest | None] = [None] * count
    next_index = iter(range(count))

    async def user() -> None:
        for index in next_index:  # shared: each index is taken once
            results[index] = await send(index)

    await asyncio.gather(*(user() for _ in range(min(concurrency, count))))
    return cast("list[StreamedRequest]", results)  # every index was taken


async def _open_loop(send: Send, offsets: np.ndarray) -> tuple[list[StreamedRequest], list[float]]:
    loop_start = time.perf_counter()
    tasks = []
    for index, offset in enumerate(offsets):
        delay = loop_start + float(offset) - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(send(index)))
    requests = list(await asyncio.gather(*tasks))
    # late as the request really went out: a task starts only when the loop runs it
    lags = [r.sent_s - loop_start - float(o) for r, o in zip(requests, offsets, strict=True)]
    return requests, lags
