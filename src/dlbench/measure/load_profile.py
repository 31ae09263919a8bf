"""How load is put on an OpenAI-compatible server, as the peer clients (vLLM's
`bench serve`, GuideLLM, AIPerf) name the profiles:

- synchronous: one request at a time, the next when the last has ended;
- concurrency N: N users, each sending its next request when its last has ended
  (a closed loop);
- rate R: requests sent at seeded random times, R per second on average, whatever
  the server does (an open loop). The gaps are gamma-distributed with shape
  `burstiness` and mean 1/R: 1 is a Poisson process, below 1 burstier, above 1 more
  even (vLLM's definition).

An open loop's TTFT and end-to-end latency count from each request's scheduled
arrival (the `schedule` clock), as MLPerf LoadGen times its queries: a client that
sends late adds its own delay to what a user arriving on time would wait, instead
of hiding it (coordinated omission); how late each went out is kept apart (the send
lag). `--latency-clock send` counts from the send instead, as vLLM's `bench serve`
does. A closed loop has no schedule: a user sends when its last answer ends, and its
latencies count from the send.

Plain data: the parent checks a case's profile with it, the worker drives it
(worker.endpoint_load).
"""

from __future__ import annotations

from dataclasses import dataclass

SYNCHRONOUS, CONCURRENCY, RATE = "synchronous", "concurrency", "rate"
PROFILES = (SYNCHRONOUS, CONCURRENCY, RATE)
SCHEDULE, SEND = "schedule", "send"
LATENCY_CLOCKS = (SCHEDULE, SEND)
# Burstiness where none is given: Poisson arrivals, as MLPerf's server scenario and
# every peer client default to
POISSON = 1.0


@dataclass(frozen=True)
class LoadProfile:
    kind: str
    concurrency: int = 1
    rate: float | None = None  # requests per second (RATE)
    burstiness: float = POISSON

    def __post_init__(self) -> None:
        if self.kind not in PROFILES:
            raise ValueError(f"unknown load profile {self.kind!r}; allowed: {', '.join(PROFILES)}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency {self.concurrency}; allowed: 1 or more")
        if self.kind == RATE and (self.rate is None or not self.rate > 0):
            raise ValueError(f"rate {self.rate}; allowed: a number of requests/s above 0")
        if not self.burstiness > 0:
            raise ValueError(f"burstiness {self.burstiness:g}; allowed: above 0 (1: Poisson)")

    @classmethod
    def of(cls, concurrency: int | None, rate: float | None,
           burstiness: float | None) -> LoadProfile:  # fmt: skip
        """The profile a case's options ask for: a rate, else a concurrency, else
        synchronous (the plan refuses both at once)."""
        steadiness = POISSON if burstiness is None else burstiness
        if rate is not None:
            return cls(RATE, rate=rate, burstiness=steadiness)
        if concurrency is not None:
            return cls(CONCURRENCY, concurrency=concurrency)
        return cls(SYNCHRONOUS)

    def describe(self) -> str:
        if self.kind == CONCURRENCY:
            return f"concurrency {self.concurrency}"
        if self.kind == RATE:
            return f"{self.rate:g} requests/s (burstiness {self.burstiness:g})"
        return SYNCHRONOUS


def latency_clock(profile: LoadProfile, asked: str | None = None) -> str:
    """Where a load's latencies count from: an open loop's schedule unless `asked`
    says the send; a closed loop's send (it has no schedule)."""
    if profile.kind != RATE:
        return SEND
    return asked or SCHEDULE
