"""What does dlbench's streaming client cost per token, and could it be the bottleneck?

A server in another process streams OpenAI completion chunks as fast as it can
write them (no model, no waiting). The client (dlbench.measure.openai_stream, under
dlbench.worker.endpoint_load's concurrency profile) reads them; its CPU time per
chunk, and the chunks per second one client process takes in, say how much of a
real server's inter-token latency the client could hide: a server streaming a token
every 20 ms to 64 users sends 3,200 chunks/s.

Rounds interleave the concurrency levels, and each prints the client's CPU time per
chunk (time.process_time, its whole process) and its chunks/s.

Run: python bench/endpoint_client_cost.py [--rounds 3] [--tokens 256] [--requests 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import time

import httpx

from dlbench.measure.load_profile import CONCURRENCY, LoadProfile
from dlbench.measure.openai_api import COMPLETIONS, request_body
from dlbench.measure.openai_stream import StreamedRequest, stream_request
from dlbench.worker.endpoint_load import Budget, drive


def serve_instantly(port: int, tokens: int) -> None:
    """A bare asyncio HTTP/1.1 server: every POST gets `tokens` chunks, then [DONE]."""
    chunk = b"data: " + json.dumps({"choices": [{"text": "x", "index": 0}]}).encode() + b"\n\n"
    usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": tokens}}
    tail = b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break  # the client closed its connection
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))  # fmt: skip
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
            for part in [chunk] * tokens + [tail]:
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def measure(url: str, concurrency: int, requests: int, tokens: int) -> tuple[float, float]:
    async def go() -> tuple[float, float]:
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
        return cpu / chunks * 1e6, chunks / outcome.duration_s

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--requests", type=int, default=64)
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = multiprocessing.Process(target=serve_instantly, args=(port, args.tokens), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    levels = (1, 8, 64)
    best: dict[int, tuple[float, float]] = {}
    for _ in range(args.rounds):
        for concurrency in levels:  # interleaved: each round visits every level
            us, rate = measure(url, concurrency, args.requests, args.tokens)
            previous = best.get(concurrency, (float("inf"), 0.0))
            best[concurrency] = (min(previous[0], us), max(previous[1], rate))
    server.terminate()
    for concurrency in levels:
        us, rate = best[concurrency]
        print(f"concurrency {concurrency:3d}: client CPU {us:6.1f} us per chunk (best of "
              f"{args.rounds}), {rate:8.0f} chunks/s taken in by one client process")  # fmt: skip


if __name__ == "__main__":
    main()
