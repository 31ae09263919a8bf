"""What does dlbench's streaming client cost per token, and could it be the bottleneck?

A server in another process streams OpenAI completion chunks as fast as it can
write them (no model, no waiting). The client (dlbench.measure.openai_stream, under
dlbench.worker.endpoint_load's concurrency profile) reads them; its CPU time per
chunk, and the chunks per second one client process takes in, say how much of a
real server's inter-token latency the client could hide: a server streaming a token
every 20 ms to 64 users sends 3,200 chunks/s.

Rounds interleave the concurrency levels, and each prints the client's CPU time per
chunk (time.process_time, its whole process) and its chunks/s.

It also calibrates the client's check of itself (dlbench.measure.client_health): each
level prints the health a run records (its event loop's lag p50 and p99, its CPU as a
share of a core) and whether `client_bound` calls it client-bound, for the instant
server (the client at its limit: it must) and for a paced one that sleeps
--token-ms between tokens to --paced-users users (16, 64 and 256: 800, 3,200 and
12,800 chunks/s at 20 ms), each sending three requests in turn, where the chunks
come one a read as a real server's do.

Run: python bench/endpoint_client_cost.py [--rounds 3] [--tokens 256] [--requests 64]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import socket
import time

import httpx

from dlbench.measure.client_health import ClientHealth, client_bound, health_of
from dlbench.measure.load_profile import CONCURRENCY, LoadProfile
from dlbench.measure.openai_api import COMPLETIONS, request_body
from dlbench.measure.openai_stream import StreamedRequest, stream_request
from dlbench.worker.endpoint_load import Budget, drive
from dlbench.worker.engine_server import free_port


def serve_streams(port: int, tokens: int, token_s: float = 0.0, ttft_s: float = 0.0) -> None:
    """A bare asyncio HTTP/1.1 server: every POST waits `ttft_s`, then gets `tokens`
    chunks `token_s` apart, then the usage and [DONE] with the stream's end, as a
    real server sends them (a client that reads [DONE] finds the response whole, and
    keeps its connection). Nothing queues: each request sleeps on its own."""
    chunk = b"data: " + json.dumps({"choices": [{"text": "x", "index": 0}]}).encode() + b"\n\n"
    usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": tokens}}
    tail = b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"

    def framed(part: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(part), part)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionResetError):
                break  # the client closed its connection
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))  # fmt: skip
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
            if ttft_s > 0:
                await asyncio.sleep(ttft_s)
            for index in range(tokens):
                if index and token_s > 0:
                    await asyncio.sleep(token_s)
                writer.write(framed(chunk))
                await writer.drain()
            writer.write(framed(tail) + b"0\r\n\r\n")
            await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


Measured = tuple[float, float, ClientHealth, float, float]


def measure(url: str, concurrency: int, requests: int, tokens: int) -> Measured:
    """CPU us a chunk, chunks/s, the client's health, and the inter-chunk gap's p50 and
    p99 (ms)."""

    async def go() -> Measured:
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:

            async def send(index: int) -> list[StreamedRequest]:
                body = request_body(COMPLETIONS, "instant", "hello", tokens)
                return [await stream_request(client, url, COMPLETIONS, body)]

            cpu = time.process_time()
            budget = Budget(0.0, requests, requests)  # exactly `requests`
            outcome = await drive(LoadProfile(CONCURRENCY, concurrency), send, budget, 0)
            cpu = time.process_time() - cpu
        chunks = sum(len(r.chunk_times_s) for r in outcome.requests)
        if not all(r.ok for r in outcome.requests) or chunks != requests * tokens:
            raise SystemExit(f"lost chunks or errors: {chunks} of {requests * tokens}")
        gaps = sorted(b - a for r in outcome.requests
                      for a, b in itertools.pairwise(r.chunk_times_s))  # fmt: skip
        health = health_of(outcome.client, outcome.duration_s)
        p50, p99 = (gaps[int(q * (len(gaps) - 1))] * 1e3 for q in (0.5, 0.99))
        return cpu / chunks * 1e6, chunks / outcome.duration_s, health, p50, p99

    return asyncio.run(go())


def start_server(tokens: int, token_s: float,
                 ttft_s: float = 0.0) -> tuple[str, multiprocessing.Process]:  # fmt: skip
    """serve_streams in a process of its own, once it accepts connections; its URL."""
    port = free_port()
    server = multiprocessing.Process(target=serve_streams, args=(port, tokens, token_s, ttft_s),
                                     daemon=True)  # fmt: skip
    server.start()
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def shown(label: str, found: Measured) -> str:
    us, rate, health, gap_ms, gap_p99_ms = found
    bound = client_bound(health, gap_ms, gap_p99_ms)
    lag = (health.loop_lag_p50_ms, health.loop_lag_p90_ms, health.loop_lag_p99_ms)
    return (f"{label}: client CPU {us:6.1f} us per chunk, {rate:8.0f} chunks/s; loop lag p50 "
            f"{_ms(lag[0])}, p90 {_ms(lag[1])}, p99 {_ms(lag[2])}; CPU "
            f"{_share(health.cpu_share)} of a core; "
            f"gap p50 {gap_ms:6.2f}, p99 {gap_p99_ms:6.2f} ms: "
            f"{'client-bound (' + bound + ')' if bound else 'keeps up'}")  # fmt: skip


def _share(value: float | None) -> str:
    return f"{value:4.0%}" if value is not None else "unmeasured"


def _ms(value: float | None) -> str:
    """A lag percentile, or why there is none (too few lag samples at a tiny load)."""
    return f"{value:6.2f} ms" if value is not None else "  none (too few samples)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--token-ms", type=float, default=20.0)
    parser.add_argument("--paced-users", type=int, nargs="*", default=[16, 64, 256])
    args = parser.parse_args()
    instant, server = start_server(args.tokens, 0.0)
    paced_tokens = 64
    paced, paced_server = start_server(paced_tokens, args.token_ms / 1000.0)
    levels = (1, 8, 64)
    paced_levels = tuple(args.paced_users)
    best: dict[int, Measured] = {}
    kept: dict[int, Measured] = {}
    for _ in range(args.rounds):
        for concurrency in levels:  # interleaved: each round visits every level
            found = measure(instant, concurrency, args.requests, args.tokens)
            previous = best.get(concurrency)
            if previous is None or found[0] < previous[0]:
                best[concurrency] = found
        for users in paced_levels:
            # each user sends 3 in turn: the first wave's ramp is a third of the load
            found = measure(paced, users, 3 * users, paced_tokens)
            previous = kept.get(users)
            # the worst lag of the rounds: a client that keeps up must in every one
            if previous is None or (found[2].loop_lag_p99_ms or 0) > (
                previous[2].loop_lag_p99_ms or 0
            ):
                kept[users] = found
    server.terminate()
    paced_server.terminate()
    for concurrency in levels:
        print(shown(f"instant, concurrency {concurrency:3d} (best of {args.rounds})",
                    best[concurrency]))  # fmt: skip
    for users in paced_levels:
        print(shown(f"{args.token_ms:g} ms a token, {users:3d} users (worst of {args.rounds})",
                    kept[users]))  # fmt: skip


if __name__ == "__main__":
    main()
