"""Load on an OpenAI-compatible server: when each conversation starts, and what came back.

The profiles are measure.load_profile's. A unit of load is a conversation: its
turns go out one after another (the next once the last answer has ended), so a
single-turn dataset sends one request per unit, as every peer client does.

Every request is a coroutine of one event loop in this process: nothing spins
while it waits, and the only work between chunks is parsing them. A closed loop
(synchronous, concurrency) keeps starting conversations until the budget's time
and count are both reached; an open loop (rate) schedules as many as the rate
gives over the budget's time. An open loop records how late each conversation
went out against its schedule, so a client that cannot keep up says so instead
of quietly lowering the rate, and stops sending once its queue only grows
(measure.saturation): the requests still in flight are cancelled and counted.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from dlbench.measure.load_profile import CONCURRENCY, SYNCHRONOUS, LoadProfile
from dlbench.measure.openai_stream import StreamedRequest
from dlbench.measure.saturation import queue_only_grows

Send = Callable[[int], Awaitable[list[StreamedRequest]]]  # conversation i: its turns
# The saturation test runs at every this many arrivals (it sorts what it has seen)
SATURATION_EVERY = 10


@dataclass(frozen=True)
class Budget:
    """How much load: conversations until `min_time_s` has passed and `min_count`
    were started (a closed loop), or the rate's worth of `min_time_s`, at least
    `min_count` (an open loop); never more than `max_count`."""

    min_time_s: float
    min_count: int
    max_count: int

    def open_loop_count(self, rate: float) -> int:
        wanted = max(self.min_count, math.ceil(rate * self.min_time_s))
        return min(wanted, self.max_count)


@dataclass
class LoadOutcome:
    """Every request's record (conversation by conversation, turns in order), and
    the run's own clock."""

    requests: list[StreamedRequest]
    started_s: float
    ended_s: float
    conversations: int  # started
    send_lag_s: list[float] = field(default_factory=list)  # RATE: how late each went out
    saturated: str | None = None  # why an open loop stopped sending early
    cancelled: int = 0  # conversations in flight when it stopped

    @property
    def duration_s(self) -> float:
        return self.ended_s - self.started_s


def arrival_offsets(rate: float, burstiness: float, count: int, seed: int) -> np.ndarray:
    """Seconds from the run's start at which each of `count` conversations is due."""
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)
    gaps[0] = 0.0  # the first request opens the run
    return np.cumsum(gaps)


async def drive(profile: LoadProfile, send: Send, budget: Budget, seed: int) -> LoadOutcome:
    """Start conversations (send(i) runs the i-th) under `profile` within `budget`."""
    if profile.kind in (SYNCHRONOUS, CONCURRENCY):
        users = 1 if profile.kind == SYNCHRONOUS else profile.concurrency
        return await _closed_loop(send, budget, users)
    assert profile.rate is not None  # LoadProfile checked it
    count = budget.open_loop_count(profile.rate)
    return await _open_loop(send, arrival_offsets(profile.rate, profile.burstiness, count, seed))


async def _closed_loop(send: Send, budget: Budget, users: int) -> LoadOutcome:
    started = time.perf_counter()
    done: dict[int, list[StreamedRequest]] = {}
    next_index = 0

    def take() -> int | None:
        nonlocal next_index
        enough = next_index >= budget.min_count and (
            time.perf_counter() - started >= budget.min_time_s
        )
        if enough or next_index >= budget.max_count:
            return None
        next_index += 1
        return next_index - 1

    async def user() -> None:
        while (index := take()) is not None:
            done[index] = await send(index)

    await asyncio.gather(*(user() for _ in range(users)))
    ended = time.perf_counter()
    requests = [turn for index in sorted(done) for turn in done[index]]
    return LoadOutcome(requests, started, ended, conversations=len(done))


async def _open_loop(send: Send, offsets: np.ndarray) -> LoadOutcome:
    started = time.perf_counter()
    tasks: list[asyncio.Task[list[StreamedRequest]]] = []
    arrival_s: list[float] = []
    in_flight: list[int] = []
    finished = 0

    def count_finished(_: asyncio.Task[list[StreamedRequest]]) -> None:
        nonlocal finished
        finished += 1

    saturated = None
    for index, offset in enumerate(offsets):
        delay = started + float(offset) - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(send(index))
        task.add_done_callback(count_finished)
        tasks.append(task)
        arrival_s.append(time.perf_counter() - started)
        in_flight.append(len(tasks) - finished)
        if len(tasks) % SATURATION_EVERY == 0:
            saturated = queue_only_grows(arrival_s, in_flight)
            if saturated:
                break
    cancelled = 0
    if saturated:
        for task in tasks:
            cancelled += task.cancel()  # True where it had not finished
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    ended = time.perf_counter()
    for outcome in outcomes:  # the client keeps every request's own error: this is a bug
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    kept = [(offset, turns) for offset, turns in zip(offsets, outcomes, strict=False)
            if isinstance(turns, list)]  # fmt: skip
    requests = [turn for _, turns in kept for turn in turns]
    # late as the conversation really went out: a task starts only when the loop runs it
    lags = [turns[0].sent_s - started - float(o) for o, turns in kept if turns]
    # every conversation started counts, those cancelled too (they have no record)
    return LoadOutcome(requests, started, ended, len(tasks), lags, saturated, cancelled)
