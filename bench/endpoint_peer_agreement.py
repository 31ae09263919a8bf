"""Does dlbench's endpoint client measure a server as a peer client does?

One local OpenAI-compatible server (llama-cpp-python's, serving the random-weight
llm-tiny, started as tests/conftest.py's `llama_server` starts it) is measured at the
same load by `dlbench run --endpoint` and by GuideLLM (`guidellm run`), in
interleaved rounds: each round measures every concurrency with both clients, the
client that goes first alternating from round to round, so drift in the machine's
load favours neither. Both send streamed /v1/completions of `isl` prompt tokens (cut
with the model's own tokenizer) asking for exactly `osl` output tokens, greedy, after
the same number of warm-up requests, for the same number of seconds.

Each round prints both clients' numbers and their ratio dlbench/GuideLLM, marked
where it is off by more than 5%; the end prints each ratio's median over the rounds.
The quantities are paired by definition, not by name:

- TTFT: dlbench's (request sent to the first chunk with text) against GuideLLM's
  time_to_first_token_ms (the same, from the request's header write);
- TPOT: dlbench's ((end-to-end - TTFT) / (tokens - 1), per request) against
  GuideLLM's inter_token_latency_ms, which is that same quantity (GuideLLM's
  time_per_output_token_ms counts the TTFT in, so it is not compared);
- ITL: dlbench's (every gap between chunks) against GuideLLM's per-request mean gap
  (it keeps no gaps): the same where each chunk carries one token and decode is steady;
- end-to-end latency, requests/s and output tokens/s over each client's window.

dlbench's record keeps TTFT, TPOT and ITL at p50, p90 and p99, no mean: the mean
rows show GuideLLM's alone, and end-to-end latency (whose mean dlbench keeps) stands
for the means.

What differs by design, and moves the ratios at llm-tiny's ~25 ms requests:
- dlbench's clock starts before httpx builds the request (~0.35 ms before the header
  write GuideLLM's starts at), and its end-to-end ends at the last text chunk where
  GuideLLM's ends after [DONE];
- a closed loop's user waits on its client between requests: GuideLLM's (a worker
  process per user, fed by a queue, reporting each request's start) takes a few ms,
  dlbench's one event loop one or two. At 1 user that is ~10% more requests/s for
  dlbench; at 2 users against a server that serves one request at a time, a request
  sent later waits less behind the other, so GuideLLM's TTFT is lower by as much;
- each note ends with the machine's load average: on a shared 2-core machine another
  job's load slows the server and delays a client's reads, round by round.

GuideLLM goes in a virtualenv of its own (it pulls in torch and transformers):
    python -m venv peer-venv && peer-venv/bin/pip install guidellm==0.8.1

Run: python bench/endpoint_peer_agreement.py --guidellm peer-venv/bin/guidellm
         [--rounds 3] [--seconds 30] [--concurrency 1 2] [--isl 64] [--osl 32]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from dlbench.backends.llama_cpp.gguf_export import CONVERTER, EXPORT, GGUF_FILE
from dlbench.reference.decoder import checkpoint_folder, converted
from dlbench.worker.engine_server import free_port

MODEL = "llm-tiny"
AGREEMENT = 0.05  # the target: within 5%
SERVER_START_S = 60.0
# Beyond the measured seconds: a client's start-up (GuideLLM imports torch and
# transformers, and spawns its workers) and its warm-up
CLIENT_OVERHEAD_S = 300.0


@dataclass(frozen=True)
class Load:
    """What both clients are asked for."""

    concurrency: int
    isl: int
    osl: int
    seconds: float
    warmup: int


@dataclass(frozen=True)
class Measured:
    """One client's numbers for one load (ms, or per second); None where it keeps none."""

    ttft_p50: float
    ttft_p90: float
    ttft_mean: float | None
    tpot_p50: float
    tpot_p90: float
    tpot_mean: float | None
    itl_p50: float
    itl_mean: float | None
    e2e_p50: float
    e2e_mean: float
    requests_per_s: float
    output_tokens_per_s: float
    note: str  # requests answered, errors, short answers: what the rates are of


