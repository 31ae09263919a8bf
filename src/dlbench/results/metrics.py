"""The one table of metrics: what each is called, its unit, which way is better,
how to read its value from a Result, and how a --repeat result merges it from
its processes.

Study tables, `compare --metric`, leaderboards, the terminal table, the HTML
report, the CSV columns, the plots and results.repeats all read metrics from
here; a new metric is one entry in METRICS.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from dlbench.errors import UserError
from dlbench.measure.server_counters import ServerCounters
from dlbench.results.ceilings import efficiency_in_run
from dlbench.results.decode_bound import achieved_decode_gbps, decode_bound
from dlbench.results.records import TIME_TO_TRAIN_KEY, Result, Run
from dlbench.results.roofline_bound import achieved_prefill_gflops, prefill_bound
from dlbench.results.scaling import scaling_in_run

Reader = Callable[[Result], float | None]
# A value computed when read from the result and its run (the run's ceilings, the
# same case in one process): derived, so never stored in the result
RunReader = Callable[[Result, Run], float | None]
# A merged value written into the merged Result (which is returned, the input untouched)
Put = Callable[[Result, float | None], Result]


class Merge(Enum):
    """How a result merged from its --repeat processes gets a metric (results.repeats)."""

    # The median over the processes used for the headline, when every one of them has
    # a value (kept in its summary under `process_key`); else the newest one's stands.
    MEDIAN_OF_PROCESSES = "median of the processes"
    # Read from the used processes' samples pooled: a p99 from many more samples.
    POOLED = "from the pooled samples"
    # The merged throughput times the work per sample (`put` is given the throughput).
    FROM_THROUGHPUT = "from the merged throughput"
    # The newest measured process's value stands (a study computes the rest).
    NOT_MERGED = "the newest process's"


@dataclass(frozen=True)
class Metric:
    key: str  # the name `compare --metric` and `--by` take, and plot files carry
    title: str
    unit: str
    column: str  # short header in tables, and the CSV column
    higher_is_better: bool
    # None for a metric a study computes from several results (it/s, speed-ups), or
    # one read with its run (`in_run`)
    value: Reader | None = None
    # The field of a --repeat process summary (results.repeats) holding this
    # metric for one process: compare's unit of replication. None: not kept.
    process_key: str | None = None
    merge: Merge = Merge.NOT_MERGED
    # Where MEDIAN_OF_PROCESSES and FROM_THROUGHPUT write the merged value
    put: Put | None = None
    # For a value derived from the result and its run: read() passes the run
    in_run: RunReader | None = None

    def __post_init__(self) -> None:
        # checked when the table is built: a rule short of what it needs would
        # otherwise fail only when a --repeat run merges its first processes
        if self.merge is Merge.MEDIAN_OF_PROCESSES and self.process_key is None:
            raise ValueError(f"metric {self.key}: a median of processes needs a process_key")
        if self.merge in (Merge.MEDIAN_OF_PROCESSES, Merge.FROM_THROUGHPUT) and self.put is None:
            raise ValueError(f"metric {self.key}: {self.merge.value} needs a put")

    def better(self, a: float, b: float) -> float:
        """The better of two values of this metric."""
        return max(a, b) if self.higher_is_better else min(a, b)


def _latency(statistic: str) -> Reader:
    return lambda r: getattr(r.latency_ms, statistic) if r.latency_ms else None


def _training(name: str) -> Reader:
    """A number of a time-to-train result (details.training)."""
    return lambda r: stored_number(getattr(r.details.training, name, None))


def _timeline(key: str) -> Reader:
    """A number of the timeline's summary over the measured region."""

    def read(result: Result) -> float | None:
        timeline = result.details.timeline
        summary = timeline.summary if timeline else None
        return stored_number(getattr(summary, key) if summary else None)

    return read


def _energy(name: str) -> Reader:
    """A number of the result's energy reading (None where it was unmeasurable)."""
    return lambda r: stored_number(getattr(r.details.energy, name, None))


def energy_unmeasurable(result: Result) -> str | None:
    """Why a result has no energy reading, as it recorded it (None: it has one, or
    it predates energy readings)."""
    return result.details.energy.unmeasurable if result.details.energy else None


