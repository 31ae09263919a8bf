"""Is a server saturated: does the queue of an open-loop run only grow?

Under a rate the server keeps, the requests in flight settle (Little's law: rate
x latency) after a ramp of one latency or so. Beyond it, every second adds
(rate - what it serves) x 1 s to the queue, and every request's latency grows
with it: the run's numbers then describe the length of the run, not the server.
GuideLLM found such runs reported as if valid (guidellm#242).

The test: over the later half of the arrivals so far (past the ramp), the number
in flight rises with time by Kendall's tau, strongly and with confidence, and has
grown by half within that half (a queue growing from nothing since the start
doubles there). A steady queue's count wanders up and down, which tau scores near
0; a burst that drains does not rise and hold.
"""

from __future__ import annotations

from collections.abc import Sequence

# Arrivals needed before the test says anything: tau's p-value needs some, and the
# first half of them is left out as the ramp.
MIN_ARRIVALS = 40
MIN_TAU = 0.7
MAX_P = 1e-3
GROWTH = 1.5
# A queue this short is no backlog, whatever its trend (a ramp of a few requests)
MIN_QUEUE = 8


def load_the_test() -> None:
    """Import the test's statistics (SciPy's) now, before a load whose queue is
    watched: queue_only_grows runs inside the load, where the import (0.6-1.6 s of
    CPU, nothing sent or timed meanwhile) would fall on a load near its peak. A
    client whose load has no arrival schedule never needs it, nor pays for it."""
    import scipy.stats  # noqa: F401  (imported for its side effect: loaded once)


def queue_only_grows(times_s: Sequence[float], in_flight: Sequence[int]) -> str | None:
    """Why the queue is judged to grow without bound, or None. `times_s` and
    `in_flight`: at each arrival, its time and the requests in flight then."""
    if len(in_flight) < MIN_ARRIVALS:
        return None
    half = len(in_flight) // 2
    later_t, later_n = times_s[half:], in_flight[half:]
    first, last = later_n[0], later_n[-1]
    if last < MIN_QUEUE or last < GROWTH * max(first, 1):
        return None
    # loaded before the load by load_the_test: a closed loop never gets here, and
    # SciPy's import at the top was every endpoint client's, at its start
    from scipy.stats import kendalltau

    tau, p_value = kendalltau(later_t, later_n)
    if not (tau >= MIN_TAU and p_value <= MAX_P):
        return None
    span = later_t[-1] - later_t[0]
    return (
        f"the requests in flight grew from {first} to {last} over {span:.3g} s "
        f"(Kendall's tau {tau:.2f}): the server does not keep this rate"
    )
