"""Prometheus exposition text read twice: what a server's counters and histograms
added between two readings.

The text is parsed by prometheus_client's own parser (the format has escaping,
exemplars and type lines enough to get wrong by hand). A reading keeps each
sample's values by name, one per label set: a server with several engines (vLLM's
data parallelism) or API processes reports a series for each, and a counter's
total is their sum. Samples labelled with another model than the served one are
left out, so a server of several models gives the served model's figures.

Over a window, a counter or a histogram's `_sum` and `_count` is the end's value
minus the start's, and so is each bucket's count. A percentile of those bucket
differences is estimated as Prometheus' `histogram_quantile` estimates it: the
rank q x count falls in the first bucket whose cumulative count reaches it, and
the value is interpolated linearly between that bucket's bounds (the first
bucket's lower bound is 0). In the open last bucket (+Inf) nothing bounds it
above, so the estimate is the bucket's lower bound and says so. A value that went
down (a server restarted in the window) makes the window unreadable.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from dlbench.measure.server_counters import BucketEstimate, ServerTiming

BUCKET, SUM, COUNT = "_bucket", "_sum", "_count"
MODEL_LABEL = "model_name"  # vLLM's and SGLang's label of the served model
PERCENTILES = (50.0, 90.0, 99.0)


class NotExposition(ValueError):
    """The text is not Prometheus exposition text."""


class CountersWentBack(ValueError):
    """A counter is lower at the window's end than at its start: the server restarted."""


@dataclass(frozen=True)
class Scrape:
    """One reading of /metrics: each sample name's values (one per label set kept),
    and each histogram's cumulative bucket counts by upper bound, summed over its
    label sets."""

    values: dict[str, tuple[float, ...]]
    buckets: dict[str, dict[float, float]]

    def total(self, name: str) -> float | None:
        values = self.values.get(name)
        return math.fsum(values) if values else None

    def highest(self, name: str) -> float | None:
        values = self.values.get(name)
        return max(values) if values else None

    def names(self) -> frozenset[str]:
        return frozenset(self.values) | frozenset(self.buckets)


def parse_scrape(text: str, model: str | None = None) -> Scrape:
    """A reading of exposition `text`, keeping the samples of `model` (and those that
    name no model); NotExposition where the text is not exposition text."""
    values: dict[str, list[float]] = defaultdict(list)
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = sample.labels
                if model is not None and labels.get(MODEL_LABEL, model) != model:
                    continue
                if sample.name.endswith(BUCKET) and "le" in labels:
                    buckets[sample.name.removesuffix(BUCKET)][float(labels["le"])] += sample.value
                else:
                    values[sample.name].append(sample.value)
    except ValueError as exc:  # the parser's one error for text it cannot read
        # its words quote the text: kept to one short line
        raise NotExposition(" ".join(str(exc).split())[:120]) from None
    kept = {name: tuple(found) for name, found in values.items()}
    return Scrape(kept, {name: dict(bounds) for name, bounds in buckets.items()})


def increase(start: Scrape, end: Scrape, name: str) -> float | None:
    """What a counter (a sample name's total) added over the window; None where
    either reading lacks it."""
    first, last = start.total(name), end.total(name)
    if first is None or last is None:
        return None
    if last < first:
        raise CountersWentBack(f"{name} went from {first:g} to {last:g}")
    return last - first


def histogram_window(start: Scrape, end: Scrape, name: str) -> ServerTiming | None:
    """A histogram in seconds over the window: its observations, their exact mean and
    bucket estimates of its percentiles, in ms; None where the server has no such
    histogram (or no bucket reading of it)."""
    count = increase(start, end, name + COUNT)
    total = increase(start, end, name + SUM)
    if count is None or total is None:
        return None
    buckets = bucket_increase(start.buckets.get(name, {}), end.buckets.get(name, {}), name)
    estimates = {q: bucket_quantile(q / 100, buckets) for q in PERCENTILES}
    return ServerTiming(
        metric=name,
        count=round(count),
        mean_ms=total / count * 1000.0 if count else None,
        p50=estimates[50.0],
        p90=estimates[90.0],
        p99=estimates[99.0],
    )


def ratio_window(start: Scrape, end: Scrape, seconds: str, count: str) -> ServerTiming | None:
    """A mean from a counter of seconds over a counter of events (llama.cpp keeps its
    times so, with no histogram): exact, with no percentiles."""
    spent, events = increase(start, end, seconds), increase(start, end, count)
    if spent is None or events is None:
        return None
    return ServerTiming(
        metric=f"{seconds} / {count}",
        count=round(events),
        mean_ms=spent / events * 1000.0 if events else None,
    )


def bucket_increase(start: dict[float, float], end: dict[float, float],
                    name: str) -> list[tuple[float, float]]:  # fmt: skip
    """Each bucket's cumulative count added over the window, by upper bound, in order;
    [] where the bounds differ between the readings (a server restarted with others)."""
    if set(start) != set(end):
        return []
    window = []
    for bound in sorted(end):
        added = end[bound] - start[bound]
        if added < 0:
            raise CountersWentBack(f"{name} bucket le={bound:g} went down")
        window.append((bound, added))
    return window


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> BucketEstimate | None:
    """The q-quantile (0 < q < 1) of a histogram given as (upper bound in s, cumulative
    count) in order, the last +Inf: histogram_quantile's estimate, in ms, with the
    bounds of its bucket. None where the histogram has no observation."""
    if not buckets or not math.isinf(buckets[-1][0]) or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(upper):
                return BucketEstimate(ms=lower * 1000.0, lower_ms=lower * 1000.0, upper_ms=None)
            share = (rank - below) / (cumulative - below) if cumulative > below else 1.0
            value = lower + (upper - lower) * share
            return BucketEstimate(value * 1000.0, lower * 1000.0, upper * 1000.0)
        lower, below = upper, cumulative
    return None  # cumulative counts that never reach the total: not a histogram
