"""Generation-server cases: a decoder workload served under MLPerf LoadGen's server
scenario with token latencies (worker.token_serving).

Such a case is judged as MLPerf judges its LLM servers: TTFT and TPOT at a
percentile against --ttft-ms and --tpot-ms, not one latency bound for the whole
query, so its loop kind does not take --latency-bound-ms and --latency-percentile
(spec.loop_kinds; plan.validate refuses them). Where no
bound is given, MLPerf's Server bounds for Llama-3.1-8B apply (mlperf.conf:
llama3_1-8b.Server ttft_latency 2000 ms, tpot_latency 100 ms). `streams` is the most
requests served at once: generators one request at a time each, or the sequences
a continuous-batching scheduler runs in a step.
"""

from __future__ import annotations

import math
from typing import TypeGuard

from dlbench.errors import UserError
from dlbench.spec.case import Case
from dlbench.spec.case_parts import (
    DEFAULT_SLO_PERCENTILE,
    LOADGEN_PERCENTILES,
    LOADGEN_PERCENTILES_TEXT,
    MAX_STREAMS,
)
from dlbench.spec.loads import GenerationServerLoad
from dlbench.spec.loop_kinds import case_load
from dlbench.workloads.memory import generation_server_need, require_room

DEFAULT_TTFT_MS = 2000.0
DEFAULT_TPOT_MS = 100.0
# A continuous-batching engine's most sequences per step where none is given: enough
# for the queue a CPU's peak rate builds, without a KV cache of GBs for small models
DEFAULT_BATCHED_SEQUENCES = 32
SERVER_HOW = "--scenario server with --target-qps Q or --find-peak"
MAX_BOUND_MS = 3_600_000.0


def refuse_other_scenarios(case: Case) -> None:
    """A generation case under LoadGen runs its server scenario only: multi-stream, or
    --loadgen without --scenario server, is refused. Single-stream and offline describe
    the generation loop itself (one sequence, or a batch of them, generated whole), as
    its results record them, so a result's case plans again (`dlbench rerun`)."""
    if case.scenario == "multi-stream" or (case.driven_by_loadgen and case.scenario != "server"):
        raise UserError(f"a generation workload runs under LoadGen in the server scenario only "
                        f"({SERVER_HOW}); otherwise its generations are timed whole, one "
                        "sequence or a batch at a time")  # fmt: skip


def require_offline_batch(case: Case) -> None:
    """Offline generation is a batch of sequences generated together: given without a
    batch above 1, it would record one sequence as offline, a case apart from the same
    generation run without --scenario."""
    if case.scenario != "offline" or (case.batch_size or 0) >= 2:
        return
    given = "" if case.batch_size is None else f"; batch size {case.batch_size} is one sequence"
    raise UserError(f"scenario offline on {case.workload} generates a batch of sequences "
                    f"together{given}: give -b N, N of 2 or more, or no --scenario")  # fmt: skip


def validate_token_server(
    case: Case, continuous_batching: bool, cpu_streams: int, max_streams: int = MAX_STREAMS
) -> Case:
    """A generation case under LoadGen: the server scenario (its rate checked by
    plan.server_load_checks, as every server case's); returns it with its bounds, percentile and
    streams filled in. `cpu_streams`: the streams an
    engine without a scheduler of its own gets where none is given; `max_streams`: the
    most the engine holds."""
    refuse_other_scenarios(case)
    if case.batch_size not in (None, 1):
        raise UserError(f"a server query is one prompt; batch size {case.batch_size} is not "
                        "taken (the engine batches requests itself: --streams)")  # fmt: skip
    osl = dict(case.params).get("osl")
    if isinstance(osl, int) and osl < 2:
        raise UserError(f"--param osl={osl}: a server's TPOT needs at least 2 output tokens")
    load = case_load(case, GenerationServerLoad)
    ttft = _bound("--ttft-ms", DEFAULT_TTFT_MS if load.ttft_ms is None else load.ttft_ms)
    tpot = _bound("--tpot-ms", DEFAULT_TPOT_MS if load.tpot_ms is None else load.tpot_ms)
    percentile = DEFAULT_SLO_PERCENTILE if load.slo_percentile is None else load.slo_percentile
    if not _number(percentile) or percentile not in LOADGEN_PERCENTILES:
        raise UserError(f"invalid --slo-percentile {percentile!r} for LoadGen; it reports "
                        f"{LOADGEN_PERCENTILES_TEXT}")  # fmt: skip
    streams = load.streams
    if streams is None:
        streams = DEFAULT_BATCHED_SEQUENCES if continuous_batching else cpu_streams
    if not 1 <= streams <= max_streams:
        engine = f" on {case.framework!r}" if max_streams < MAX_STREAMS else ""
        raise UserError(f"invalid --streams {streams}{engine}; expected 1 to {max_streams}")
    require_room(generation_server_need(case, streams, continuous_batching))
    return case.replaced(
        loadgen=True,
        ttft_ms=ttft,
        tpot_ms=tpot,
        slo_percentile=float(percentile),
        streams=streams,
    )


def _bound(flag: str, value: object) -> float:
    """A bound LoadGen can hold: a number of ms above 0, at most an hour (LoadGen keeps
    it, and a whole query's ttft + tpot x osl, in integer nanoseconds)."""
    if not _number(value) or not 0 < float(value) <= MAX_BOUND_MS:
        raise UserError(f"invalid {flag} {value!r}; expected a number of ms above 0, "
                        f"up to {MAX_BOUND_MS:g}")  # fmt: skip
    return float(value)


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
