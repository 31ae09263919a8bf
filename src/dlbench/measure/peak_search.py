"""The highest load that still holds: a search by growth, then bisection, then a
confirming run.

Starting at `start`, the load grows by `growth` until a try fails; then the gap
between the highest passing load and the lowest failing one is halved until it is
within `precision` of the failing one (for whole loads, until they are adjacent);
the load found must pass a second time (a short run's percentile hangs on a few
slow requests), or the search goes on below it. With no passing load yet, the
load halves until one passes, or it gives up below `floor`, or where `give_up`
says no lower load can hold (a caller's own evidence: LoadGen's idle CPUs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class Try(Protocol):
    @property
    def holds(self) -> bool: ...


T = TypeVar("T", bound=Try)


@dataclass(frozen=True)
class Found(Generic[T]):
    tries: list[tuple[float, T]]  # every load tried, in order, with its outcome
    peak: float | None  # the highest load that held, confirmed or not; None: none held
    reported: T  # the confirming try, else the best passing, else the lowest tried
    note: str | None  # why the peak is not confirmed, where it is not


@dataclass(frozen=True)
class Search(Generic[T]):
    start: float
    floor: float
    whole: bool = False  # loads are whole numbers (a concurrency)
    growth: float = 2.0
    precision: float = 0.05
    max_tries: int = 12
    unit: str = ""  # written after a load in the notes (" QPS")
    # after a failed try with no load passed yet: why no lower load can hold, if none can
    # (from that try's outcome, a T: the type the caller's try gives)
    give_up: Callable[[float, T], str | None] | None = None
    # the highest load that can be tried (a client's own limit), and why: growth stops
    # there, and a load that holds there is the peak found, said to be that limit's
    ceiling: float | None = None
    ceiling_why: str = ""

    def run(self, try_at: Callable[[float], T]) -> Found[T]:
        tries: list[tuple[float, T]] = []
        low: float | None = None
        high: float | None = None
        load, confirming = self._rounded(self.start), False
        while len(tries) < self.max_tries:
            outcome = try_at(load)
            tries.append((load, outcome))
            if outcome.holds and confirming:
                return Found(tries, load, outcome, None)
            if outcome.holds and high is None and self._at_ceiling(load):
                return Found(tries, load, outcome, f"{load:.4g}{self.unit} held; no higher load "
                                                   f"can be tried: {self.ceiling_why}")  # fmt: skip
            if outcome.holds:
                low = load
            else:
                high = load if high is None else min(high, load)
                passed = [x for x, t in tries if t.holds and x < high]
                low = max(passed, default=None)
            if low is None and high is not None:
                why = self._hopeless(load, outcome)
                if why is not None:
                    return Found(tries, None, outcome, why)
            load, confirming = self._next(load, low, high)
        return self._unconfirmed(tries, high)

    def _next(self, load: float, low: float | None, high: float | None) -> tuple[float, bool]:
        if high is None:
            grown = load * self.growth
            return self._rounded(grown if self.ceiling is None else min(grown, self.ceiling)), False
        if low is None:
            return self._rounded(high / 2), False
        close = high - low <= 1 if self.whole else high - low <= self.precision * high
        if close:
            return low, True
        return self._rounded((low + high) / 2), False

    def _at_ceiling(self, load: float) -> bool:
        return self.ceiling is not None and load >= self._rounded(self.ceiling)

    def _hopeless(self, load: float, outcome: T) -> str | None:
        why = self.give_up(load, outcome) if self.give_up is not None else None
        if why is None and load / 2 < self.floor:
            why = f"no load down to {load:g}{self.unit} held"
        return why

    def _rounded(self, load: float) -> float:
        return float(max(1, math.floor(load))) if self.whole else load

    def _unconfirmed(self, tries: list[tuple[float, T]], high: float | None) -> Found[T]:
        passing = [(x, t) for x, t in tries if t.holds and (high is None or x < high)]
        if passing:
            load, outcome = max(passing, key=lambda pair: pair[0])
            return Found(tries, load, outcome, f"{load:.4g}{self.unit} held once, not "
                                               f"confirmed in {len(tries)} tries")  # fmt: skip
        load, outcome = min(tries, key=lambda pair: pair[0])
        return Found(tries, None, outcome, f"no load tried (down to {load:.3g}{self.unit}) held")


def alone_misses(ttft_ms: float | None, tpot_ms: float | None, ttft_bound_ms: float | None,
                 tpot_bound_ms: float | None) -> str | None:  # fmt: skip
    """Why no load can keep the SLOs where a request served alone (a warm-up's, one at a
    time: its TTFT and TPOT) already misses a bound; None where it keeps both. A
    search then needs one try to show it, not a descent to its floor."""
    if ttft_bound_ms is not None and ttft_ms is not None and ttft_ms > ttft_bound_ms:
        return (f"a request alone has its first token in {ttft_ms:.3g} ms, over the "
                f"{ttft_bound_ms:g} ms bound")  # fmt: skip
    if tpot_bound_ms is not None and tpot_ms is not None and tpot_ms > tpot_bound_ms:
        return (f"a request alone takes {tpot_ms:.3g} ms per output token, over the "
                f"{tpot_bound_ms:g} ms bound")  # fmt: skip
    return None