# (label, attribute): the rows of every table, in order
ROWS = (
    ("TTFT p50 ms", "ttft_p50"),
    ("TTFT p90 ms", "ttft_p90"),
    ("TTFT mean ms", "ttft_mean"),
    ("TPOT p50 ms", "tpot_p50"),
    ("TPOT p90 ms", "tpot_p90"),
    ("TPOT mean ms", "tpot_mean"),
    ("ITL p50 ms", "itl_p50"),
    ("ITL mean ms", "itl_mean"),
    ("e2e p50 ms", "e2e_p50"),
    ("e2e mean ms", "e2e_mean"),
    ("requests/s", "requests_per_s"),
    ("output tok/s", "output_tokens_per_s"),
)

Client = Callable[[str, Load, Path], Measured]  # (url, load, its folder) -> its numbers
Pairs = dict[int, list[tuple[Measured, Measured]]]  # users -> (dlbench, guidellm) a round


@contextmanager
def llama_server(work: Path) -> Iterator[str]:
    """llama-cpp-python's server on a free loopback port serving llm-tiny's GGUF, as
    the tests start it: one request at a time (interrupt_requests off: by default a
    new request cuts the one streaming), one thread."""
    folder, _ = converted("llama-cpp", MODEL, 0, EXPORT, CONVERTER)
    port = free_port()
    log_path = work / "server.log"  # a file: a pipe could fill and stall the server
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(folder / GGUF_FILE),
             "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port),
             "--n_ctx", "512", "--n_threads", "1", "--n_threads_batch", "1",
             "--interrupt_requests", "False"],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(server, url, log_path)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def wait_until_serving(server: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"llama_cpp.server did not answer within {SERVER_START_S:.0f} s")


def run_logged(command: list[str], log: Path, timeout_s: float, **options: Any) -> None:
    """Run a client to its end, its output in `log`; a failure ends the bench, naming it."""
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout_s, check=False, **options)  # fmt: skip
    if done.returncode != 0:
        tail = log.read_text()[-3000:]
        named = " ".join([Path(command[0]).name, *command[1:4]])
        raise SystemExit(f"{named} ... exited {done.returncode}:\n{tail}")


def measure_dlbench(url: str, load: Load, work: Path) -> Measured:
    """`dlbench run --endpoint` as a user runs it; its numbers from its --json file."""
    out = work / "dlbench.json"
    command = [
        sys.executable, "-m", "dlbench", "run", "--endpoint", url, "--served-model", MODEL,
        "--concurrency", str(load.concurrency), "--param", f"isl={load.isl}",
        "--param", f"osl={load.osl}", "--tokenizer", str(checkpoint_folder(MODEL, 0)),
        "--min-time", str(load.seconds), "--min-iters", "1", "--warmup", str(load.warmup),
        "--json", str(out), "--quiet",
    ]  # fmt: skip
    # a store of the bench's own: these runs are not the user's
    env = {**os.environ, "DLBENCH_DB": str(work / "dlbench.sqlite")}
    run_logged(command, work / "dlbench.log", load.seconds + CLIENT_OVERHEAD_S, env=env)
    result = json.loads(out.read_text())["results"][0]
    if result["status"] != "ok":
        raise SystemExit(f"dlbench's result failed: {result['error']}")
    return dlbench_numbers(result)


def dlbench_numbers(result: dict[str, Any]) -> Measured:
    generation, endpoint = result["details"]["generation"], result["details"]["endpoint"]
    # the record leaves out what is empty or zero
    errors = endpoint.get("errors") or "none"
    note = (f"{endpoint['ok']} answered, errors {errors}, {endpoint.get('short_answers', 0)} "
            f"short, tokens by {endpoint['tokens_counted_by']}")  # fmt: skip
    return Measured(
        ttft_p50=generation["ttft_p50_ms"],
        ttft_p90=generation["ttft_p90_ms"],
        ttft_mean=None,
        tpot_p50=generation["tpot_p50_ms"],
        tpot_p90=generation["tpot_p90_ms"],
        tpot_mean=None,
        itl_p50=generation["itl_p50_ms"],
        itl_mean=None,
        e2e_p50=generation["e2e_p50_ms"],
        e2e_mean=result["latency_ms"]["mean"],  # the result's samples are its e2e latencies
        requests_per_s=endpoint["requests_per_s"],
        output_tokens_per_s=endpoint["output_tokens_per_s"],
        note=note,
    )