def _generation(name: str) -> Reader:
    """A number of a text-generation result (details.generation)."""
    return lambda r: stored_number(getattr(r.details.generation, name, None))


def _generation_metric(key: str, title: str, unit: str, column: str, higher: bool,
                       field_name: str, merged: bool = False) -> Metric:  # fmt: skip
    """A text-generation metric; `merged`: a --repeat result takes the median of its
    processes' values (the headline figures), else the newest process's."""
    if not merged:
        return Metric(key, title, unit, column, higher, _generation(field_name))
    return Metric(key, title, unit, column, higher, _generation(field_name),
                  process_key=field_name, merge=Merge.MEDIAN_OF_PROCESSES,
                  put=_put_into("generation", field_name))  # fmt: skip


def _loadgen_latency(percentile: str) -> Reader:
    """A latency percentile as LoadGen measured it (from each query's scheduled arrival)."""

    def read(result: Result) -> float | None:
        loadgen = result.details.loadgen
        return stored_number(loadgen.latency_ms.get(percentile) if loadgen else None)

    return read


def _peak_qps(result: Result) -> float | None:
    return stored_number(result.details.loadgen.peak_qps if result.details.loadgen else None)


def _check(name: str) -> Reader:
    """A number of the output check (details.check): an int8 result's against fp32
    (worker.quantized_check)."""
    return lambda r: stored_number(getattr(r.details.check, name, None))


def stored_number(value: object) -> float | None:
    """A float of a stored number; None for none."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _efficiency(result: Result, run: Run) -> float | None:
    found = efficiency_in_run(result, run) or {}
    value = found.get("fraction")
    return float(value) if isinstance(value, int | float) else None


def _decode_bound(name: str) -> RunReader:
    """A figure of the result's decode against the memory-bandwidth bound."""

    def read(result: Result, run: Run) -> float | None:
        bound = decode_bound(result, run)
        return stored_number(getattr(bound, name)) if bound is not None else None

    return read


def _prefill_bound(name: str) -> RunReader:
    """A figure of the result's prefill against the compute bound."""

    def read(result: Result, run: Run) -> float | None:
        bound = prefill_bound(result, run)
        return stored_number(getattr(bound, name)) if bound is not None else None

    return read


def _client(name: str) -> Reader:
    """A figure of the endpoint client's own health over the load (details.endpoint.client)."""

    def read(result: Result) -> float | None:
        load = result.details.endpoint
        return stored_number(getattr(load.client, name)) if load and load.client else None

    return read


def _scaling(result: Result, run: Run) -> float | None:
    found = scaling_in_run(result, run) or {}
    value = found.get("scaling_efficiency")
    return float(value) if isinstance(value, int | float) else None


def _first_step_s(result: Result) -> float | None:
    return result.first_call_ms / 1000.0 if result.first_call_ms is not None else None


def _put_median_ms(result: Result, value: float | None) -> Result:
    stats = result.latency_ms
    if stats is None or value is None:
        return result
    return replace(result, latency_ms=replace(stats, median=value))


def _put_throughput(result: Result, value: float | None) -> Result:
    return replace(result, throughput=value)


def _put_cpu_percent(result: Result, value: float | None) -> Result:
    return replace(result, cpu_percent=value)


def _per_second(rate: float | None, work: float | None) -> float | None:
    """A rate in G/s from a throughput: samples/s times the work per sample."""
    return rate * work / 1e9 if work and rate else None


def _put_gflops(result: Result, rate: float | None) -> Result:
    return replace(result, gflops=_per_second(rate, result.flops_per_sample))


def _put_gbps(result: Result, rate: float | None) -> Result:
    return replace(result, gbps=_per_second(rate, result.bytes_per_sample))


def _put_into(part: str, name: str) -> Put:
    """Into one typed part of the result's details (its time-to-train record, its
    energy reading), where it has that part."""

    def put(result: Result, value: float | None) -> Result:
        record = getattr(result.details, part)
        if record is None:
            return result
        details = replace(result.details, **{part: replace(record, **{name: value})})
        return replace(result, details=details)

    return put


def server_counters(result: Result) -> ServerCounters | None:
    """The server's own counters over the result's window, where they were read."""
    load = result.details.endpoint
    server = load.server if load is not None else None
    return server if server is not None and server.unread is None else None


