"""A server's own counters over the measured window: the window arithmetic and bucket
percentiles on /metrics text captured from a real vLLM server (tests/fixtures/
server-metrics/vllm-0.32: what was sent between the readings is in its capture.json), the
prefix-cache-warm flag's rule, and a /metrics that never ends (a hostile server
written here)."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import replace
from html import escape as html_escape
from pathlib import Path

import pytest
from conftest import cli
from factories import make_result, make_run
from test_vllm import MEASURED, PARAMS, reads_the_vllm_run, vllm_run  # noqa: F401  (the session's one vLLM run)

from dlbench.measure.exposition import (
    CountersWentBack,
    NotExposition,
    Scrape,
    bucket_increase,
    bucket_quantile,
    parse_scrape,
)
from dlbench.measure.server_counters import BucketEstimate, ServerCounters
from dlbench.measure.server_metrics import (
    FAMILIES,
    ServerWindow,
    client_means,
    family_of,
    gauge,
    window_figures,
)
from dlbench.measure.stats import summarize
from dlbench.measure.token_latency import TokenTimes
from dlbench.report.html import render
from dlbench.report.server_side import estimate_text
from dlbench.report.table import fmt
from dlbench.results.details import Details
from dlbench.results.files import write_json
from dlbench.results.flags import (
    CHAT_HEAD_TOKENS,
    PREFIX_CACHE_WARM,
    PREFIX_WARM_SHARE,
    result_flags,
)
from dlbench.results.metrics import METRICS, read

# a folder below fixtures/: the run-file import test reads fixtures/*/*.json as runs
CAPTURED = Path(__file__).parent / "fixtures" / "server-metrics" / "vllm-0.32"
SENT = json.loads((CAPTURED / "capture.json").read_text())
MODEL = "llm-135m"
VLLM = FAMILIES[0]


def reading(name: str, model: str | None = MODEL) -> Scrape:
    return parse_scrape((CAPTURED / f"{name}.txt").read_text(), model)


def window(run: str) -> ServerCounters:
    start, end = reading(f"{run}-start"), reading(f"{run}-end")
    return window_figures(VLLM, start, end, [])


def test_a_window_of_vllms_counters_counts_the_requests_sent_in_it():
    cold = window("cold")
    assert family_of(reading("cold-start")) is VLLM and cold.family == "vLLM"
    # every request finished inside the window is one observation of each latency
    timings = {"ttft": cold.ttft, "e2e": cold.e2e, "queue": cold.queue}
    for name, timing in timings.items():
        assert timing is not None and timing.count == SENT["requests"], name
    # one inter-token gap for each output token after a request's first
    assert cold.per_token is not None and cold.per_token.metric.startswith("vllm:inter_token")
    assert cold.per_token.count == SENT["output_tokens"] - SENT["requests"]
    # the prefix cache was asked for every prompt token, and served the shared prefix's
    # whole blocks to the two requests after the first
    assert cold.prefix_cache_queries == SENT["prompt_tokens"]
    assert cold.prefix_cache_hits == SENT["cold_hit_tokens"]
    assert cold.prefix_cache_hit_rate == SENT["cold_hit_tokens"] / SENT["prompt_tokens"]
    assert cold.preemptions == 0
    # a request's queue time and first token lie inside its whole latency
    assert cold.queue.mean_ms < cold.ttft.mean_ms < cold.e2e.mean_ms


def test_the_same_prompts_again_are_served_from_the_cache_they_warmed():
    warm = window("warm")
    assert warm.ttft is not None and warm.ttft.count == SENT["requests"]
    assert warm.prefix_cache_queries == SENT["prompt_tokens"]
    assert warm.prefix_cache_hits == SENT["warm_hit_tokens"]
    assert warm.prefix_cache_hits % SENT["block_tokens"] == 0  # whole blocks only


@pytest.mark.parametrize("run", ["cold", "warm"])
def test_bucket_estimates_of_real_histograms_lie_in_the_bucket_that_holds_their_rank(run):
    start, end = reading(f"{run}-start"), reading(f"{run}-end")
    figures = window_figures(VLLM, start, end, [])
    for timing in (figures.ttft, figures.per_token, figures.e2e, figures.queue):
        assert timing is not None
        buckets = dict(bucket_increase(start.buckets[timing.metric],
                                       end.buckets[timing.metric], timing.metric))  # fmt: skip
        estimates = [(50, timing.p50), (90, timing.p90), (99, timing.p99)]
        for q, estimate in estimates:
            assert estimate is not None
            rank = q / 100 * timing.count
            upper = math.inf if estimate.upper_ms is None else estimate.upper_ms / 1000
            assert estimate.lower_ms <= estimate.ms <= (estimate.upper_ms or estimate.ms)
            # the bucket holds the rank: fewer observations below its lower bound
            assert buckets[upper] >= rank > buckets.get(estimate.lower_ms / 1000, 0.0)
        values = [estimate.ms for _, estimate in estimates]
        assert values == sorted(values)


def test_a_percentile_is_interpolated_within_its_bucket_and_bounded_by_it():
    # 8 observations: 2 up to 100 ms, 4 more up to 200 ms, 2 beyond the last bound
    buckets = [(0.1, 2.0), (0.2, 6.0), (math.inf, 8.0)]
    # the median's rank, 4, is the second of the 4 in (100, 200]: half way through it
    median = bucket_quantile(0.5, buckets)
    assert median is not None and (median.lower_ms, median.upper_ms) == (100.0, 200.0)
    assert median.ms == pytest.approx(150.0)
    # the 25th percentile's rank, 2, is the first bucket's last: its upper bound
    assert bucket_quantile(0.25, buckets) == BucketEstimate(100.0, 0.0, 100.0)
    # the open last bucket bounds nothing above: its lower bound, said to be open
    assert bucket_quantile(0.99, buckets) == BucketEstimate(200.0, 200.0, None)
    assert bucket_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None  # nothing observed


def test_gauges_are_sampled_for_their_peak_and_mean():
    readings = [reading("cold-start"), reading("cold-during"), reading("cold-end")]
    running = gauge(readings, VLLM.running)
    assert running is not None and running.samples == 3
    # four requests were running when the middle reading was taken, none before or after
    assert running.peak == 4 and running.mean == pytest.approx(4 / 3)
    kv = gauge(readings, VLLM.kv_cache, highest=True)
    assert kv is not None and 0 < kv.peak <= 1 and kv.mean == pytest.approx(kv.peak / 3)
    assert gauge([], VLLM.running) is None


def test_a_window_read_backwards_or_another_models_samples_are_not_counted():
    with pytest.raises(CountersWentBack):  # a server restarted inside the window
        window_figures(VLLM, reading("cold-end"), reading("cold-start"), [])
    # a server of several models: the served model's series alone
    other = reading("cold-end", model="another-model")
    assert other.total("vllm:prefix_cache_queries_total") is None
    assert reading("cold-end", model=None).total("vllm:prefix_cache_queries_total") > 0


def test_text_that_is_not_exposition_or_names_no_known_server_is_said_to_be():
    with pytest.raises(NotExposition):
        parse_scrape("<html><body>Not Found</body></html>")
    assert family_of(parse_scrape("# TYPE my_requests counter\nmy_requests_total 3\n")) is None


def test_the_clients_means_are_kept_beside_the_servers_over_the_same_requests():
    # two requests: 3 tokens at 0.1, 0.2, 0.3 s and 5 tokens in 2 chunks at 0.2 and 0.6 s
    times = [TokenTimes(0.0, [0.1, 0.2, 0.3]), TokenTimes(0.0, [0.2, 0.6], output_tokens=5)]
    means = client_means(ServerCounters(family="vLLM"), times)
    assert means.client_ttft_mean_ms == pytest.approx(150.0)
    assert means.client_e2e_mean_ms == pytest.approx(450.0)
    # every token after a request's first weighted alike: (0.2 + 0.4) s over 2 + 4 tokens
    assert means.client_per_token_mean_ms == pytest.approx(100.0)


def served(hits: float, queries: float = 12_800, requests: int = 100, api: str = "completions",
           **params: int) -> object:  # fmt: skip
    """An endpoint result of `requests` requests whose server's prefix cache was asked for
    `queries` prompt tokens and served `hits`."""
    server = {"family": "vLLM", "prefix_cache_queries": queries, "prefix_cache_hits": hits}
    return make_result(workload="llm-requests", framework="endpoint", endpoint="http://h:1",
                       served_model="m", api=api, params={"isl": 128, "turns": 1, **params},
                       details={"endpoint": {"requests": requests, "ok": requests,
                                             "server": server}})  # fmt: skip


def test_a_run_its_server_served_from_a_cache_warmed_before_it_is_flagged():
    bound = PREFIX_WARM_SHARE * 12_800
    assert PREFIX_CACHE_WARM not in result_flags(served(hits=0), 2)
    assert PREFIX_CACHE_WARM not in result_flags(served(hits=bound), 2)
    assert PREFIX_CACHE_WARM in result_flags(served(hits=bound + 128), 2)
    # the captured warm window, as a run designed to share nothing would have read it
    warm = window("warm")
    assert warm.prefix_cache_hit_rate > PREFIX_WARM_SHARE
    result = served(hits=warm.prefix_cache_hits, queries=warm.prefix_cache_queries,
                    requests=SENT["requests"])  # fmt: skip
    assert PREFIX_CACHE_WARM in result_flags(result, 2)
    assert read(METRICS["prefix_hit_rate"], result) == warm.prefix_cache_hit_rate


def test_shared_prefixes_by_design_and_a_chat_templates_head_are_not_a_warm_cache():
    hits = 0.5 * 12_800
    assert PREFIX_CACHE_WARM not in result_flags(served(hits=hits, prefix_pct=50), 2)
    assert PREFIX_CACHE_WARM not in result_flags(served(hits=hits, turns=3), 2)
    # every chat request's template head cached (two 16-token blocks): by design
    head = CHAT_HEAD_TOKENS * 100
    assert PREFIX_CACHE_WARM not in result_flags(served(hits=head, api="chat"), 2)
    assert PREFIX_CACHE_WARM in result_flags(served(hits=head, api="completions"), 2)
    # a prefix_pct run keeps the hit rate it produced
    assert read(METRICS["prefix_hit_rate"], served(hits=hits, prefix_pct=50)) == 0.5


def test_a_metrics_answer_that_never_ends_is_given_up_at_its_deadline():
    """A hostile /metrics that sends a line every 50 ms for ever: the window says why
    it has no figures, within the deadline, and the case goes on."""

    async def scenario() -> ServerCounters:
        async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
            line = b"vllm:x_total 1.0\n"
            try:
                while True:
                    writer.write(b"%x\r\n%s\r\n" % (len(line), line))
                    await writer.drain()
                    await asyncio.sleep(0.05)
            except (ConnectionError, asyncio.CancelledError):
                writer.close()  # the client gave up (or the test ends)

        server = await asyncio.start_server(endless, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        import httpx

        async with httpx.AsyncClient() as client:
            window = ServerWindow(client, f"http://127.0.0.1:{port}", MODEL, deadline_s=0.3)
            await window.open()
            counters = await window.close(answered=0)
        server.close()
        return counters

    counters = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert counters.family is None and "did not answer whole within 0.3 s" in counters.unread


def endpoint_run(server: ServerCounters | dict, run_id: str = "a") -> object:
    """A stored run of one endpoint result whose server's counters are `server`."""
    result = make_result(workload="llm-requests", framework="endpoint", endpoint="http://h:1",
                         served_model=MODEL, device="remote", samples_ms=[1.0] * 10,
                         latency_ms=summarize([1.0] * 10), throughput=1.0,
                         details={"endpoint": {"requests": 7, "ok": 7}})  # fmt: skip
    if isinstance(server, dict):
        server = ServerCounters(**server)
    endpoint = replace(result.details.endpoint, server=server)
    return make_run(
        [replace(result, details=replace(result.details, endpoint=endpoint))], id=run_id
    )


