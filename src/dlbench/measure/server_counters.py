"""What a result keeps of a server's own counters over the measured window.

An OpenAI-compatible server that exposes Prometheus `/metrics` (vLLM, SGLang, TGI,
llama.cpp's `llama-server --metrics`) counts its requests on its own clock.
measure.server_metrics reads it as a load starts and ends (and samples its gauges
between); these records are what it found: plain data, no HTTP client and no
parser, so the parent reads a stored result without either.

Latency figures come from histograms. Their mean over the window is exact (the
differences of `_sum` and `_count`); their percentiles are estimates from the
differences of the bucket counts, linear within the bucket that holds the rank
(as Prometheus' `histogram_quantile` makes them), kept with the bucket's bounds,
between which the true value lies. The client's means over the same requests sit
beside them, so a reader sees what the server's clock leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BucketEstimate:
    """A percentile estimated from a histogram's buckets: `ms`, interpolated within the
    bucket that holds its rank, lies between `lower_ms` and `upper_ms` (None: the open
    last bucket, where `ms` is its lower bound)."""

    ms: float
    lower_ms: float
    upper_ms: float | None


@dataclass(frozen=True)
class ServerTiming:
    """One of the server's latencies over the window: `metric` is the server's own name
    for it, `count` the observations the window added, `mean_ms` their exact mean, and
    the percentiles bucket estimates (None where the server keeps no buckets)."""

    metric: str
    count: int
    mean_ms: float | None = None
    p50: BucketEstimate | None = None
    p90: BucketEstimate | None = None
    p99: BucketEstimate | None = None


@dataclass(frozen=True)
class GaugeSamples:
    """A gauge sampled while the load ran: its highest and mean reading over `samples`."""

    metric: str
    samples: int
    peak: float
    mean: float


@dataclass(frozen=True)
class ServerCounters:
    """The server's own figures for the measured window, or why there are none
    (`unread`: no /metrics, names of no known server, a scrape that failed).

    - ttft: arrival to first token on the server's clock; per_token: the time per
      output token as the server counts it (vLLM and SGLang: each gap between
      tokens; TGI: each request's mean; llama.cpp: generation time over tokens);
      e2e: arrival to the last token; queue: waiting before the server scheduled it.
    - prefix_cache_queries and _hits: prompt tokens looked up in the prefix cache,
      and those it served, over the window; preemptions: requests the server evicted
      to make room (vLLM's preemptions, SGLang's retractions).
    - kv_cache (a fraction of the cache, 0-1), running and waiting: sampled every
      `sample_interval_s`; a reading took `scrape_ms` of wall time on average (mostly
      the server's time to answer: the client's loop serves the requests' chunks
      meanwhile, and its own CPU per reading is a few ms, bench/server_metrics_cost.py).
    - client_*_mean_ms: the client's means over the load's answered requests,
      request sent to first chunk, per token after the first, sent to last chunk.
    """

    family: str | None = None  # the server whose names were read: vLLM, SGLang, TGI, llama.cpp
    unread: str | None = None
    window_s: float | None = None
    ttft: ServerTiming | None = None
    per_token: ServerTiming | None = None
    e2e: ServerTiming | None = None
    queue: ServerTiming | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    preemptions: float | None = None
    kv_cache: GaugeSamples | None = None
    running: GaugeSamples | None = None
    waiting: GaugeSamples | None = None
    sample_interval_s: float | None = None
    scrape_ms: float | None = None
    # the end's counts were read before the server had counted every answered request
    # (its counters lag its streams): said, never hidden
    note: str | None = None
    client_ttft_mean_ms: float | None = None
    client_per_token_mean_ms: float | None = None
    client_e2e_mean_ms: float | None = None

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """The share of the window's prompt tokens the prefix cache served."""
        if self.prefix_cache_queries and self.prefix_cache_hits is not None:
            return self.prefix_cache_hits / self.prefix_cache_queries
        return None

    def timing(self, part: str) -> ServerTiming | None:
        """One of LATENCIES' figures on the server's clock."""
        return {"ttft": self.ttft, "per_token": self.per_token, "e2e": self.e2e,
                "queue": self.queue}[part]  # fmt: skip

    def client_mean_ms(self, part: str) -> float | None:
        """The client's mean of one of LATENCIES over the same requests (queue: none)."""
        return {"ttft": self.client_ttft_mean_ms, "per_token": self.client_per_token_mean_ms,
                "e2e": self.client_e2e_mean_ms}.get(part)  # fmt: skip

    def outside_ms(self, part: str) -> float | None:
        """The client's mean minus the server's, over the same requests: what the
        server's clock leaves out (the network, the client, the server's HTTP front end
        before it stamps a request's arrival and after it has a token)."""
        timing, client = self.timing(part), self.client_mean_ms(part)
        if timing is None or timing.mean_ms is None or client is None:
            return None
        return client - timing.mean_ms


# The server's latencies a result keeps, by field, with the name a reader is shown
LATENCIES = {"ttft": "TTFT", "per_token": "TPOT", "e2e": "end-to-end", "queue": "queue"}