def _server(read_value: Callable[[ServerCounters], float | None]) -> Reader:
    """A figure of the server's own counters (details.endpoint.server)."""

    def read(result: Result) -> float | None:
        server = server_counters(result)
        return stored_number(read_value(server)) if server is not None else None

    return read


def _server_mean(part: str) -> Callable[[ServerCounters], float | None]:
    """The window's exact mean of one of the server's latencies (ttft, per_token, ...)."""
    return lambda server: getattr(server.timing(part), "mean_ms", None)


def _endpoint_metric(key: str, title: str, unit: str, column: str, field_name: str) -> Metric:
    """A server's rate under load (details.endpoint): higher is better, and a --repeat
    result takes the median of its processes'."""
    return Metric(key, title, unit, column, True,
                  lambda r: stored_number(getattr(r.details.endpoint, field_name, None)),
                  process_key=field_name, merge=Merge.MEDIAN_OF_PROCESSES,
                  put=_put_into("endpoint", field_name))  # fmt: skip


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric(
            "latency",
            "Latency (median)",
            "ms",
            "median ms",
            False,
            _latency("median"),
            process_key="median_ms",
            merge=Merge.MEDIAN_OF_PROCESSES,
            put=_put_median_ms,
        ),
        Metric(
            "p99",
            "Latency (99th percentile)",
            "ms",
            "p99 ms",
            False,
            _latency("p99"),
            process_key="p99_ms",
            merge=Merge.POOLED,
        ),
        Metric(
            "throughput",
            "Throughput",
            "samples/s",
            "samples/s",
            True,
            lambda r: r.throughput,
            process_key="throughput",
            merge=Merge.MEDIAN_OF_PROCESSES,
            put=_put_throughput,
        ),
        Metric(
            "cpu",
            "CPU use",
            "% of one core",
            "CPU %",
            False,
            lambda r: r.cpu_percent,
            process_key="cpu_percent",
            merge=Merge.MEDIAN_OF_PROCESSES,
            put=_put_cpu_percent,
        ),
        Metric("memory", "Memory (peak RSS)", "MB", "RSS MB", False, lambda r: r.peak_rss_mb),
        Metric("first_call", "First call", "ms", "1st call ms", False, lambda r: r.first_call_ms),
        Metric(
            "first_step",
            "First step (compile and allocation)",
            "s",
            "first step s",
            False,
            _first_step_s,
        ),
        Metric(
            "gflops",
            "Compute rate",
            "GFLOP/s",
            "GFLOP/s",
            True,
            lambda r: r.gflops,
            merge=Merge.FROM_THROUGHPUT,
            put=_put_gflops,
        ),
        Metric(
            "gbps",
            "Memory bandwidth achieved",
            "GB/s",
            "GB/s",
            True,
            lambda r: r.gbps,
            merge=Merge.FROM_THROUGHPUT,
            put=_put_gbps,
        ),
        Metric(
            "max_abs_diff",
            "Largest difference from the reference",
            "",
            "max |diff|",
            False,
            lambda r: r.max_abs_diff,
        ),
        Metric(
            "time_to_train",
            "Time to train",
            "s",
            "train s",
            False,
            _training(TIME_TO_TRAIN_KEY),
            process_key=TIME_TO_TRAIN_KEY,
            merge=Merge.MEDIAN_OF_PROCESSES,
            put=_put_into("training", TIME_TO_TRAIN_KEY),
        ),
        Metric(
            "steady_throughput",
            "Training throughput after epoch 1 (no compilation)",
            "samples/s",
            "steady samples/s",
            True,
            _training("steady_samples_per_s"),
        ),
        Metric(
            "final_accuracy",
            "Test accuracy reached",
            "fraction",
            "accuracy",
            True,
            _training("final_accuracy"),
        ),
        Metric(
            "time_to_target",
            "Time to target accuracy",
            "s",
            "to target s",
            False,
            _training("time_to_target_s"),
        ),
        Metric(
            "energy",
            "Energy per sample (the device's own counter: NVML or RAPL)",
            "J",
            "J/sample",
            False,
            _energy("joules_per_sample"),
            process_key="joules_per_sample",
            merge=Merge.MEDIAN_OF_PROCESSES,
            put=_put_into("energy", "joules_per_sample"),
        ),
        Metric(
            "power",
            "Mean power while measured (whole device)",
            "W",
            "W",
            False,
            _energy("mean_power_w"),
        ),
        Metric(
            "agreement",
            "Agreement of the int8 outputs with fp32 (top-1, thresholded, or cosine)",
            "fraction",
            "int8 agreement",
            True,
            _check("agreement"),
        ),
        Metric(
            "sqnr",
            "Signal-to-quantization-noise ratio of the int8 outputs against fp32",
            "dB",
            "int8 SQNR dB",
            True,
            _check("sqnr_db"),
        ),
        Metric(
            "peak_qps",
            "Peak server QPS within the latency bound (MLPerf LoadGen)",
            "QPS",
            "peak QPS",
            True,
            _peak_qps,
        ),
        Metric(
            "loadgen_p90",
            "90th percentile latency, as LoadGen measured it",
            "ms",
            "LoadGen p90 ms",
            False,
            _loadgen_latency("90"),
        ),
        Metric(
            "loadgen_p99",
            "99th percentile latency, as LoadGen measured it",
            "ms",
            "LoadGen p99 ms",
            False,
            _loadgen_latency("99"),
        ),
        # Text generation (docs/guides/llm.md defines each as the field does)
        _generation_metric(
            "ttft",
            "Time to first token (median)",
            "ms",
            "TTFT ms",
            False,
            "ttft_p50_ms",
            merged=True,
        ),
        _generation_metric(
            "ttft_p90",
            "Time to first token (90th percentile)",
            "ms",
            "TTFT p90 ms",
            False,
            "ttft_p90_ms",
        ),
        _generation_metric(
            "ttft_p99",
            "Time to first token (99th percentile)",
            "ms",
            "TTFT p99 ms",
            False,
            "ttft_p99_ms",
        ),
        _generation_metric(
            "tpot",
            "Time per output token after the first (median)",
            "ms",
            "TPOT ms",
            False,
            "tpot_p50_ms",
            merged=True,
        ),
        _generation_metric(
            "tpot_p90",
            "Time per output token (90th percentile)",
            "ms",
            "TPOT p90 ms",
            False,
            "tpot_p90_ms",
        ),
        _generation_metric(
            "tpot_p99",
            "Time per output token (99th percentile)",
            "ms",
            "TPOT p99 ms",
            False,
            "tpot_p99_ms",
        ),
        _generation_metric(
            "itl_p50", "Inter-token latency (median)", "ms", "ITL ms", False, "itl_p50_ms"
        ),
        _generation_metric(
            "itl_p99",
            "Inter-token latency (99th percentile)",
            "ms",
            "ITL p99 ms",
            False,
            "itl_p99_ms",
        ),
        _generation_metric(
            "e2e_p99",
            "End-to-end generation latency (99th percentile)",
            "ms",
            "e2e p99 ms",
            False,
            "e2e_p99_ms",
        ),
        _generation_metric(
            "prefill_tps",
            "Prefill tokens per second (batch x isl / TTFT)",
            "tokens/s",
            "prefill tok/s",
            True,
            "prefill_tokens_per_s",
        ),
        _generation_metric(
            "decode_tps",
            "Decode tokens per second, after the first token",
            "tokens/s",
            "decode tok/s",
            True,
            "decode_tokens_per_s",
            merged=True,
        ),
        _generation_metric(
            "output_tps",
            "Output tokens per second (batch x osl / end-to-end)",
            "tokens/s",
            "output tok/s",
            True,
            "output_tokens_per_s",
            merged=True,
        ),
        _generation_metric(
            "kv_cache",
            "KV cache of every position (isl + osl)",
            "MB",
            "KV cache MB",
            False,
            "kv_cache_mb",
        ),
        _generation_metric(
            "gpu_memory",
            "Peak GPU memory while generating (weights, KV cache, activations)",
            "MB",
            "GPU MB",
            False,
            "device_peak_mb",
        ),
        _generation_metric(
            "energy_per_token",
            "Energy per output token (NVML or RAPL)",
            "J",
            "J/token",
            False,
            "energy_per_output_token_j",
        ),
        # Decode against the memory-bandwidth bound (results.decode_bound)
        Metric(
            "decode_gbps",
            "Decode bandwidth: the bytes a step must read over the median TPOT",
            "GB/s",
            "decode GB/s",
            True,
            achieved_decode_gbps,
        ),
        Metric(
            "mbu",
            "Decode's share of the memory ceiling (measured, else the datasheet's)",
            "fraction",
            "MBU",
            True,
            in_run=_decode_bound("mbu"),
        ),
        Metric(
            "decode_bound",
            "Decode bound: the memory ceiling over a step's bytes, times the batch",
            "tokens/s",
            "decode bound tok/s",
            True,
            in_run=_decode_bound("batch_bound_tokens_per_s"),
        ),
        # Prefill against the compute bound (results.roofline_bound)
        Metric(
            "prefill_gflops",
            "Prefill compute rate: one prefill's FLOPs over the median TTFT",
            "GFLOP/s",
            "prefill GFLOP/s",
            True,
            achieved_prefill_gflops,
        ),
        Metric(
            "mfu",
            "Prefill's share of the GEMM ceiling at its precision (measured, else the datasheet's)",
            "fraction",
            "MFU",
            True,
            in_run=_prefill_bound("mfu"),
        ),
        Metric(
            "prefill_bound",
            "Prefill bound: the GEMM ceiling over a prefill's FLOPs, in prompt tokens",
            "tokens/s",
            "prefill bound tok/s",
            True,
            in_run=_prefill_bound("bound_tokens_per_s"),
        ),
        # An OpenAI-compatible server under load (details.endpoint)
        _endpoint_metric(
            "goodput",
            "Goodput: requests/s within both SLO bounds",
            "req/s",
            "goodput/s",
            "goodput_per_s",
        ),
        _endpoint_metric(
            "request_rate",
            "Requests answered whole per second",
            "req/s",
            "requests/s",
            "requests_per_s",
        ),
        _endpoint_metric(
            "server_tps",
            "Output tokens per second, all requests",
            "tok/s",
            "server tok/s",
            "output_tokens_per_s",
        ),
        Metric(
            "peak_load",
            "Highest load whose SLOs held (--find-peak)",
            "load",
            "peak load",
            True,
            lambda r: stored_number(r.details.endpoint.peak) if r.details.endpoint else None,
        ),
        # The server's own counters over the window (details.endpoint.server)
        Metric(
            "server_ttft",
            "Time to first token, mean, on the server's clock (its /metrics)",
            "ms",
            "server TTFT ms",
            False,
            _server(_server_mean("ttft")),
        ),
        Metric(
            "server_tpot",
            "Time per output token, mean, on the server's clock (its /metrics)",
            "ms",
            "server TPOT ms",
            False,
            _server(_server_mean("per_token")),
        ),
        Metric(
            "server_e2e",
            "End-to-end request latency, mean, on the server's clock (its /metrics)",
            "ms",
            "server e2e ms",
            False,
            _server(_server_mean("e2e")),
        ),
        Metric(
            "server_queue",
            "Time waiting in the server's queue, mean (its /metrics)",
            "ms",
            "queue ms",
            False,
            _server(_server_mean("queue")),
        ),
        Metric(
            "ttft_outside_server",
            "Client TTFT minus the server's, means: transport, client, HTTP front end",
            "ms",
            "TTFT outside ms",
            False,
            _server(lambda server: server.outside_ms("ttft")),
        ),
        Metric(
            "prefix_hit_rate",
            "Share of prompt tokens the server's prefix cache served",
            "fraction",
            "prefix hits",
            True,
            _server(lambda server: server.prefix_cache_hit_rate),
        ),
        Metric(
            "kv_cache_peak",
            "Peak KV-cache use, as a fraction of the server's cache (sampled)",
            "fraction",
            "KV peak",
            False,
            _server(lambda server: server.kv_cache.peak if server.kv_cache else None),
        ),
        Metric(
            "preemptions",
            "Requests the server preempted to make room in its KV cache",
            "requests",
            "preemptions",
            False,
            _server(lambda server: server.preemptions),
        ),
        # The endpoint client's own health over the load (measure.client_health)
        Metric(
            "client_lag_p99",
            "The client's event-loop lag, 99th percentile (how late its timers fired)",
            "ms",
            "client lag p99 ms",
            False,
            _client("loop_lag_p99_ms"),
        ),
        Metric(
            "client_cpu",
            "The client's CPU over the load, busiest process, as a share of one core",
            "fraction",
            "client CPU",
            False,
            _client("cpu_share"),
        ),
        Metric(
            "client_chunks",
            "Chunks the client took in per second, all its processes",
            "chunks/s",
            "client chunks/s",
            True,
            _client("chunks_per_s"),
        ),
        Metric(
            "load_avg",
            "Mean load average while measured",
            "load",
            "load avg",
            False,
            _timeline("load_avg_mean"),
        ),
        # Computed by the studies from several results (no single-result reader).
        Metric("its", "Iterations per second (the article's unit)", "it/s", "it/s", True),
        # A table of picks, each row in the unit of its own measure
        Metric("pick", "Which to pick", "", "value", True),
        Metric(
            "efficiency",
            "Fraction of the measured ceiling",
            "fraction",
            "efficiency",
            True,
            in_run=_efficiency,
        ),
        Metric(
            "scaling",
            "DDP scaling efficiency: N processes' throughput over N times one process's",
            "fraction",
            "scaling",
            True,
            in_run=_scaling,
        ),
        Metric("gpu_speedup", "GPU speed-up over CPU", "x", "GPU speed-up", True),
    )
}
# What `compare` and `rerun` offer: metrics a measured case has (energy where
# the device has a counter; pairs without one are listed as not comparable).
COMPARABLE = ("latency", "p99", "throughput", "cpu", "memory", "energy", "power",
              "ttft", "tpot", "decode_tps", "output_tps", "goodput", "request_rate",
              "server_tps", "server_ttft", "server_tpot", "server_e2e",
              "ttft_outside_server")  # fmt: skip