def guidellm_scenario(url: str, load: Load, out: Path) -> dict[str, Any]:
    """GuideLLM's whole configuration, dlbench's request in its terms."""
    return {
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": url,
                "model": MODEL,
                "request_format": "/v1/completions",
                # its check of the server GETs /health, which llama-cpp-python lacks
                "api_routes": {"/health": "v1/models"},
                "http2": False,  # dlbench speaks HTTP/1.1 (on plain http both do)
                # GuideLLM asks for max_tokens with ignore_eos (which llama-cpp-python
                # ignores) but sends no temperature or min_tokens: dlbench sends both,
                # greedy and exactly osl tokens, and llama-cpp-python honours them
                "extras": {"body": {"temperature": 0.0, "min_tokens": load.osl}},
            },
            "profile": {
                "kind": "concurrent",
                "streams": load.concurrency,
                # its first `warmup` requests left out of every number
                "warmup": {"mode": "requests", "value": load.warmup},
            },
            "constraints": [
                # from its first request, the warm-up in it (dlbench's --min-time starts
                # after its warm-up): llm-tiny's few warm-up requests take milliseconds
                {"kind": "max_duration", "seconds": load.seconds},
                # A warm-up counted in requests is taken only where the run has a total
                # count (schemas/benchmark/transient.py, compute_limits): one never reached
                {"kind": "max_requests", "count": 1_000_000_000},
            ],
            "tokenizer": {"kind": "huggingface_auto", "model": str(checkpoint_folder(MODEL, 0))},
            "data": [
                {"kind": "synthetic_text", "prompt_tokens": load.isl, "output_tokens": load.osl}
            ],
            "outputs": [{"kind": "json", "path": str(out)}],
        }
    }


def measure_guidellm(executable: str) -> Client:
    def measure(url: str, load: Load, work: Path) -> Measured:
        out, scenario = work / "guidellm.json", work / "guidellm-scenario.json"
        scenario.write_text(json.dumps(guidellm_scenario(url, load, out), indent=1))
        command = [executable, "run", "--scenario", str(scenario), "--disable-console"]
        # the tokenizer is a local folder: the hub is never asked; its guidellm.log
        # goes into the work folder
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        run_logged(command, work / "guidellm.log", load.seconds + CLIENT_OVERHEAD_S,
                   env=env, cwd=work)  # fmt: skip
        return guidellm_numbers(json.loads(out.read_text()))

    return measure


def guidellm_numbers(report: dict[str, Any]) -> Measured:
    metrics = report["benchmarks"][0]["metrics"]

    def answered(name: str) -> dict[str, Any]:
        return metrics[name]["successful"]

    ttft, itl = answered("time_to_first_token_ms"), answered("inter_token_latency_ms")
    e2e = answered("request_latency")  # seconds
    totals = metrics["request_totals"]
    tokens = answered("output_token_count")
    note = (f"{totals['successful']} answered, {totals['errored']} errored, "
            f"{totals['incomplete']} cut at the end, output tokens "
            f"{tokens['min']:.0f}-{tokens['max']:.0f}")  # fmt: skip
    return Measured(
        ttft_p50=ttft["percentiles"]["p50"],
        ttft_p90=ttft["percentiles"]["p90"],
        ttft_mean=ttft["mean"],
        # its inter_token_latency is dlbench's TPOT: (last - first token) / (tokens - 1)
        tpot_p50=itl["percentiles"]["p50"],
        tpot_p90=itl["percentiles"]["p90"],
        tpot_mean=itl["mean"],
        # and the nearest it has to dlbench's ITL (it keeps no gap of its own)
        itl_p50=itl["percentiles"]["p50"],
        itl_mean=itl["mean"],
        e2e_p50=e2e["percentiles"]["p50"] * 1000.0,
        e2e_mean=e2e["mean"] * 1000.0,
        # a rate distribution's mean is its count over the measured window
        requests_per_s=answered("requests_per_second")["mean"],
        output_tokens_per_s=answered("output_tokens_per_second")["mean"],
        note=note,
    )


def ratio(ours: float | None, peer: float | None) -> float | None:
    return ours / peer if ours is not None and peer else None


def cell(value: float | None, width: int = 10, digits: int = 3) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'n/a':>{width}}"


