"""`dlbench run --endpoint URL`: a real OpenAI-compatible server (llama-cpp-python's,
serving llm-tiny on the loopback address) under each load profile, its SLOs judged,
the requests sent stored beside the run, and every bad input refused in one line."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import cli, dlbench, free_port

from dlbench.errors import UserError
from dlbench.measure.client_limits import connection_limit
from dlbench.measure.peak_search import Search
from dlbench.measure.saturation import queue_only_grows
from dlbench.workloads.requests import (
    LLM_REQUESTS,
    SALT_TOKENS,
    RequestSet,
    TokenizerText,
    WordText,
)

SMALL = ["--param", "isl=16", "--param", "osl=8"]


def run_endpoint(tmp_path: Path, url: str, *args: str) -> dict:
    out = tmp_path / "run.json"
    proc = dlbench("run", "--endpoint", url, *SMALL, "--json", str(out), "-q", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(out.read_text())["results"][0]


@pytest.mark.integration
def test_a_concurrency_run_measures_every_request_and_judges_its_slos(tmp_path, llama_server):
    result = run_endpoint(tmp_path, llama_server, "--concurrency", "2", "--min-time", "0.5",
                          "--min-iters", "8", "--ttft-ms", "30000",
                          "--tpot-ms", "30000")  # fmt: skip
    assert result["status"] == "ok", result["error"]
    load, tokens = result["details"]["endpoint"], result["details"]["generation"]
    # the model the server lists was filled in, and is part of the stored case
    assert result["case"]["served_model"] == "llm-tiny" and load["served_model"] == "llm-tiny"
    assert result["case"]["device"] == "remote" and load["profile"] == "concurrency 2"
    assert load["requests"] == load["ok"] == load["conversations"] >= 8
    assert not load.get("errors") and not load.get("short_answers")
    # this server streams no usage: it says it stopped at max_tokens, so 8 tokens each
    assert load["tokens_counted_by"] == "max_tokens (finish_reason length)"
    assert load["output_tokens_mean"] == 8
    assert load["output_tokens_per_s"] == pytest.approx(8 * load["requests_per_s"])
    # bounds no request misses: every request is good, goodput is the answered rate
    assert load["slo_holds"] is True and load["slo_met_share"] == 1.0
    assert load["goodput_per_s"] == pytest.approx(load["requests_per_s"])
    assert result["throughput"] == pytest.approx(load["requests_per_s"])
    assert 0 < tokens["ttft_p50_ms"] <= tokens["e2e_p50_ms"] and tokens["tpot_p50_ms"] > 0
    assert tokens["generations"] == load["ok"] and len(result["samples_ms"]) == load["ok"]
    assert "over-slo" not in result["flags"] and "interference" not in result["flags"]
    assert result["details"]["energy"]["unmeasurable"]  # the work is the server's
    # a closed loop counts from the send; the client watched itself over the load: its
    # timer (every 10 ms), its one process's CPU, the chunks of every answer (2 to 8 each)
    client = load["client"]
    assert load["timed_from"] == "send" and client.get("processes", 1) == 1
    # a 10 ms timer fires at most once in each 10 ms of the load (fewer where it is late)
    assert 1 <= client["lag_samples"] <= load["duration_s"] / 0.01 + 1
    assert (
        0 < client["cpu_share"] <= 1.05 and client["loop_lag_p99_ms"] >= client["loop_lag_p50_ms"]
    )
    chunks = client["chunks_per_s"] * load["duration_s"]
    assert 2 * load["ok"] <= round(chunks) <= 8 * load["ok"]
    # llama-cpp-python's server keeps no /metrics: said in one line, the case measured
    assert load["server"] == {"unread": "the server has no /metrics (HTTP 404)"}
    # the requests sent are kept beside the run, as the digest says
    dataset = Path(load["dataset_file"]).read_bytes()
    assert hashlib.sha256(dataset).hexdigest() == load["dataset_digest"]
    lines = [json.loads(line) for line in dataset.decode().splitlines()]
    assert [line["index"] for line in lines] == list(range(load["conversations"]))


@pytest.mark.integration
def test_repeated_processes_merge_the_servers_goodput_as_their_median(tmp_path, llama_server):
    """--repeat on an endpoint: each process its own client and requests; the
    merged goodput and request rate are the median of the processes' (here: the mean
    of two), as every metric with a process key merges."""
    result = run_endpoint(tmp_path, llama_server, "--repeat", "2", "--concurrency", "2",
                          "--min-time", "0", "--min-iters", "6", "--ttft-ms", "30000")  # fmt: skip
    assert result["status"] == "ok", result["error"]
    summaries = [s for s in result["details"]["processes"]["summaries"] if s.get("used")]
    assert len(summaries) == 2 and all(s["status"] == "ok" for s in summaries)
    goodputs = [s["goodput_per_s"] for s in summaries]  # each under its process key
    assert all(value > 0 for value in goodputs)
    assert result["details"]["endpoint"]["goodput_per_s"] == pytest.approx(sum(goodputs) / 2)


@pytest.mark.integration
def test_bounds_no_request_keeps_give_no_goodput_and_a_flag(tmp_path, llama_server):
    result = run_endpoint(tmp_path, llama_server, "--min-time", "0", "--min-iters", "4",
                          "--ttft-ms", "0.001", "--slo-percentile", "50")  # fmt: skip
    load = result["details"]["endpoint"]
    assert result["status"] == "ok" and load["profile"] == "synchronous"
    assert load["slo_holds"] is False and load["slo_met_share"] == 0.0
    assert load["goodput_per_s"] == 0.0 and load["slo_percentile"] == 50.0
    assert "over-slo" in result["flags"]


@pytest.mark.integration
def test_an_open_loop_sends_multi_turn_conversations_with_shared_prefixes(
    tmp_path, llama_server, llama_checkpoint
):
    """Spread over two client processes (--client-processes 2): they share the one seeded
    schedule (every other arrival each), so the run sends exactly the conversations one
    process would, each once, and their records merge into one result."""
    result = run_endpoint(
        tmp_path, llama_server, "--api", "chat", "--request-rate", "40", "--burstiness", "2",
        "--min-time", "0.25", "--min-iters", "6", "--tokenizer", str(llama_checkpoint),
        "--param", "turns=2", "--param", "prefix_pct=50", "--param", "prefixes=2",
        "--param", "range_pct=25", "--client-processes", "2",
    )  # fmt: skip
    assert result["status"] == "ok", result["error"]
    load = result["details"]["endpoint"]
    assert load["api"] == "chat" and load["profile"] == "40 requests/s (burstiness 2)"
    assert load["timed_from"] == "schedule"  # an open loop's latencies, as LoadGen's
    assert load["client"]["processes"] == 2 and "limit" in result["details"]
    # 40/s over 0.25 s is 10 conversations, of two turns each, every one answered once
    assert load["conversations"] == 10 and load["requests"] == load["ok"] == 20
    assert result["details"]["generation"]["generations"] == 20 == len(result["samples_ms"])
    assert load["send_lag_p99_ms"] is not None and load["send_lag_p99_ms"] < 250
    lines = [json.loads(x) for x in Path(load["dataset_file"]).read_text().splitlines()]
    assert [line["index"] for line in lines] == list(range(10))
    assert all(len(line["turns"]) == 2 for line in lines)
    by_group: dict[int, list[str]] = {}
    for line in lines:  # half of isl=16: an 8-token prefix per group
        by_group.setdefault(line["prefix_group"], []).append(line["turns"][0]["text"])
    shared = {group: os.path.commonprefix(texts) for group, texts in by_group.items()}  # noqa: RUF071
    assert sorted(shared) == [0, 1] and all(len(prefix) >= 8 for prefix in shared.values())
    assert not shared[0].startswith(shared[1][:8])
    lengths = [turn["tokens"] for line in lines for turn in line["turns"]]
    assert min(lengths) >= 12 and max(lengths) <= 20 and len(set(lengths)) > 1


@pytest.mark.integration
def test_a_rate_the_server_cannot_keep_is_stopped_and_said_so(tmp_path, llama_server):
    result = run_endpoint(tmp_path, llama_server, "--request-rate", "500", "--min-time", "4",
                          "--param", "osl=64")  # fmt: skip
    load = result["details"]["endpoint"]
    assert result["status"] == "failed" and result["error"].startswith("saturated: ")
    assert "does not keep this rate" in result["error"] and load["cancelled"] > 0
    assert load["conversations"] < 500 * 4  # it stopped sending long before the end


@pytest.mark.integration
def test_find_peak_searches_the_highest_concurrency_whose_slos_hold(tmp_path, llama_server):
    # this server answers one request at a time: TTFT grows with the users waiting
    result = run_endpoint(tmp_path, llama_server, "--find-peak", "--concurrency", "2",
                          "--ttft-ms", "100", "--min-time", "0.3", "--min-iters", "8")  # fmt: skip
    load = result["details"]["endpoint"]
    tries = load["tries"]
    # a busy machine: a request alone may already miss the bound, which one try shows
    alone = (load.get("peak_note") or "").startswith("a request alone")
    assert load["peak_axis"] == "concurrency" and (len(tries) >= 2 or alone)
    assert all(t["load"] == int(t["load"]) >= 1 for t in tries)  # whole users
    for each in tries:  # each verdict is its own percentile against the bound
        kept = each.get("ttft_ms") is not None and each["ttft_ms"] <= 100
        assert each["holds"] == (kept and not each.get("errors") and not each.get("saturated"))
    held = [t["load"] for t in tries if t["holds"]]
    if load.get("peak") is None:  # a busy machine: not even one user within the bound
        assert not held and result["status"] == "failed" and "over-slo" in result["flags"]
    else:
        assert load["peak"] in held and result["status"] == "ok"
        failed_above = [t["load"] for t in tries if not t["holds"] and t["load"] > load["peak"]]
        assert failed_above or len(tries) == 12  # a failing load bounds it from above
        if load.get("peak_confirmed"):  # the last try ran the peak again, and it held
            assert tries[-1]["load"] == load["peak"] and tries[-1]["holds"]
    assert result["case"]["find_peak"] is True and result["case"]["concurrency"] == 2


@pytest.mark.integration
def test_a_search_where_a_request_alone_misses_a_bound_tries_once_and_says_so(
    tmp_path, llama_server
):
    """No load can keep a bound one request alone misses: one try shows it, never a
    descent to the floor (hours of low rates, at 4 requests a try)."""
    result = run_endpoint(tmp_path, llama_server, "--find-peak", "--request-rate", "2",
                          "--tpot-ms", "0.001", "--min-time", "0", "--min-iters", "4")  # fmt: skip
    load = result["details"]["endpoint"]
    assert [t["load"] for t in load["tries"]] == [2.0] and load.get("peak") is None
    assert load["peak_note"].startswith("a request alone takes ")
    assert load["peak_note"].endswith("ms per output token, over the 0.001 ms bound")
    assert result["status"] == "failed" and result["error"].startswith("no load kept the SLOs")


@pytest.mark.integration
def test_a_sweep_of_users_is_a_case_for_each(tmp_path, llama_server):
    out = tmp_path / "sweep.json"
    proc = dlbench("run", "--endpoint", llama_server, *SMALL, "--sweep", "concurrency=1,3",
                   "--min-time", "0", "--min-iters", "6", "--json", str(out), "-q")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())["results"]
    assert [r["case"]["concurrency"] for r in results] == [1, 3]
    assert [r["details"]["endpoint"]["profile"] for r in results] == [
        "concurrency 1", "concurrency 3",
    ]  # fmt: skip
    assert all(r["status"] == "ok" and r["details"]["endpoint"]["ok"] >= 6 for r in results)


def test_request_sets_are_seeded_and_sized_by_the_tokenizer(llama_checkpoint):
    params = LLM_REQUESTS.resolve_params("cpu", {"isl": 24, "osl": 4, "range_pct": 50})
    sized = RequestSet(params, 7, TokenizerText(llama_checkpoint))
    again = RequestSet(params, 7, TokenizerText(llama_checkpoint))
    assert sized.conversation(3) == again.conversation(3) != sized.conversation(4)
    assert sized.conversation(3, warmup=True) != sized.conversation(3)
    for index in range(20):
        turn = sized.conversation(index).turns[0]
        assert 12 <= turn.tokens <= 36 and 2 <= turn.output_tokens <= 6
        # a prompt cut to its length in tokens re-encodes to about that length
        assert abs(sized.text.count(turn.text) - turn.tokens) <= 2
    words = RequestSet(params, 7, WordText()).conversation(0).turns[0]
    assert len(words.text.split()) == words.tokens


def test_an_open_loop_loads_the_saturation_tests_library_before_its_load():
    """SciPy's import (0.6-1.6 s) inside a load near its peak would stall its sends:
    a case whose arrivals follow a schedule loads it in its set-up, a closed loop
    never needs it."""

    from factories import make_case

    from dlbench.worker.endpoint_run import endpoint_target, watches_its_queue

    case = make_case(workload="llm-requests", framework="endpoint", endpoint="http://x",
                     served_model="m")  # fmt: skip

    def watches(**load: object) -> bool:
        return watches_its_queue(endpoint_target(case.replaced(**load)).load)

    assert watches(request_rate=4.0)
    assert watches(find_peak=True, ttft_ms=100.0)  # a rate search
    assert not watches(concurrency=4)
    assert not watches(concurrency=4, find_peak=True, ttft_ms=100.0)


def test_a_queue_that_only_grows_is_saturation_and_a_steady_one_is_not():
    times = [i * 0.01 for i in range(200)]
    assert queue_only_grows(times, [1 + i // 4 for i in range(200)]) is not None
    steady = [5 + (i * 7919) % 5 for i in range(200)]  # wanders between 5 and 9
    assert queue_only_grows(times, steady) is None
    # a ramp that settles (the first half is left out as the ramp)
    assert queue_only_grows(times, [min(i, 30) for i in range(200)]) is None
    assert queue_only_grows(times[:20], [i for i in range(20)]) is None  # too few to say


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ttft-ms", "0"], "expected a number > 0, got 0"),
        (["--tpot-ms", "-5"], "expected a number > 0, got -5"),
        (["--concurrency", "2", "--request-rate", "3"], "two load profiles; give one"),
        (["--burstiness", "0.5"], "--burstiness shapes --request-rate's arrivals"),
        (["--find-peak"], "give --ttft-ms, --tpot-ms or both"),
        (["--slo-percentile", "100", "--ttft-ms", "5"], "a percentile in (0, 100)"),
        (["--slo-percentile", "90"], "--slo-percentile is the percentile of --ttft-ms"),
        (["--scenario", "server"], "an endpoint's load is --concurrency N or --request-rate R"),
        (["-w", "mlp"], "--workload mlp is not taken (allowed: llm-requests)"),
        (["--device", "cuda"], "allowed: auto or remote"),
        (["--param", "turns=65"], "parameter turns=65; allowed: up to 64"),
        (["--tokenizer", "/no/such/tokenizer"], "no tokenizer.json there"),
        (["--sweep", "rate=1,2", "--request-rate", "3"], "--sweep rate and --request-rate both"),
        (["--sweep", "rate=1,2", "--sweep", "concurrency=2"], "two load profiles; give one"),
        (["--latency-clock", "send"], "--latency-clock says where --request-rate's latencies"),
        (["--client-processes", "3", "--concurrency", "2"], "allowed: 1 to 2 (or a --request"),
        (["--model-config", "/no/such/config.json"], "no config.json at /no/such/config.json"),
    ],
)
def test_bad_endpoint_options_exit_2_before_anything_is_sent(args, message):
    proc = cli("run", "--endpoint", f"http://127.0.0.1:{free_port()}", *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_endpoint_options_elsewhere_and_bad_urls_exit_2():
    for args, message in (
        (["-w", "mlp", "-f", "null", "--concurrency", "4"], "--concurrency goes with --endpoint"),
        (["--endpoint", "ftp://host"], "expected an http:// or https:// URL with a host"),
        (["-w", "mlp", "-f", "null", "--sweep", "rate=1,2"], "an endpoint's load; give --endpoint"),
        (["--endpoint", "http://host:99999"], "expected a port from 0 to 65535"),
    ):
        proc = cli("run", *args)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_a_server_that_cannot_be_measured_exits_2_naming_why(
    tmp_path, llama_server, json_only_server
):
    nothing = f"http://127.0.0.1:{free_port()}"
    for args, message in (
        ([nothing], f"--endpoint {nothing}: cannot connect (ConnectError"),
        ([llama_server, "--served-model", "gpt-9"], "does not serve it; allowed: llm-tiny"),
        (
            [json_only_server],
            "a streamed request like the run's (128 prompt tokens, 4 asked) failed: not a stream",
        ),
    ):
        proc = cli("run", "--endpoint", *args, "--db", str(tmp_path / "store.sqlite"))
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "store.sqlite").exists()  # no run was stored for any of them


def test_each_run_salts_its_prompts_and_keeps_the_sharing_it_designs():
    params = LLM_REQUESTS.resolve_params("cpu", {"isl": 16, "osl": 4})
    plain, one, other = (RequestSet(params, 7, WordText(), salt) for salt in (None, "0a1b", "ffee"))
    first = [
        [s.conversation(i).turns[0].text.split() for i in range(40)] for s in (plain, one, other)
    ]
    # a run's salt changes every prompt's start, its length kept; the rest is the seed's
    again = RequestSet(params, 7, WordText(), "0a1b")
    assert [again.conversation(i).turns[0].text.split() for i in range(40)] == first[1]
    assert all(len(words) == 16 for run in first for words in run)
    assert all(a[:SALT_TOKENS] != b[:SALT_TOKENS] for a, b in zip(first[0], first[1], strict=True))
    starts = [{tuple(words[:SALT_TOKENS]) for words in run} for run in first]
    assert len(starts[1]) == len(starts[2]) == 40  # the salt is no prefix shared by design
    assert not starts[1] & starts[2]  # nor one another run's prompts could have warmed
    assert all(a[SALT_TOKENS:] == b[SALT_TOKENS:] for a, b in zip(first[1], first[2], strict=True))
    # unsalted: the prompts the seed makes, whatever salt is passed
    unsalted = LLM_REQUESTS.resolve_params("cpu", {"isl": 16, "osl": 4, "unsalted": 1})
    assert RequestSet(unsalted, 7, WordText(), "0a1b").conversation(3) == plain.conversation(3)
    assert "unsalted" not in params and unsalted["unsalted"] == 1  # in the label where set
    # a prefix shared by design stays shared within the run (its salt is the group's) and
    # is another run's own
    shared = LLM_REQUESTS.resolve_params("cpu", {"isl": 16, "osl": 4, "prefix_pct": 50,
                                                 "prefixes": 2})  # fmt: skip
    runs = [RequestSet(shared, 7, WordText(), salt) for salt in ("0a1b", "ffee")]
    for group in (0, 1):
        prefixes = [[r.conversation(i).turns[0].text.split()[:8] for i in (group, group + 2)]
                    for r in runs]  # fmt: skip
        assert prefixes[0][0] == prefixes[0][1] and prefixes[1][0] == prefixes[1][1]
        assert prefixes[0][0][:SALT_TOKENS] != prefixes[1][0][:SALT_TOKENS]
    with pytest.raises(UserError, match="unsalted=2; allowed: up to 1"):
        LLM_REQUESTS.validate_params({"unsalted": 2})


def test_more_users_than_the_client_can_hold_open_are_refused_naming_the_limit():
    limit = connection_limit()
    if limit is None:
        pytest.skip("no open-file limit nor port range known on this system")
    url = f"http://127.0.0.1:{free_port()}"
    over = cli("run", "--endpoint", url, "--concurrency", str(limit.most + 1))
    assert over.returncode == 2
    lines = over.stderr.strip().splitlines()
    assert len(lines) == 1 and f"allowed: 1 to {limit.most}" in lines[0], lines
    assert f"holds at most {limit.most} requests open at once ({limit.why})" in lines[0]
    at = cli("run", "--endpoint", url, "--concurrency", str(limit.most))  # planned, then checked
    assert at.returncode == 2 and "cannot connect" in at.stderr, at.stderr


def test_a_search_stops_growing_at_the_clients_limit_and_says_so():
    @dataclass
    class Held:
        holds: bool

    tried: list[float] = []

    def try_at(load: float) -> Held:
        tried.append(load)
        return Held(load <= 1000)  # a server that would hold more than the client can send

    found = Search(start=8, floor=1, whole=True, ceiling=100, ceiling_why="the limit").run(try_at)
    assert tried == [8, 16, 32, 64, 100] and found.peak == 100
    assert found.note == "100 held; no higher load can be tried: the limit"
    # below the ceiling, the search is as before
    unbounded = Search(start=8, floor=1, whole=True, ceiling=10_000).run(lambda x: Held(x <= 20))
    assert unbounded.peak == 20 and unbounded.note is None
