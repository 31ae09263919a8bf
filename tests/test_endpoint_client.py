"""The OpenAI-compatible client and its load profiles, against a real server on the
loopback address: llama-cpp-python's own server, serving llm-tiny's GGUF file."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import numpy as np
import pytest
from conftest import free_port
from factories import make_case

from dlbench.measure.load_profile import CONCURRENCY, RATE, SEND, SYNCHRONOUS, LoadProfile
from dlbench.measure.openai_api import CHAT, COMPLETIONS, PATHS, request_body
from dlbench.measure.openai_stream import CONNECTION, HTTP, STREAM, stream_request
from dlbench.measure.token_latency import TokenTimes
from dlbench.worker.endpoint_load import Budget, arrival_offsets, drive
from dlbench.worker.endpoint_run import endpoint_target, judged
from dlbench.workloads.requests import WordText

OSL = 8


def send_one(url: str, api: str, prompt: str = "abc def ghi", osl: int = OSL):
    async def go():
        async with httpx.AsyncClient(timeout=30) as client:
            return await stream_request(client, url, api, request_body(api, "llm-tiny", prompt,
                                                                       osl))  # fmt: skip

    return asyncio.run(go())


@pytest.mark.parametrize("api", [COMPLETIONS, CHAT])
@pytest.mark.integration
def test_a_streamed_request_is_timed_chunk_by_chunk(llama_server, api):
    record = send_one(llama_server, api)
    assert record.ok, record.error
    # nothing lost: the same greedy request unstreamed gives the same text, OSL tokens long
    # (this server streams no usage, and holds a token back until its bytes make UTF-8,
    # so a chunk may carry two)
    whole = httpx.post(llama_server + PATHS[api],
                       json={**request_body(api, "llm-tiny", "abc def ghi", OSL), "stream": False},
                       timeout=30).json()  # fmt: skip
    choice = whole["choices"][0]
    assert record.text == (choice["message"]["content"] if api == CHAT else choice["text"])
    assert whole["usage"]["completion_tokens"] == OSL
    assert 2 <= len(record.chunk_times_s) <= OSL and record.output_tokens in (None, OSL)
    assert record.sent_s < record.chunk_times_s[0]
    assert record.chunk_times_s == sorted(record.chunk_times_s)
    assert record.chunk_times_s[-1] <= record.done_s
    times = TokenTimes(record.sent_s, record.chunk_times_s, output_tokens=OSL)
    assert 0 < times.ttft_s <= times.e2e_s
    assert times.tpot_s == pytest.approx(times.decode_s / (OSL - 1))


@pytest.mark.integration
def test_a_refused_connection_an_http_error_and_a_stream_cut_short_are_kept_as_errors(llama_server):
    refused = send_one(f"http://127.0.0.1:{free_port()}", COMPLETIONS)
    assert not refused.ok and refused.error.startswith("connection:")
    assert refused.error_kind == CONNECTION
    assert refused.done_s >= refused.sent_s and refused.chunk_times_s == []
    # a body the server rejects (max_tokens below 0): its status and its words are kept
    # (this server answers its validation errors with 500)
    invalid = send_one(llama_server, COMPLETIONS, osl=-1)
    assert not invalid.ok and invalid.error.startswith("HTTP 500: "), invalid.error
    assert invalid.error_kind == HTTP
    assert "max_tokens" in invalid.error
    # a prompt beyond the server's 256-token context: this server has already answered
    # 200 and started the stream when it fails, and ends it with no [DONE]
    too_long = send_one(llama_server, COMPLETIONS, prompt="word " * 400)
    assert too_long.error == "the stream ended without [DONE]" and too_long.text == ""
    assert too_long.error_kind == STREAM


def test_a_server_that_does_not_stream_is_an_error_not_a_zero_latency(json_only_server):
    record = send_one(json_only_server, COMPLETIONS)
    assert not record.ok and "not a stream" in record.error and record.error_kind == STREAM


def run_profile(url: str, profile: LoadProfile, count: int):
    async def go():
        async with httpx.AsyncClient(timeout=60) as client:

            async def send(index: int):
                body = request_body(COMPLETIONS, "llm-tiny", f"request {index} abc", OSL)
                return [await stream_request(client, url, COMPLETIONS, body)]

            # a closed loop starts `count` (min_time 0); an open loop the rate's worth of
            # no time, at least `count`
            return await drive(profile, send, Budget(0.0, count, count), seed=0)

    return asyncio.run(go())


def most_in_flight(requests) -> int:
    events = sorted([(r.sent_s, 1) for r in requests] + [(r.done_s, -1) for r in requests])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def test_profiles_keep_the_number_in_flight_they_promise(llama_server):
    synchronous = run_profile(llama_server, LoadProfile(SYNCHRONOUS), 3)
    assert all(r.ok for r in synchronous.requests) and most_in_flight(synchronous.requests) == 1
    closed = run_profile(llama_server, LoadProfile(CONCURRENCY, concurrency=2), 6)
    assert all(r.ok for r in closed.requests) and len(closed.requests) == 6
    assert most_in_flight(closed.requests) == 2
    opened = run_profile(llama_server, LoadProfile(RATE, rate=20.0), 6)
    assert all(r.ok for r in opened.requests) and len(opened.send_lag_s) == 6
    # never sent before its time (asyncio may wake within its clock's resolution), and late
    # by no more than a busy machine's scheduling
    assert min(opened.send_lag_s) > -1e-3 and max(opened.send_lag_s) < 0.25


def test_an_open_loop_counts_from_the_schedule_what_a_late_client_hides_from_the_send(
    llama_server,
):
    """A client whose loop its own work blocks (0.3 s, in the first request's coroutine)
    sends the requests due meanwhile late. Each request keeps when it was due (the run's
    start plus its seeded offset); from the schedule, TTFT and end-to-end latency hold
    the lateness the send clock hides, by exactly the send lag; and the loop's watch saw
    its timer fire that late."""
    profile, count = LoadProfile(RATE, rate=20.0), 6

    async def go():
        async with httpx.AsyncClient(timeout=60) as client:

            async def send(index: int):
                if index == 0:
                    time.sleep(0.3)  # the client's own work, on its event loop
                body = request_body(COMPLETIONS, "llm-tiny", f"request {index} abc", OSL)
                return [await stream_request(client, llama_server, COMPLETIONS, body)]

            return await drive(profile, send, Budget(0.0, count, count), seed=0)

    outcome = asyncio.run(go())
    offsets = arrival_offsets(20.0, 1.0, count, seed=0)
    assert [r.due_s for r in outcome.requests] == pytest.approx(
        [outcome.started_s + float(o) for o in offsets])  # fmt: skip
    lags = [r.sent_s - r.due_s for r in outcome.requests]
    assert lags == pytest.approx(outcome.send_lag_s) and lags[0] >= 0.29
    assert sum(lag > 0.1 for lag in lags) >= 2  # those due during the block went late too
    case = make_case(framework="endpoint", workload="llm-requests", device="remote",
                     endpoint=llama_server, served_model="llm-tiny", request_rate=20.0)  # fmt: skip
    by_schedule, by_send = endpoint_target(case), endpoint_target(case.replaced(latency_clock=SEND))
    scheduled, due_times = judged(by_schedule, outcome, profile, WordText())
    sent, send_times = judged(by_send, outcome, profile, WordText())
    assert (scheduled.timed_from, sent.timed_from) == ("schedule", "send")
    for from_due, from_send, lag in zip(due_times, send_times, lags, strict=True):
        assert from_due.ttft_s - from_send.ttft_s == pytest.approx(lag)
        assert from_due.e2e_s - from_send.e2e_s == pytest.approx(lag)
    assert scheduled.client.loop_lag_max_ms >= 250 and scheduled.client.lag_samples > 0


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ({"kind": "poisson"}, "allowed: synchronous, concurrency, rate"),
        ({"kind": CONCURRENCY, "concurrency": 0}, "allowed: 1 or more"),
        ({"kind": RATE}, "allowed: a number of requests/s above 0"),
        ({"kind": RATE, "rate": 2.0, "burstiness": 0.0}, "allowed: above 0 (1: Poisson)"),
    ],
)
def test_a_profile_that_cannot_run_is_refused_saying_what_is_allowed(profile, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        LoadProfile(**profile)


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 4.0])
def test_arrivals_have_the_rate_and_the_burstiness_asked_for(burstiness):
    offsets = arrival_offsets(50.0, burstiness, 20_000, seed=3)
    gaps = np.diff(offsets)
    assert offsets[0] == 0.0 and np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(1 / 50.0, rel=0.03)
    # a gamma gap of shape k has a coefficient of variation of 1/sqrt(k)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burstiness), rel=0.05)
    np.testing.assert_array_equal(offsets, arrival_offsets(50.0, burstiness, 20_000, seed=3))
