"""A run's headline metrics in the formats continuous-benchmarking services read.

- github-action-benchmark's custom tools: a JSON array of {name, unit, value, range,
  extra}. The action takes one direction per file (its `tool`: customBiggerIsBetter
  or customSmallerIsBetter), so a run gives two arrays, one per direction.
- Bencher's BMF: {benchmark: {measure: {value, lower_value, upper_value}}}. Bencher's
  built-in measures are `latency` in ns and `throughput` in operations/s: dlbench's
  median latency and samples/s go there in those units; every other metric is a
  measure of its own, named by its key in the metrics table (its unit in the docs).

Each case is a benchmark named by its case label; a metric is written where the
result has it. Its bounds come from the run's own statistics: across the
processes of a --repeat result (the unit of replication) their lowest and highest
values; else, for latency, the 25th and 75th percentiles of the samples. A metric
with neither has no bounds rather than made-up ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from dlbench.atomic import write_atomic
from dlbench.measure.stats import percentile
from dlbench.results.metrics import METRICS, Metric, read, stored_number
from dlbench.results.records import Result, Run
from dlbench.untyped import JSONObject

# The metrics a CI service tracks per case, where the case has them
HEADLINE = ("throughput", "latency", "p99", "time_to_train", "ttft", "tpot", "decode_tps",
            "output_tps", "goodput", "peak_qps", "peak_load")  # fmt: skip
BIGGER, SMALLER = "customBiggerIsBetter", "customSmallerIsBetter"
# Bencher's built-in measures, and the factor from dlbench's unit to theirs
BENCHER_BUILT_IN = {"latency": ("latency", 1e6), "throughput": ("throughput", 1.0)}


@dataclass(frozen=True)
class Headline:
    case: str
    metric: Metric
    value: float
    bounds: tuple[float, float] | None


def headlines(run: Run) -> list[Headline]:
    """Every headline metric of every measured result of the run."""
    found = []
    for result in run.results:
        if not result.ok:
            continue
        for key in HEADLINE:
            metric = METRICS[key]
            value = read(metric, result, run)
            if value is not None:
                found.append(Headline(result.case.label(), metric, value, _bounds(metric, result)))
    return found


def github_action_benchmark(run: Run) -> dict[str, list[JSONObject]]:
    """{tool: entries}: the run's headline metrics split by direction, as the action's
    customBiggerIsBetter and customSmallerIsBetter tools each read one array."""
    by_tool: dict[str, list[JSONObject]] = {BIGGER: [], SMALLER: []}
    for headline in headlines(run):
        entry: JSONObject = {
            "name": f"{headline.case} - {headline.metric.title}",
            "unit": headline.metric.unit,
            "value": headline.value,
        }
        if headline.bounds is not None:
            low, high = headline.bounds
            entry["range"] = f"{low:.6g} - {high:.6g}"  # text: six digits, as printed
        entry["extra"] = f"run {run.id}, {_bounds_source(headline)}"
        by_tool[BIGGER if headline.metric.higher_is_better else SMALLER].append(entry)
    return by_tool


def bmf(run: Run) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format: a benchmark per case, a measure per headline metric."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for headline in headlines(run):
        slug, factor = BENCHER_BUILT_IN.get(headline.metric.key, (headline.metric.key, 1.0))
        measure = {"value": headline.value * factor}
        if headline.bounds is not None:
            low, high = headline.bounds
            measure["lower_value"], measure["upper_value"] = low * factor, high * factor
        out.setdefault(headline.case, {})[slug] = measure
    return out


def write_ci_format(run: Run, ci_format: str, path: Path) -> list[tuple[Path, str]]:
    """Write the run in `ci_format` at `path`; the files written, and what each is for."""
    if ci_format == "bmf":
        write_atomic(path, json.dumps(bmf(run), indent=2) + "\n")
        return [(path, "Bencher Metric Format (bencher run --adapter json --file ...)")]
    written = []
    for tool, entries in github_action_benchmark(run).items():
        direction = "bigger-is-better" if tool == BIGGER else "smaller-is-better"
        target = path.with_name(f"{path.stem}.{direction}{path.suffix or '.json'}")
        write_atomic(target, json.dumps(entries, indent=2) + "\n")
        written.append((target, f"github-action-benchmark with tool: '{tool}'"))
    return written


def _bounds(metric: Metric, result: Result) -> tuple[float, float] | None:
    processes = result.details.processes
    if processes is not None and metric.process_key is not None:
        key = metric.process_key
        values = [stored_number(s.values.get(key, getattr(s, key, None)))
                  for s in processes.summaries if s.used is not False]  # fmt: skip
        kept = [v for v in values if v is not None]
        if len(kept) > 1:
            return min(kept), max(kept)
    if metric.key == "latency" and len(result.samples_ms) > 1:
        ordered = sorted(result.samples_ms)
        return percentile(ordered, 25), percentile(ordered, 75)
    return None


def _bounds_source(headline: Headline) -> str:
    if headline.bounds is None:
        return "no bounds (one process, no samples)"
    if headline.metric.key == "latency":
        return "range: the processes' lowest and highest, or the samples' quartiles"
    return "range: the processes' lowest and highest"
