"""Process-level replication: N worker processes of one case, merged into one Result.

Iterations inside one process are not independent (same allocation, same
caches, same minute of the machine's life); separate processes, spread over
the run's time, are. So with `--repeat N` a Result keeps each process's own
statistics (`details.processes`) and the samples of all of them pooled, and
its headline numbers come from the processes, each metric by the merge rule
its entry in results.metrics carries: the median of their medians, of their
throughputs, CPU use, energy per sample and time to train; the pooled samples
give a p99 from many more samples than one process has.

A process that another program disturbed (`interference`) or that stalled is
kept in the list but not used for the headline when clean processes exist;
the session runs such a process again, at most MAX_RETRIES times per case. A
process that fails fails the case (its error names the process); the measured
processes before it stay in the list.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from dlbench.measure.stats import summarize
from dlbench.results.details import Processes, ProcessSpread, ProcessSummary
from dlbench.results.flags import merged_flags
from dlbench.results.metrics import METRICS, Merge, Metric, read, with_rates
from dlbench.results.records import Result

DISTURBED = frozenset({"interference", "stalled"})
MAX_RETRIES = 2


def disturbed(result: Result) -> bool:
    return bool(DISTURBED & set(result.flags))


def processes(result: Result) -> tuple[ProcessSummary, ...]:
    """The per-process summaries a merged result keeps (none for a one-process result)."""
    found = result.details.processes
    return found.summaries if found is not None else ()


def slots_done(result: Result) -> int:
    """Repeats finished: a clean process ends its repeat; a disturbed one leaves it
    open for a re-run, until MAX_RETRIES re-runs were disturbed too."""
    listed = processes(result) or (summary_of(result),)
    done, tries = 0, 0
    for process in listed:
        tries += 1
        if not process.disturbed or tries > MAX_RETRIES:
            done, tries = done + 1, 0
    return done


def last_process_ok(result: Result) -> bool:
    listed = processes(result)
    return listed[-1].status == "ok" if listed else result.ok


def summary_of(result: Result) -> ProcessSummary:
    """What a merged result keeps of one process, its raw samples included, so a
    merge can be redone from the summaries alone (--resume continues from them):
    every metric that has a process_key (results.metrics), and the bookkeeping."""
    stats = result.latency_ms
    return ProcessSummary(
        status=result.status,
        error=result.error,
        started_at=result.started_at,
        values={m.process_key: read(m, result) for m in METRICS.values() if m.process_key},
        mean_ms=stats.mean if stats else None,
        n=stats.n if stats else 0,
        flags=result.flags,
        disturbed=disturbed(result),
        samples_ms=result.samples_ms,
    )


def add_process(merged: Result | None, process: Result) -> Result:
    """`merged` (the case's processes so far, or None) with one more process."""
    if merged is None:
        earlier: tuple[ProcessSummary, ...] = ()
    else:
        earlier = processes(merged) or (summary_of(merged),)
    # the newest measured process supplies what the processes share (case, details)
    base = process if process.ok or merged is None else merged
    combined = merge(base, (*earlier, summary_of(process)))
    if process.ok or merged is None:
        return combined
    # A process that failed after others measured fails the case: a crash is not
    # noise to outvote. The earlier processes stay in details.processes.
    which = f"process {len(earlier) + 1} of the case"
    return replace(
        combined, status=process.status, error=f"{which}: {process.error or process.status}"
    )


def merge(base: Result, summaries: tuple[ProcessSummary, ...]) -> Result:
    """One Result from its processes' summaries; `base` gives the shared fields and
    the values of metrics not merged. Each metric is merged by its own rule
    (results.metrics.Merge); results.flags judges the merged result."""
    details = replace(base.details, processes=Processes(summaries))
    measured = [p for p in summaries if p.status == "ok" and p.samples_ms]
    if not measured:
        return replace(base, details=details)
    clean = [p for p in measured if not p.disturbed]
    used = clean or measured
    summaries = tuple(replace(summary, used=summary in used) for summary in summaries)
    if len(summaries) == 1:
        # one process: the result is that process
        return replace(base, details=replace(details, processes=None))
    spread = _relative_spread(_values(METRICS["latency"], used) or [])
    details = replace(details, processes=Processes(summaries, ProcessSpread(spread, len(used))))
    pooled = tuple(s for p in used for s in p.samples_ms)
    # The pooled samples and their statistics (Merge.POOLED reads these); the other
    # rules then put their values over them, rates after the throughput they follow.
    merged = replace(
        base, latency_ms=summarize([s / 1000.0 for s in pooled]), samples_ms=pooled, details=details
    )
    for metric in (m for m in METRICS.values() if m.merge is Merge.MEDIAN_OF_PROCESSES):
        values = _values(metric, used)
        if values is not None and metric.put is not None:
            merged = metric.put(merged, statistics.median(values))
    merged = with_rates(merged)  # GFLOP/s and GB/s follow the merged throughput
    # results.flags judges the merged numbers; the processes' other flags carry over
    return replace(merged, flags=merged_flags(merged, [p.flags for p in used], spread))


def _values(metric: Metric, used: list[ProcessSummary]) -> list[float] | None:
    """The metric's value in each used process's summary; None unless every one has one,
    so a merged value always stands for the same processes as the headline."""
    values = [p.values.get(metric.process_key) for p in used] if metric.process_key else []
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return numbers if numbers and len(numbers) == len(values) else None


def headline_spread(result: Result) -> float | None:
    """The result's relative spread (IQR over median): between its processes' medians
    when several made it, else between its own samples; None without latencies."""
    found = result.details.processes
    if found is not None and found.spread is not None:
        return float(found.spread.median_ms_relative_iqr)
    stats = result.latency_ms
    if stats is None or stats.median <= 0:
        return None
    return stats.iqr / stats.median


def _relative_spread(values: list[float]) -> float:
    """IQR over median of the process medians (0 with fewer than two)."""
    if len(values) < 2:
        return 0.0
    ordered = sorted(values)
    middle = statistics.median(ordered)
    quartiles = statistics.quantiles(ordered, n=4, method="inclusive")
    return (quartiles[2] - quartiles[0]) / middle if middle > 0 else 0.0
