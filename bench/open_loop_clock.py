"""An overloaded client, held to a server whose latency is known: what each clock says.

A stand-in server (this bench's own, in another process) answers every request after
exactly --ttft-ms, then streams --tokens tokens --token-ms apart, however many are
in flight (asyncio sleeps: nothing queues, and its own loop is idle), so each
request's true TTFT and end-to-end latency are known. dlbench's open loop
(worker.endpoint_load's driver, dlbench's streaming client) sends Poisson arrivals
at --rate, twice, interleaved over --rounds:

- a client that keeps up;
- a deliberately overloaded one: its event loop also runs its own work (a coroutine
  spinning --hog-ms of every --hog-every-ms, as a client tokenizing prompts or
  parsing does), so it sends late and reads chunks late.

Each load's records are read with both clocks (worker.endpoint_run.judged): from each
request's scheduled arrival (the default) and from its send (--latency-clock send).
Printed: TTFT and end-to-end p50 and p99 on each clock against the true figures, the
send lag's p99, the client's health, and whether dlbench calls the load client-bound.

Run: python bench/open_loop_clock.py [--rounds 2] [--rate 20] [--count 200]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx
from endpoint_client_cost import start_server

from dlbench.measure.client_health import client_bound
from dlbench.measure.load_profile import RATE, SEND, LoadProfile
from dlbench.measure.openai_api import COMPLETIONS, request_body
from dlbench.measure.openai_stream import StreamedRequest, stream_request
from dlbench.measure.stats import percentile
from dlbench.spec.case import Case
from dlbench.worker.endpoint_load import Budget, LoadOutcome, drive
from dlbench.worker.endpoint_run import endpoint_target, judged
from dlbench.workloads.requests import WordText


async def hog(spin_s: float, every_s: float) -> None:
    """The client's own work on its event loop: spinning `spin_s` of every `every_s`."""
    while True:
        end = time.perf_counter() + spin_s
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(every_s - spin_s)


def load(url: str, args: argparse.Namespace, overloaded: bool, seed: int) -> LoadOutcome:
    profile = LoadProfile(RATE, rate=args.rate)

    async def go() -> LoadOutcome:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:

            async def send(index: int) -> list[StreamedRequest]:
                body = request_body(COMPLETIONS, "known", f"request {index}", args.tokens)
                return [await stream_request(client, url, COMPLETIONS, body)]

            await send(-1)  # a connection open, as dlbench's warm-up leaves one
            work = asyncio.create_task(hog(args.hog_ms / 1e3, args.hog_every_ms / 1e3)) \
                if overloaded else None  # fmt: skip
            try:
                return await drive(profile, send, Budget(0.0, args.count, args.count), seed)
            finally:
                if work is not None:
                    work.cancel()

    return asyncio.run(go())


def p(values: list[float], q: float) -> float:
    return percentile(sorted(values), q) * 1000.0


def report(label: str, outcome: LoadOutcome, args: argparse.Namespace, url: str) -> str:
    case = Case.of(workload="llm-requests", framework="endpoint", compile="default",
                   device="remote", endpoint=url, served_model="known",
                   request_rate=args.rate)  # fmt: skip
    profile = LoadProfile(RATE, rate=args.rate)
    by_send = endpoint_target(case.replaced(latency_clock=SEND))
    record, scheduled = judged(endpoint_target(case), outcome, profile, WordText())
    _, sent = judged(by_send, outcome, profile, WordText())
    true_ttft = args.ttft_ms
    true_e2e = args.ttft_ms + (args.tokens - 1) * args.token_ms
    gaps = sorted(g for t in sent for g in t.gaps_s())
    bound = client_bound(record.client, p(gaps, 50), p(gaps, 99))
    lines = [f"{label}: {len(scheduled)} answered, send lag p99 {record.send_lag_p99_ms:.1f} ms; "
             f"client lag p50 {record.client.loop_lag_p50_ms:.1f} / p99 "
             f"{record.client.loop_lag_p99_ms:.1f} ms, CPU {record.client.cpu_share:.0%}: "
             f"{'client-bound (' + bound + ')' if bound else 'keeps up'}"]  # fmt: skip
    for name, times in (("schedule clock", scheduled), ("send clock    ", sent)):
        ttft = [t.ttft_s for t in times]
        e2e = [t.e2e_s for t in times]
        lines.append(
            f"  {name}: TTFT p50 {p(ttft, 50):6.1f} p99 {p(ttft, 99):6.1f} ms "
            f"(x{p(ttft, 50) / true_ttft:.2f}, x{p(ttft, 99) / true_ttft:.2f} of the true "
            f"{true_ttft:g}); end-to-end p50 {p(e2e, 50):6.1f} p99 {p(e2e, 99):6.1f} ms "
            f"(x{p(e2e, 50) / true_e2e:.2f}, x{p(e2e, 99) / true_e2e:.2f} of the true {true_e2e:g})"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--token-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--hog-ms", type=float, default=150.0)
    parser.add_argument("--hog-every-ms", type=float, default=200.0)
    args = parser.parse_args()
    url, server = start_server(args.tokens, args.token_ms / 1e3, args.ttft_ms / 1e3)
    print(f"the stand-in server: TTFT {args.ttft_ms:g} ms, then {args.tokens} tokens "
          f"{args.token_ms:g} ms apart; {args.count} Poisson arrivals at {args.rate:g}/s; the "
          f"overloaded client spins {args.hog_ms:g} ms of every {args.hog_every_ms:g}")  # fmt: skip
    for round_index in range(args.rounds):
        order = (False, True) if round_index % 2 == 0 else (True, False)
        for overloaded in order:
            outcome = load(url, args, overloaded, seed=round_index)
            label = "overloaded client" if overloaded else "client that keeps up"
            print(f"round {round_index + 1}, {report(label, outcome, args, url)}", flush=True)
    server.terminate()


if __name__ == "__main__":
    main()
