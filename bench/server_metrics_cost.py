"""What does reading a server's /metrics cost the client, during the measured window?

measure.server_metrics keeps a /metrics reading's text every SAMPLE_INTERVAL_S while
the load runs, on the client's own event loop, and parses them all after the window.
This times, against a real server's /metrics (vLLM's, for one), the client's CPU
for one reading's HTTP exchange (time.process_time over back-to-back readings on one
event loop: the loop's whole cost, which the requests' chunks would wait behind),
its wall time (mostly the server's time to answer), and the CPU to parse one
reading (after the window, off every request's clock).

Run: python bench/server_metrics_cost.py --url http://127.0.0.1:8000 [--readings 200]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from dlbench.measure.exposition import parse_scrape
from dlbench.measure.server_metrics import METRICS_PATH, SAMPLE_INTERVAL_S, ServerWindow


async def readings(url: str, count: int) -> tuple[list[str], float, float]:
    """`count` readings of url's /metrics as the window takes them: their texts, and the
    client's CPU and wall seconds for them all."""
    async with httpx.AsyncClient() as client:
        window = ServerWindow(client, url, None)
        await window._scrape()  # a connection open, as in a run (the warm-up opened it)
        cpu, wall = time.process_time(), time.perf_counter()
        texts = [await window._scrape() for _ in range(count)]
        return texts, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server's root (its /metrics is read)")
    parser.add_argument("--readings", type=int, default=200)
    args = parser.parse_args()
    texts, cpu_s, wall_s = asyncio.run(readings(args.url, args.readings))
    started = time.process_time()
    for text in texts:
        parse_scrape(text)
    parse_s = time.process_time() - started
    per_reading = cpu_s / len(texts)
    print(f"{METRICS_PATH}: {len(texts[-1]):,} bytes a reading, {len(texts)} readings")
    print(f"client CPU a reading: {1e3 * per_reading:.3f} ms "
          f"({100 * per_reading / SAMPLE_INTERVAL_S:.2f}% of one core at one every "
          f"{SAMPLE_INTERVAL_S:g} s); wall {1e3 * wall_s / len(texts):.1f} ms")  # fmt: skip
    print(f"parsing a reading (after the window): {1e3 * parse_s / len(texts):.2f} ms CPU")


if __name__ == "__main__":
    main()