# CSV columns beyond the Result's own fields: metrics read from its details, and
# those computed with its run.
CSV_METRICS = (
    "agreement",
    "sqnr",
    "peak_qps",
    "loadgen_p90",
    "loadgen_p99",
    "time_to_train",
    "steady_throughput",
    "final_accuracy",
    "time_to_target",
    "ttft",
    "ttft_p90",
    "ttft_p99",
    "tpot",
    "tpot_p90",
    "tpot_p99",
    "itl_p50",
    "itl_p99",
    "e2e_p99",
    "prefill_tps",
    "decode_tps",
    "output_tps",
    "kv_cache",
    "gpu_memory",
    "energy_per_token",
    "decode_gbps",
    "mbu",
    "decode_bound",
    "prefill_gflops",
    "mfu",
    "prefill_bound",
    "goodput",
    "request_rate",
    "server_tps",
    "peak_load",
    "server_ttft",
    "server_tpot",
    "server_e2e",
    "server_queue",
    "ttft_outside_server",
    "prefix_hit_rate",
    "kv_cache_peak",
    "preemptions",
    "client_lag_p99",
    "client_cpu",
    "client_chunks",
    "load_avg",
    "energy",
    "power",
    "efficiency",
    "scaling",
)


def read(metric: Metric, result: Result, run: Run | None = None) -> float | None:
    """The metric's value for one result (None where it has none). A metric computed
    with the result's run needs `run`: without it, it has no value."""
    if metric.in_run is not None:
        return metric.in_run(result, run) if run is not None else None
    return metric.value(result) if metric.value is not None else None


def metric(key: str, allowed: Sequence[str] = COMPARABLE) -> Metric:
    """The metric called `key`, or a UserError listing those allowed here."""
    if key not in allowed:
        raise UserError(f"unknown metric {key!r}; allowed: {', '.join(allowed)}")
    return METRICS[key]


def with_rates(result: Result) -> Result:
    """`result` with every rate that follows its throughput (GFLOP/s, GB/s: the
    Merge.FROM_THROUGHPUT metrics) put from it: a measured result, a --repeat
    merge and a DDP group's summed rate all derive them by the one rule."""
    for each in METRICS.values():
        if each.merge is Merge.FROM_THROUGHPUT and each.put is not None:
            result = each.put(result, result.throughput)
    return result
