"""The endpoint client's check of itself (measure.client_health) and a load's split over
client processes (worker.endpoint_load's Share, merged): rules, pure."""

from __future__ import annotations

import asyncio
import time

import pytest

from dlbench.cli.terminal import clock_words
from dlbench.measure.client_health import (
    CPU_BOUND,
    ClientHealth,
    ClientSample,
    LoopWatch,
    client_bound,
    health_of,
)
from dlbench.measure.load_profile import SCHEDULE, SEND
from dlbench.measure.openai_stream import StreamedRequest
from dlbench.measure.stats import percentile
from dlbench.results.details import EndpointLoad
from dlbench.spec.record_dict import from_dict
from dlbench.worker.endpoint_load import Budget, LoadOutcome, Share, merged


def test_a_blocked_loop_is_seen_late_by_its_timer_and_busy_in_its_cpu():
    async def busy_then_idle() -> ClientSample:
        watch = LoopWatch()
        watch.start()
        await asyncio.sleep(0.05)
        end = time.perf_counter() + 0.15
        while time.perf_counter() < end:  # the loop's own work: no timer fires meanwhile
            pass
        await asyncio.sleep(0.05)
        return watch.stop(chunks=7)

    sample = asyncio.run(busy_then_idle())
    assert max(sample.lags_s) >= 0.13 and sample.chunks == 7
    # its own CPU over the window (a busy machine may give the spin less than its 0.15 s)
    assert 0 < sample.cpu_s <= sample.wall_s * 1.05 and sample.wall_s >= 0.25


def test_processes_merge_exactly_their_lags_pooled_their_busiest_cpu_their_chunks_summed():
    a = ClientSample(lags_s=(0.001, 0.002, 0.010), cpu_s=0.5, wall_s=1.0, chunks=300)
    b = ClientSample(lags_s=(0.004, 0.040), cpu_s=0.2, wall_s=1.0, chunks=100)
    health = health_of([a, b], duration_s=2.0)
    pooled = sorted(ms * 1000 for ms in (*a.lags_s, *b.lags_s))
    assert health.processes == 2 and health.lag_samples == 5
    assert health.loop_lag_p99_ms == pytest.approx(percentile(pooled, 99))
    assert health.loop_lag_p50_ms == pytest.approx(4.0) and health.loop_lag_max_ms == 40.0
    assert health.cpu_share == 0.5 and health.chunks_per_s == 200.0


@pytest.mark.parametrize(
    ("health", "itl", "bound"),
    [
        (ClientHealth(cpu_share=CPU_BOUND), (20.0, 30.0), "client CPU 90% of a core"),
        (ClientHealth(cpu_share=0.5, loop_lag_p50_ms=6.0), (20.0, 30.0), "lag p50 6.0 ms"),
        (ClientHealth(cpu_share=0.5, loop_lag_p99_ms=40.0), (20.0, 100.0), "lag p99 40.0 ms"),
        # within a quarter of the gap at its percentile: keeps up
        (
            ClientHealth(cpu_share=0.5, loop_lag_p50_ms=4.0, loop_lag_p99_ms=20.0),
            (20.0, 99.0),
            None,
        ),
        # under the timer's own whole-millisecond lag: nothing to say, however short the gap
        (ClientHealth(cpu_share=0.5, loop_lag_p50_ms=1.5, loop_lag_p99_ms=1.9), (0.5, 1.0), None),
        (None, (1.0, 1.0), None),  # a run from before the client watched itself
    ],
)
def test_a_client_is_bound_at_its_cpu_or_a_lag_a_quarter_of_the_gap_it_stamps(health, itl, bound):
    found = client_bound(health, *itl)
    assert (found is None) if bound is None else (bound in found)


def test_a_share_is_every_nth_conversation_its_part_of_the_users_and_of_the_counts():
    shares = [Share(i, 3) for i in range(3)]
    assert [s.users(7) for s in shares] == [3, 2, 2]
    assert sorted(s.conversation(n) for s in shares for n in range(4)) == list(range(12))
    budget = Budget(min_time_s=5.0, min_count=10, max_count=1000)
    assert shares[0].budget(budget, 3, 7) == Budget(5.0, 5, 333)
    assert Share().budget(budget, 7, 7) is budget


def test_outcomes_merge_into_every_request_the_first_start_and_the_last_end():
    def outcome(start: float, end: float, indices: list[int], saturated: str | None = None):
        requests = [StreamedRequest(sent_s=start + i) for i in indices]
        return LoadOutcome(requests, start, end, len(indices), [0.001] * len(indices),
                           saturated, indices=indices)  # fmt: skip

    one = merged([outcome(10.0, 20.0, [0, 2, 4]), outcome(10.0, 21.0, [1, 3], "grew")])
    assert (one.started_s, one.ended_s, one.conversations) == (10.0, 21.0, 5)
    assert one.indices == [0, 1, 2, 3, 4] and len(one.send_lag_s) == 5
    assert [r.sent_s for r in one.requests] == sorted(r.sent_s for r in one.requests)
    assert one.saturated == "grew"


def test_a_run_from_before_the_clock_was_kept_reads_as_timed_from_the_send():
    """Older endpoint results have no timed_from and no client health: read as they
    were (from the send), and said so; a closed loop says it is one."""
    load = from_dict(EndpointLoad, {"url": "http://h:1", "send_lag_p99_ms": 3.0})
    assert load.timed_from is None and load.client is None
    assert clock_words(load.timed_from, open_loop=True) == "from the send"
    assert clock_words(SEND, open_loop=False) == "closed loop: from the send"
    assert clock_words(SCHEDULE, open_loop=True) == "from the schedule"
