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
Each request of an open loop keeps when it was due (`due_s`): its first turn at
its scheduled arrival, a later turn when the turn before it ended.

Every load watches its own event loop (measure.client_health): its timer's lag,
its CPU and the chunks it took in. A load spread over client processes
(worker.client_processes) runs here in each of them, on its `Share`: every N-th
conversation from its own index, its part of the users, and an open loop's common
start; their outcomes merge exactly (`merged`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from dlbench.measure.client_health import ClientSample, LoopWatch
from dlbench.measure.load_profile import CONCURRENCY, SYNCHRONOUS, LoadProfile
from dlbench.measure.openai_stream import StreamedRequest
from dlbench.measure.saturation import queue_only_grows

# conversation i: its turns (a coroutine the event loop drives: it yields to the loop, is sent None)
Send = Callable[[int], Coroutine[object, None, list[StreamedRequest]]]
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


class StopSignal(Protocol):
    """What a client process checks before each send, and sets where its own queue only
    grows (multiprocessing's Event): one saturated share stops them all."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...


@dataclass(frozen=True)
class Share:
    """This process's part of a load spread over `of` client processes: conversations
    `index`, `index + of`, ...; its part of a closed loop's users and counts; and the
    instant (time.perf_counter, one clock for every process of the machine) an open
    loop's schedule starts at, that every process shares."""

    index: int = 0
    of: int = 1
    start_at: float | None = None

    def users(self, total: int) -> int:
        return total // self.of + (1 if self.index < total % self.of else 0)

    def conversation(self, nth: int) -> int:
        return self.index + self.of * nth

    def budget(self, budget: Budget, users: int, total: int) -> Budget:
        """A closed loop's counts in proportion to this process's users."""
        if self.of == 1:
            return budget
        return Budget(budget.min_time_s, math.ceil(budget.min_count * users / total),
                      budget.max_count // self.of)  # fmt: skip


@dataclass(frozen=True)
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
    indices: list[int] = field(default_factory=list)  # the conversations started
    client: list[ClientSample] = field(default_factory=list)  # each client process's

    @property
    def duration_s(self) -> float:
        return self.ended_s - self.started_s


def merged(outcomes: Sequence[LoadOutcome]) -> LoadOutcome:
    """The outcomes of a load's client processes as one: every request and lag, the
    earliest start and the latest end, the first saturation."""
    if len(outcomes) == 1:
        return outcomes[0]
    requests = sorted((r for o in outcomes for r in o.requests), key=lambda r: r.sent_s)
    return LoadOutcome(
        requests=requests,
        started_s=min(o.started_s for o in outcomes),
        ended_s=max(o.ended_s for o in outcomes),
        conversations=sum(o.conversations for o in outcomes),
        send_lag_s=[lag for o in outcomes for lag in o.send_lag_s],
        saturated=next((o.saturated for o in outcomes if o.saturated), None),
        cancelled=sum(o.cancelled for o in outcomes),
        indices=sorted(i for o in outcomes for i in o.indices),
        client=[sample for o in outcomes for sample in o.client],
    )


def arrival_offsets(rate: float, burstiness: float, count: int, seed: int) -> np.ndarray:
    """Seconds from the run's start at which each of `count` conversations is due."""
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)
    gaps[0] = 0.0  # the first request opens the run
    return np.cumsum(gaps)


async def drive(profile: LoadProfile, send: Send, budget: Budget, seed: int,
                share: Share = Share(), stop: StopSignal | None = None) -> LoadOutcome:  # fmt: skip
    """Start conversations (send(i) runs the i-th) under `profile` within `budget`: this
    process's `share` of them, watching its own event loop over the load."""
    if share.start_at is not None:  # the client processes' common start
        await asyncio.sleep(max(0.0, share.start_at - time.perf_counter()))
    if profile.kind in (SYNCHRONOUS, CONCURRENCY):
        users = 1 if profile.kind == SYNCHRONOUS else profile.concurrency
        mine = share.users(users)
        return await _watched(_closed_loop(send, share.budget(budget, mine, users), mine, share,
                                           stop))  # fmt: skip
    assert profile.rate is not None  # LoadProfile checked it
    count = budget.open_loop_count(profile.rate)
    offsets = arrival_offsets(profile.rate, profile.burstiness, count, seed)
    indices = list(range(share.index, count, share.of))
    return await _watched(_open_loop(send, offsets[indices], indices, share.start_at, stop))


async def _watched(load: Awaitable[LoadOutcome]) -> LoadOutcome:
    """The load, with its event loop's lag, CPU and chunks over it (client_health)."""
    watch = LoopWatch()
    watch.start()
    outcome = await load
    return replace(
        outcome, client=[watch.stop(sum(len(r.chunk_times_s) for r in outcome.requests))]
    )


async def _closed_loop(send: Send, budget: Budget, users: int, share: Share,
                       stop: StopSignal | None) -> LoadOutcome:  # fmt: skip
    started = time.perf_counter()
    done: dict[int, list[StreamedRequest]] = {}
    taken = 0

    def take() -> int | None:
        nonlocal taken
        enough = taken >= budget.min_count and (time.perf_counter() - started >= budget.min_time_s)
        if enough or taken >= budget.max_count or (stop is not None and stop.is_set()):
            return None
        taken += 1
        return share.conversation(taken - 1)

    async def user() -> None:
        while (index := take()) is not None:
            done[index] = await send(index)

    await asyncio.gather(*(user() for _ in range(users)))
    ended = time.perf_counter()
    requests = [turn for index in sorted(done) for turn in done[index]]
    return LoadOutcome(requests, started, ended, conversations=len(done), indices=sorted(done))


async def _open_loop(send: Send, offsets: np.ndarray, indices: list[int],
                     start_at: float | None, stop: StopSignal | None) -> LoadOutcome:  # fmt: skip
    started = time.perf_counter() if start_at is None else start_at
    tasks: list[asyncio.Task[list[StreamedRequest]]] = []
    arrival_s: list[float] = []
    in_flight: list[int] = []
    finished = 0

    def count_finished(_: asyncio.Task[list[StreamedRequest]]) -> None:
        nonlocal finished
        finished += 1

    saturated = None
    for index, offset in zip(indices, offsets, strict=True):
        delay = started + float(offset) - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if stop is not None and stop.is_set():
            break  # another client process found the queue only grows
        task = asyncio.create_task(send(index))
        task.add_done_callback(count_finished)
        tasks.append(task)
        arrival_s.append(time.perf_counter() - started)
        in_flight.append(len(tasks) - finished)
        if len(tasks) % SATURATION_EVERY == 0:
            saturated = queue_only_grows(arrival_s, in_flight)
            if saturated:
                if stop is not None:
                    stop.set()
                break
    cancelled = 0
    if saturated or (stop is not None and stop.is_set()):
        for task in tasks:
            cancelled += task.cancel()  # True where it had not finished
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    ended = time.perf_counter()
    for outcome in outcomes:  # the client keeps every request's own error: this is a bug
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    kept = [(offset, turns) for offset, turns in zip(offsets, outcomes, strict=False)
            if isinstance(turns, list)]  # fmt: skip
    for offset, turns in kept:
        _schedule(turns, started + float(offset))
    requests = [turn for _, turns in kept for turn in turns]
    # late as the conversation really went out: a task starts only when the loop runs it
    lags = [turns[0].sent_s - started - float(o) for o, turns in kept if turns]
    # every conversation started counts, those cancelled too (they have no record)
    return LoadOutcome(requests, started, ended, len(tasks), lags, saturated, cancelled,
                       indices=indices[: len(tasks)])  # fmt: skip


def _schedule(turns: list[StreamedRequest], due_s: float) -> None:
    """When each turn was due: the first at its arrival, each later one as the turn
    before it ended (the conversation sends it at once)."""
    for turn in turns:
        turn.due_s = due_s
        due_s = turn.done_s if turn.done_s is not None else turn.sent_s