def test_show_compare_and_the_page_put_the_servers_figures_beside_the_clients(tmp_path):
    cold = window("cold")
    # the client's means a known 12.5 ms above the server's: the difference shown
    assert cold.ttft is not None and cold.e2e is not None
    offset = 12.5
    server = replace(cold, client_ttft_mean_ms=cold.ttft.mean_ms + offset,
                     client_e2e_mean_ms=cold.e2e.mean_ms + offset)  # fmt: skip
    path = tmp_path / "a.json"
    write_json(endpoint_run(server), path)
    shown = cli("show", str(path))
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "The server's own counters" in text and "vLLM" in text
    row = next(line for line in shown.stdout.splitlines() if " TTFT " in line)
    cells = [cell.strip() for cell in row.split("│")]
    # client, server, client - server; then the p50, a bucket estimate with its bounds
    assert cells[4:8] == [fmt(cold.ttft.mean_ms + offset), fmt(cold.ttft.mean_ms), fmt(offset),
                          estimate_text(cold.ttft.p50)]  # fmt: skip
    assert "outside the server's clock" in text and "prefix cache 24.4% (512/2,100)" in text
    compared = cli("compare", str(path), str(path), "--metric", "server_ttft")
    assert compared.returncode == 0, compared.stderr
    assert "The servers' own counters" in compared.stdout
    page = render([endpoint_run(server)])
    assert "own counters" in page and html_escape(estimate_text(cold.e2e.p99)) in page
    assert f"{fmt(offset)}</td>" in page


