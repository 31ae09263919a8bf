"""A load spread over client processes (--client-processes N), their samples merged.

One event loop stamps every chunk it reads; past the chunk rate one loop holds
(docs/guides/llm-serving.md), its stamps run late and its sends fall behind. With N
processes, each runs its own loop on its `Share` of the load (worker.endpoint_load):
every N-th conversation, its part of a closed loop's users, or its part of an open
loop's one seeded schedule. They start at one instant the parent gives them once all
are ready (time.perf_counter is the machine's monotonic clock, the same in every
process), and send back their raw records: every request's clock readings, each send
lag and the event loop's every lag, so the merged percentiles are those of all the
samples, exactly as one process would have computed them.

The children are spawned (no state copied from the worker), tied to the worker's life
(lifeline.die_with_parent), and in its process group, which the runner kills.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from typing import TypeVar

from dlbench.errors import CaseError
from dlbench.lifeline import die_with_parent
from dlbench.worker.endpoint_load import LoadOutcome, Share, StopSignal, merged

# Target(args, share, stop, connection): runs in a child, sends READY, receives the
# start instant, runs its share and sends its LoadOutcome (or a failure's words)
# What a child runs: target(args, its share, the stop signal, its pipe to the parent)
Args = TypeVar("Args")
Target = Callable[[Args, Share, StopSignal, Connection], None]
READY = "ready"
# From the last child's READY to the common start: the parent's message reaching them
START_MARGIN_S = 0.2
# A child that is not ready in this long is broken (importing httpx and dlbench: ~1 s)
READY_DEADLINE_S = 60.0


async def spread(target: Target[Args], args: Args, processes: int,
                 begin: Callable[[], Awaitable[None]]) -> LoadOutcome:  # fmt: skip
    """Run `target(args, ...)` in `processes` children, each on its share, and merge;
    `begin` opens the measured region once they are all ready (their start-up is no
    part of it)."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    pipes = [context.Pipe() for _ in range(processes)]
    children = [
        context.Process(target=child_main, args=(target, args, Share(i, processes), stop, theirs,
                                                 os.getpid()),
                        name=f"dlbench-client {i + 1}/{processes}", daemon=True)
        for i, (_, theirs) in enumerate(pipes)
    ]  # fmt: skip
    for child in children:
        child.start()
    try:
        for mine, _ in pipes:
            await _expect_ready(mine)
        await begin()
        start_at = time.perf_counter() + START_MARGIN_S
        for mine, _ in pipes:
            mine.send(start_at)
        outcomes = [await _outcome(mine) for mine, _ in pipes]
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
            child.join()
    return merged(outcomes)


def child_main(target: Target[Args], args: Args, share: Share, stop: StopSignal,
               connection: Connection, parent_pid: int) -> None:  # fmt: skip
    die_with_parent(parent_pid)
    try:
        target(args, share, stop, connection)
    except Exception as exc:  # the parent fails the case with the child's words
        connection.send(f"client process {share.index + 1}: {type(exc).__name__}: {exc}")


def wait_for_start(connection: Connection, share: Share) -> Share:
    """In a child: say it is ready, and take the start instant the parent sends."""
    connection.send(READY)
    start_at = connection.recv()
    return Share(share.index, share.of, float(start_at))


async def _expect_ready(connection: Connection) -> None:
    ready = await asyncio.to_thread(connection.poll, READY_DEADLINE_S)
    message = connection.recv() if ready else None
    if message != READY:
        late = f"a client process was not ready within {READY_DEADLINE_S:g} s"
        raise CaseError(str(message) if message else late)


async def _outcome(connection: Connection) -> LoadOutcome:
    try:
        found = await asyncio.to_thread(connection.recv)
    except EOFError:
        raise CaseError("a client process ended without its outcome") from None
    if not isinstance(found, LoadOutcome):
        raise CaseError(str(found))
    return found