def mark(value: float | None) -> str:
    return "  <- off by more than 5%" if value is not None and abs(value - 1) > AGREEMENT else ""


def print_pair(title: str, ours: Measured, peer: Measured) -> None:
    print(f"\n{title}")
    print(f"  {'':14} {'dlbench':>10} {'guidellm':>10} {'ratio':>8}")
    for label, name in ROWS:
        mine, theirs = getattr(ours, name), getattr(peer, name)
        share = ratio(mine, theirs)
        print(f"  {label:14} {cell(mine)} {cell(theirs)} {cell(share, 8)}{mark(share)}")
    print(f"  dlbench:  {ours.note}\n  guidellm: {peer.note}")


def print_overall(pairs: Pairs) -> None:
    """Each ratio's median over the rounds, a column per concurrency."""
    levels = sorted(pairs)
    print("\noverall: ratio dlbench/guidellm, median over the rounds")
    print(f"  {'':14}" + "".join(f"{f'{level} user(s)':>12}" for level in levels))
    for label, name in ROWS:
        cells = []
        for level in levels:
            shares = [ratio(getattr(o, name), getattr(p, name)) for o, p in pairs[level]]
            known = [s for s in shares if s is not None]
            median = statistics.median(known) if known else None
            flag = "*" if median is not None and abs(median - 1) > AGREEMENT else " "
            cells.append(f"{cell(median, 11)}{flag}")
        print(f"  {label:14}" + "".join(cells))
    print("  (* off by more than 5%; n/a: dlbench records no mean of this)")


def with_machine_load(client: Client, url: str, load: Load, folder: Path) -> Measured:
    """The client's numbers, and the machine's 1-minute load average before and after
    them (the server and the client take about 1.5 of it): on a shared machine another
    job's load slows the server and delays the client's reads, and the note says when."""
    before = os.getloadavg()[0]
    measured = client(url, load, folder)
    return replace(measured, note=f"{measured.note}; load {before:.1f} -> {os.getloadavg()[0]:.1f}")


def interleaved(rounds: int, loads: list[Load], url: str, work: Path,
                clients: dict[str, Client]) -> Pairs:  # fmt: skip
    """Every round measures every load with both clients, the first alternating."""
    pairs: Pairs = {load.concurrency: [] for load in loads}
    for index in range(rounds):
        order = ["dlbench", "guidellm"] if index % 2 == 0 else ["guidellm", "dlbench"]
        for load in loads:
            got: dict[str, Measured] = {}
            for name in order:
                folder = work / f"round{index + 1}-c{load.concurrency}-{name}"
                folder.mkdir()
                got[name] = with_machine_load(clients[name], url, load, folder)
            pairs[load.concurrency].append((got["dlbench"], got["guidellm"]))
            title = (f"round {index + 1}, {load.concurrency} user(s), "
                     f"{' then '.join(order)}")  # fmt: skip
            print_pair(title, got["dlbench"], got["guidellm"])
            sys.stdout.flush()
    return pairs


def guidellm_executable(given: str) -> str:
    found = shutil.which(given)
    if found is None:
        raise SystemExit(f"guidellm not found at {given!r}: install guidellm==0.8.1 in a "
                         "virtualenv of its own and pass --guidellm PATH/bin/guidellm")  # fmt: skip
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guidellm", default="guidellm", help="the guidellm executable")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0, help="measured, per client")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--isl", type=int, default=64)
    parser.add_argument("--osl", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2, help="requests, per client")
    parser.add_argument("--keep", type=Path, help="keep every client's files in this folder")
    args = parser.parse_args()
    guidellm = guidellm_executable(args.guidellm)
    loads = [Load(level, args.isl, args.osl, args.seconds, args.warmup)
             for level in args.concurrency]  # fmt: skip
    clients = {"dlbench": measure_dlbench, "guidellm": measure_guidellm(guidellm)}
    with tempfile.TemporaryDirectory(prefix="peer-agreement-") as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        with llama_server(work) as url:
            print(f"{MODEL} served at {url}; isl {args.isl}, osl {args.osl}, "
                  f"{args.seconds:g} s a client, {args.warmup} warm-up requests")  # fmt: skip
            pairs = interleaved(args.rounds, loads, url, work, clients)
        print_overall(pairs)


if __name__ == "__main__":
    main()
