"""What limits a text-generation or serving case: one verdict, and the figure that shows it.

Decided once, as the case ends (launch.session, with the run's ceilings), stored in
`details.limit` (results.details.Limit), and shown by the llm and llm-serving studies,
compare, show and the HTML page. The first that holds, in this order:

- `saturated`: an open loop stopped sending because the server's queue only grew
  (worker.endpoint_load); the figure is that growth.
- `client-bound`: the client could not keep up (measure.client_health.client_bound:
  its busiest event loop at CPU_BOUND of a core, or its lag a quarter of the
  inter-token gap); the figure is that CPU or lag (its value the CPU share). Its
  latencies hold its own delay.
- `queueing`: the server's own queue time is at least QUEUE_SHARE of its TTFT (means
  over the window, its /metrics): requests wait for a place, not for compute.
- `host-bound`: the device waited for the host between decode steps: a GPU's kernels
  filled under flags.DEVICE_BUSY_FLOOR of the median decode (torch, profiled after
  the timed generations); the figure is that share.
- `memory-bound` or `compute-bound`, from the roofline of the phase that took most of
  the generation's time (decode after the first token, else the prefill): the phase's
  arithmetic intensity (its FLOPs over the bytes it must move) against the machine's
  balance (the GEMM ceiling at the weights' precision over the memory ceiling). Under
  it, memory bandwidth bounds the phase and the figure is its share of the memory
  ceiling (a decode's MBU); over it, compute does, and the figure is its share of the
  GEMM ceiling (a prefill's MFU).
- `unknown`: no ceiling to hold the work to (the figure says why and what to run), or
  no model work recorded.

A decode or prefill figure above its ceiling (results.decode_bound, roofline_bound) is
flagged `above-ceiling` here too, since only the run knows its ceilings.
"""

from __future__ import annotations

from dataclasses import replace

from dlbench.measure.client_health import client_bound
from dlbench.measure.server_counters import ServerCounters
from dlbench.results.decode_bound import decode_bound, no_ceiling_note
from dlbench.results.details import EndpointLoad, Generation, Limit
from dlbench.results.flags import ABOVE_CEILING, DEVICE_BUSY_FLOOR
from dlbench.results.records import Result, Run
from dlbench.results.roofline_bound import prefill_bound, work_precision

SATURATED, CLIENT_BOUND, QUEUEING = "saturated", "client-bound", "queueing"
HOST_BOUND, MEMORY_BOUND, COMPUTE_BOUND, UNKNOWN = (
    "host-bound", "memory-bound", "compute-bound", "unknown",
)  # fmt: skip
VERDICTS = (SATURATED, CLIENT_BOUND, QUEUEING, HOST_BOUND, MEMORY_BOUND, COMPUTE_BOUND, UNKNOWN)
DECODE, PREFILL = "decode", "prefill"
# A server whose queue holds a request this share of its TTFT serves a queue
QUEUE_SHARE = 0.5
NO_WORK = "no model work recorded (a result from before the roofline)"
# What each verdict means, in the line a legend gives it
MEANINGS = {
    SATURATED: "the server's queue only grew at this rate: the open loop stopped sending",
    CLIENT_BOUND: "the benchmark's client could not keep up: its latencies hold its own delay",
    QUEUEING: "the server's queue time is at least half its time to first token",
    HOST_BOUND: "the GPU waited for the host between decode steps",
    MEMORY_BOUND: "below the machine's balance: memory bandwidth bounds the phase (figure: "
    "its share of the memory ceiling)",
    COMPUTE_BOUND: "above the machine's balance: compute bounds the phase (figure: its share "
    "of the GEMM ceiling)",
    UNKNOWN: "no ceiling to hold the work to, or no model work recorded",
}


def with_limits(result: Result, run: Run) -> Result:
    """The result with its verdict and its `above-ceiling` flag decided."""
    flags = [flag for flag in result.flags if flag != ABOVE_CEILING]
    if above_ceiling(result, run):
        flags.append(ABOVE_CEILING)
    details = replace(result.details, limit=judge(result, run))
    return replace(result, flags=tuple(flags), details=details)


def above_ceiling(result: Result, run: Run) -> bool:
    """A decode or prefill faster than its ceiling allows (beyond its tolerance)."""
    decode, prefill = decode_bound(result, run), prefill_bound(result, run)
    return bool((decode and decode.above_bound) or (prefill and prefill.above_bound))


