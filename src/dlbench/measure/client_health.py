"""Did the endpoint client keep up? Its own figures over each load, and the bound.

The client is one asyncio event loop per process: every chunk of every request is
read, parsed and stamped by it, one callback after another. A loop that falls
behind stamps chunks late (inflating TTFT and inter-token gaps by its own delay)
and sends an open loop's requests late. So every load records, per client process:

- the event loop's lag: a timer due every LAG_INTERVAL_S, and how late it fires
  (what any chunk's stamp waited for at that moment);
- its CPU time over the load's window, as a share of one core (one loop uses at
  most one);
- the chunks it took in.

Processes' raw lags are pooled before their percentiles are taken, so N processes
merge exactly. `client_bound` holds them to the bounds below, calibrated with
bench/endpoint_client_cost.py (docs/guides/llm-serving.md#the-client-checks-itself).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dlbench.measure.stats import percentile

if TYPE_CHECKING:  # asyncio (and ssl with it) is imported where a loop is watched:
    # every worker and command imports this module for its record, and with the endpoint
    # probe's import it cost a worker 65 ms of CPU and a command 110 (bench/startup_cost.py)
    import asyncio

LAG_INTERVAL_S = 0.01
# A loop at this share of a core has no time left to read what arrives: against a
# stand-in server streaming at once the client's loop ran at 71-100% of a core (its
# timer 2-23 ms late at p50), and against one pacing 16-256 users a token every 20 ms
# at 15-38% (bench/endpoint_client_cost.py, the 2-core AMD EPYC VM under other work).
CPU_BOUND = 0.9
# Lag the bare timer has anyway: epoll's timeout is whole milliseconds (Python rounds
# it up), so an idle loop's timer fires up to ~1.1 ms late (p50 0.5-1 ms in the bench's
# idle rounds). Beyond LAG_FLOOR_MS, a lag above LAG_SHARE of the gap between chunks
# at the same percentile moves a chunk's stamp by a quarter of what is measured there:
# paced at 20 ms to 16 users, the worst round's lag p99 was 10.3 ms and the gaps' p99
# read 28 ms; a client that keeps up held its p99 at 4-7 ms against 20 ms gaps
# (bench/open_loop_clock.py).
LAG_FLOOR_MS = 2.0
LAG_SHARE = 0.25


@dataclass(frozen=True)
class ClientSample:
    """One client process over one load: every lag its timer saw, its CPU time and
    wall time over the window, and the chunks its requests took in."""

    lags_s: tuple[float, ...]
    cpu_s: float
    wall_s: float
    chunks: int


@dataclass(frozen=True)
class ClientHealth:
    """How the client kept up over a load, its processes merged: the event loops' lag
    percentiles over every timer of every process, the busiest process's CPU as a
    share of one core, and the chunks all of them took in per second of the load."""

    processes: int = 1
    lag_samples: int = 0
    loop_lag_p50_ms: float | None = None
    loop_lag_p90_ms: float | None = None
    loop_lag_p99_ms: float | None = None
    loop_lag_max_ms: float | None = None
    cpu_share: float | None = None
    chunks_per_s: float | None = None


class LoopWatch:
    """Started on the running loop as a load starts, stopped as it ends."""

    def __init__(self) -> None:
        self._lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._cpu = self._wall = 0.0

    def start(self) -> None:
        import asyncio

        self._cpu, self._wall = time.process_time(), time.perf_counter()
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        import asyncio

        while True:
            due = time.perf_counter() + LAG_INTERVAL_S
            await asyncio.sleep(LAG_INTERVAL_S)
            self._lags.append(max(0.0, time.perf_counter() - due))

    def stop(self, chunks: int) -> ClientSample:
        if self._task is not None:
            self._task.cancel()
        cpu, wall = time.process_time() - self._cpu, time.perf_counter() - self._wall
        return ClientSample(tuple(self._lags), cpu, wall, chunks)


def health_of(samples: Sequence[ClientSample], duration_s: float) -> ClientHealth:
    """The processes' samples merged: their lags pooled, the busiest one's CPU share,
    their chunks over the load's duration."""
    lags = sorted(lag * 1000.0 for sample in samples for lag in sample.lags_s)
    shares = [s.cpu_s / s.wall_s for s in samples if s.wall_s > 0]
    chunks = sum(s.chunks for s in samples)
    return ClientHealth(
        processes=len(samples),
        lag_samples=len(lags),
        loop_lag_p50_ms=percentile(lags, 50) if lags else None,
        loop_lag_p90_ms=percentile(lags, 90) if lags else None,
        loop_lag_p99_ms=percentile(lags, 99) if lags else None,
        loop_lag_max_ms=lags[-1] if lags else None,
        cpu_share=max(shares) if shares else None,
        chunks_per_s=chunks / duration_s if duration_s > 0 else None,
    )


def client_bound(health: ClientHealth | None, itl_p50_ms: float | None,
                 itl_p99_ms: float | None = None) -> str | None:  # fmt: skip
    """Why the client could not keep up (None: it did, or nothing says otherwise): its
    busiest loop at CPU_BOUND of a core; or a lag beyond LAG_FLOOR_MS that is over
    LAG_SHARE of the inter-token gap it stamps, typically (p50 against p50) or in the
    tail (p99 against p99)."""
    if health is None:
        return None
    if health.cpu_share is not None and health.cpu_share >= CPU_BOUND:
        return f"client CPU {health.cpu_share:.0%} of a core (bound {CPU_BOUND:.0%})"
    for name, lag, gap in (("p50", health.loop_lag_p50_ms, itl_p50_ms),
                           ("p99", health.loop_lag_p99_ms, itl_p99_ms)):  # fmt: skip
        if lag is not None and gap is not None and lag > LAG_FLOOR_MS and lag > LAG_SHARE * gap:
            return (f"event-loop lag {name} {lag:.1f} ms, over {LAG_SHARE:.0%} of the "
                    f"inter-token gap's {name} ({gap:.1f} ms)")  # fmt: skip
    return None
