"""Token latencies of text generation, as the field defines them.

From each generation's clock readings (its start, and the moment each output
step's tokens existed on the host):

- TTFT, time to first token: start to the first output token;
- TPOT, time per output token: the rest of the generation over the tokens after
  the first, (end-to-end - TTFT) / (osl - 1), as vLLM's benchmark, GenAI-Perf
  and MLPerf (which excludes the first token) define it;
- ITL, inter-token latency: every gap between consecutive output tokens, the
  distribution TPOT is the mean of;
- end-to-end latency: start to the last output token.

Rates are per generation, every sequence of the batch counted: prefill tokens/s
(batch x isl / TTFT), decode tokens/s (batch x (osl - 1) / (end-to-end - TTFT)),
output tokens/s (batch x osl / end-to-end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from dlbench.measure.stats import percentile


@dataclass(frozen=True)
class TokenTimes:
    """One generation's clock: its start and each output step's time (perf_counter s)."""

    started_s: float
    token_times_s: Sequence[float]
    # Where a reading may cover several tokens (a server's streamed chunk), how many
    # the output held in all; None: one token per reading.
    output_tokens: int | None = None

    @property
    def ttft_s(self) -> float:
        return self.token_times_s[0] - self.started_s

    @property
    def e2e_s(self) -> float:
        return self.token_times_s[-1] - self.started_s

    @property
    def decode_s(self) -> float:
        """After the first token: the time its further tokens took."""
        return self.token_times_s[-1] - self.token_times_s[0]

    @property
    def tpot_s(self) -> float | None:
        tokens = self.output_tokens if self.output_tokens is not None else len(self.token_times_s)
        steps = tokens - 1
        return self.decode_s / steps if steps > 0 else None

    def gaps_s(self) -> list[float]:
        times = self.token_times_s
        return [later - earlier for earlier, later in pairwise(times)]


@dataclass(frozen=True)
class TokenLatencies:
    """Every timed generation's TTFT, TPOT and end-to-end latency, and all their gaps (s)."""

    ttft_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    e2e_s: list[float] = field(default_factory=list)
    itl_s: list[float] = field(default_factory=list)
    decode_s: list[float] = field(default_factory=list)


def token_latencies(generations: Sequence[TokenTimes]) -> TokenLatencies:
    """The latencies of each generation (a generation of one token has no TPOT)."""
    if any(not times.token_times_s for times in generations):
        raise ValueError("a generation produced no token")
    return TokenLatencies(
        ttft_s=[times.ttft_s for times in generations],
        tpot_s=[times.tpot_s for times in generations if times.tpot_s is not None],
        e2e_s=[times.e2e_s for times in generations],
        itl_s=[gap for times in generations for gap in times.gaps_s()],
        decode_s=[times.decode_s for times in generations],
    )


def percentiles_ms(values_s: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """p50, p90 and p99 in milliseconds (None for no values)."""
    if not values_s:
        return None, None, None
    ms = sorted(v * 1000.0 for v in values_s)
    return percentile(ms, 50), percentile(ms, 90), percentile(ms, 99)


def median_rate(tokens: float, durations_s: Sequence[float]) -> float | None:
    """`tokens` over the median duration: the median generation's rate."""
    if not durations_s or tokens <= 0:
        return None
    middle = percentile(sorted(durations_s), 50)
    return tokens / middle if middle > 0 else None