def judge(result: Result, run: Run) -> Limit | None:
    """The verdict of a generation or serving result (None: neither, or one that
    failed for another reason than saturation)."""
    record, load = result.details.generation, result.details.endpoint
    if load is not None:
        found = _load_limit(load, record)
        if found is not None:
            return found
    if not result.ok or record is None:
        return None
    busy = record.decode_device_busy
    if busy is not None and busy < DEVICE_BUSY_FLOOR:
        return Limit(HOST_BOUND, f"GPU busy {busy:.0%} of the decode (kernels over the median "
                     f"decode time; under {DEVICE_BUSY_FLOOR:.0%})", busy, DECODE)  # fmt: skip
    return roofline_limit(result, run)


def _load_limit(load: EndpointLoad, record: Generation | None) -> Limit | None:
    if load.saturated:
        return Limit(SATURATED, f"stopped sending: {load.saturated}")
    itl = (record.itl_p50_ms, record.itl_p99_ms) if record else (None, None)
    why = client_bound(load.client, *itl)
    if why is not None and load.client is not None:
        return Limit(CLIENT_BOUND, why, load.client.cpu_share)
    return queueing(load.server)


def queueing(server: ServerCounters | None) -> Limit | None:
    """The server's queue time against its TTFT (its own, else the client's), means."""
    if server is None or server.unread is not None or server.queue is None:
        return None
    queue = server.queue.mean_ms
    ttft = server.ttft.mean_ms if server.ttft is not None else server.client_ttft_mean_ms
    if queue is None or not ttft or queue < QUEUE_SHARE * ttft:
        return None
    part = queue / ttft
    return Limit(QUEUEING, f"queue {queue:,.0f} ms of a {ttft:,.0f} ms TTFT ({part:.0%}; means, "
                 "the server's /metrics)", part)  # fmt: skip


def roofline_limit(result: Result, run: Run) -> Limit:
    """Memory- or compute-bound: the longer phase's intensity against the balance."""
    record = result.details.generation
    decode, prefill = decode_bound(result, run), prefill_bound(result, run)
    if record is None or decode is None or prefill is None or not _work(record):
        return Limit(UNKNOWN, (record.work_note if record else None) or NO_WORK)
    phase = longer_phase(record)
    memory, compute = decode.ceiling, prefill.ceiling
    if memory is None or compute is None:
        return Limit(UNKNOWN, _missing(result, run, memory is None), phase=phase)
    if phase == DECODE:
        flops, moved, seconds = (record.decode_flops_per_step, record.decode_bytes_per_step,
                                 (record.tpot_p50_ms or 0.0) / 1000.0)  # fmt: skip
    else:
        flops, moved, seconds = (record.prefill_flops, record.prefill_bytes,
                                 (record.ttft_p50_ms or 0.0) / 1000.0)  # fmt: skip
    assert flops and moved  # _work
    if seconds <= 0:
        return Limit(UNKNOWN, f"no {phase} time measured", phase=phase)
    intensity, balance = flops / moved, compute.gflops / memory.gbps
    if intensity < balance:
        used = moved / seconds / (memory.gbps * 1e9)
        name = "MBU" if phase == DECODE else "bandwidth"
        return Limit(MEMORY_BOUND, f"{phase} {name} {share(used)} of {memory.gbps:,.1f} GB/s "
                     f"({memory.label}); {intensity:.2g} FLOP/byte, under the machine's "
                     f"balance {balance:.3g}", used, phase)  # fmt: skip
    used = flops / seconds / (compute.gflops * 1e9)
    return Limit(COMPUTE_BOUND, f"{phase} MFU {share(used)} of {compute.gflops:,.0f} GFLOP/s "
                 f"({compute.label}); {intensity:.3g} FLOP/byte, over the machine's balance "
                 f"{balance:.3g}", used, phase)  # fmt: skip


def share(value: float) -> str:
    """A share as a figure says it: whole percent, two significant figures under 10%."""
    return f"{value:.0%}" if value >= 0.1 else f"{100 * value:.2g}%"


def longer_phase(record: Generation) -> str:
    """The phase that took most of the median generation: the prefill (its TTFT) or
    the decode after it."""
    ttft, e2e = record.ttft_p50_ms or 0.0, record.e2e_p50_ms or 0.0
    return PREFILL if ttft > e2e - ttft else DECODE


def _work(record: Generation) -> bool:
    return bool(record.decode_flops_per_step and record.decode_bytes_per_step
                and record.prefill_flops and record.prefill_bytes)  # fmt: skip


def _missing(result: Result, run: Run, memory: bool) -> str:
    return no_ceiling_note(result, run, "memory" if memory else f"GEMM {work_precision(result)}")


def limit_text(limit: Limit | None) -> str:
    """A verdict and its figure, as a table's note says it ("" for none)."""
    return f"{limit.verdict}: {limit.figure}" if limit is not None else ""