def test_a_server_without_counters_says_why_in_one_line(tmp_path):
    path = tmp_path / "a.json"
    write_json(endpoint_run({"unread": "the server has no /metrics (HTTP 404)"}), path)
    shown = cli("show", str(path))
    assert "no server counters: the server has no /metrics (HTTP 404)" in shown.stdout


@reads_the_vllm_run
def test_a_vllm_case_keeps_its_servers_counters_for_exactly_its_requests(vllm_run):  # noqa: F811
    """The session's one vLLM run (tests/test_vllm.py makes it once, skipped naming the
    install step where vLLM is absent): its measured case's counters."""
    result = vllm_run["results"][MEASURED]
    assert result["status"] == "ok", result.get("error")
    load = result["details"]["endpoint"]
    server = Details.from_dict(result["details"]).endpoint.server
    assert server is not None and server.unread is None and server.family == "vLLM"
    assert server.note is None  # the server had counted every answered request
    # the window holds the load's requests, none of the warm-up's, each osl tokens long
    assert server.ttft.count == server.e2e.count == load["ok"]
    assert server.per_token.count == load["ok"] * (PARAMS["osl"] - 1)
    # the server's clock runs inside the client's: arrival after sending, token before reading
    assert server.client_ttft_mean_ms >= server.ttft.mean_ms
    assert server.client_e2e_mean_ms >= server.e2e.mean_ms
    assert server.running is not None and 0 < server.running.peak <= 2  # 2 users
    assert PREFIX_CACHE_WARM not in result["flags"]
