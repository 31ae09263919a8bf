"""Hardware ceilings (the roofline) and every result's efficiency against them.

`dlbench roofline` runs the `ceilings` suite: GEMM at each precision (the
most FLOP/s this machine achieves), `copy` (device memory bandwidth: the best
of copy, add and a sum, workloads.copy) and `h2d` (host-to-device bandwidth).
Its figures are the ceilings. Any later run on the same machine copies the
newest ceilings into its env, and each of its results is read with its
achieved rate as a fraction of the matching ceiling: GFLOP/s against GEMM at
the result's precision on the same device, GB/s against memory (or h2d for
transfers). A measured ceiling, not a datasheet number: the fraction says how
much of what this machine can really do a case gets.

A GPU under a power cap has two ceilings (measure.power_regime): the burst,
over the first 150 ms of back-to-back work from a cool start, and the
sustained, after --sustain seconds (10) of it. Their keys end in the regime
(`cuda:0|gflops|amp-bf16|burst`, `cuda:0|memory|sustained`), with the SM clock
and power seen during each under `conditions`. A result is held to the
ceiling of its own regime (`case_regime`): burst where its measured work was
short (under SHORT_RUN_S) or its SM clock stayed at the burst's, sustained
otherwise; its efficiency says which, and why. A CPU has no power regime: its
ceiling is one figure under the key without a regime, as every ceiling was
before (and an older run's GPU ceilings still are, read as they always were).

The fraction is computed when a result is read (`efficiency_in_run`), from
the result's merged rates and the run's ceilings, and never stored. Results
written before kept it in their details (`details.stored_efficiency` since
run schema 3); that value is what their run showed, so it is read as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from dlbench.measure.power_regime import RegimeFigure
from dlbench.results.env import Ceilings, RegimeConditions
from dlbench.results.records import Result, Run
from dlbench.untyped import JSONObject

CEILING_SUITE = "ceilings"
# workload -> what it is the ceiling of
COMPUTE_CEILING = "gemm"
ABOVE_CEILING = 1.05
BANDWIDTH_CEILINGS = {"copy": "memory", "h2d": "host-to-device"}
BURST, SUSTAINED = "burst", "sustained"
REGIMES = (BURST, SUSTAINED)
# Under this much continuous work a GPU is still in its burst: the power cap pulled an
# H100's clock down within ~0.2 s of a bf16 GEMM, and held it there from ~1 s on.
SHORT_RUN_S = 1.0
# An SM clock within this of the burst's (where the sustained clock is no lower) is it
CLOCK_MARGIN = 0.03


def ceiling_key(
    device: str, kind: str, precision: str | None = None, regime: str | None = None
) -> str:
    return "|".join(part for part in (device, kind, precision, regime) if part)


def regime_key(stem: str, regime: str) -> str:
    """The key of a ceiling's figure in one power regime."""
    return f"{stem}|{regime}"


@dataclass(frozen=True)
class CeilingKey:
    """A key of `values` read back: device, kind (gflops, memory, host-to-device), the
    GEMM's precision, and the power regime (None: one figure, a CPU's or an older run's)."""

    device: str
    kind: str
    precision: str | None = None
    regime: str | None = None

    @classmethod
    def parse(cls, key: str) -> CeilingKey:
        parts = key.split("|")
        regime = parts.pop() if len(parts) > 2 and parts[-1] in REGIMES else None
        device, kind, precision = (*parts, None, None)[:3]
        return cls(str(device), str(kind or ""), precision, regime)

    @property
    def stem(self) -> str:
        """The key without its regime: one ceiling, whichever regime."""
        return ceiling_key(self.device, self.kind, self.precision)

    def what(self) -> str:
        return f"gemm {self.precision}" if self.kind == "gflops" else f"{self.kind} bandwidth"


@dataclass(frozen=True)
class Ceiling:
    """The ceiling a result is held to: its value, and its regime and why (None: one
    figure)."""

    value: float
    regime: str | None = None
    why: str | None = None


def _device(result: Result) -> str:
    return "cpu" if result.case.device == "cpu" else result.case.device


def _stem(result: Result) -> str | None:
    """The ceiling a roofline result measures (its key without regime), or None."""
    workload = result.case.workload
    if workload == COMPUTE_CEILING and result.gflops:
        return ceiling_key(_device(result), "gflops", result.case.precision)
    if workload in BANDWIDTH_CEILINGS and result.gbps:
        return ceiling_key(_device(result), BANDWIDTH_CEILINGS[workload])
    return None


def ceiling_figures(result: Result) -> dict[str, tuple[float, RegimeConditions | None]]:
    """{key: (value, conditions)} a roofline result measures: burst and sustained on a
    GPU, one figure on a CPU (the sustained, else the burst) and where the result has
    no windows (h2d, an older run: its rate)."""
    stem = _stem(result)
    if stem is None:
        return {}
    regimes = result.details.power_regimes
    if regimes is None:
        return {stem: (float(result.gflops or result.gbps or 0.0), None)}
    if result.case.device == "cpu":
        return {stem: ((regimes.sustained or regimes.burst).rate, None)}
    burst = regimes.burst
    figures: dict[str, tuple[float, RegimeConditions | None]] = {
        regime_key(stem, BURST): (burst.rate, _conditions(burst, regimes.cool_start))
    }
    if regimes.sustained is not None:
        conditions = _conditions(regimes.sustained)
        figures[regime_key(stem, SUSTAINED)] = (regimes.sustained.rate, conditions)
    return figures


def _conditions(figure: RegimeFigure, cool_start: bool | None = None) -> RegimeConditions:
    """What the GPU did during a figure, as the ceilings table and the regime choice read it."""
    return RegimeConditions(
        sm_clock_mhz=figure.sm_clock_mhz,
        power_w=figure.power_w,
        after_s=figure.after_s,
        kernel=figure.kernel,
        cool_start=cool_start,
    )


def ceilings_from_results(results: Iterable[Result], run_id: str) -> Ceilings:
    """The ceilings a run's ceiling cases measured (the highest per key)."""
    values: dict[str, float] = {}
    conditions: dict[str, RegimeConditions] = {}
    for result in results:
        if not result.ok:
            continue
        for key, (value, seen) in ceiling_figures(result).items():
            if value > values.get(key, 0.0):
                values[key] = value
                conditions.pop(key, None)
                if seen is not None and seen != RegimeConditions():
                    conditions[key] = seen
    return Ceilings(source_run=run_id, values=values, conditions=conditions)


def merge(base: Ceilings | None, newer: Ceilings) -> Ceilings:
    """Ceilings measured in this run override the stored ones, ceiling by ceiling: a
    newer figure of a ceiling drops the older ones of it, of either regime or none."""
    if base is None:
        return newer
    measured = {CeilingKey.parse(key).stem for key in newer.values}
    values = {
        **{
            key: value
            for key, value in base.values.items()
            if CeilingKey.parse(key).stem not in measured
        },
        **newer.values,
    }
    conditions = {**base.conditions, **newer.conditions}
    return Ceilings(
        source_run=newer.source_run if newer.values else base.source_run,
        values=values,
        conditions={key: seen for key, seen in conditions.items() if key in values},
    )


def case_regime(
    continuous_s: float | None,
    sm_clock_mhz: float | None,
    burst_clock_mhz: float | None,
    sustained_clock_mhz: float | None,
) -> tuple[str, str]:
    """(regime, why) a case is held to: burst where its continuous work was short or its
    SM clock stayed at the burst's (nearer it than the sustained clock), else sustained."""
    if continuous_s is not None and continuous_s < SHORT_RUN_S:
        return BURST, f"{continuous_s:.2g} s of continuous work, under {SHORT_RUN_S:g} s"
    ran = f"{continuous_s:.1f} s of continuous work" if continuous_s is not None else "work"
    if sm_clock_mhz is None or burst_clock_mhz is None:
        return SUSTAINED, ran
    threshold = burst_clock_mhz * (1.0 - CLOCK_MARGIN)
    if sustained_clock_mhz is not None and sustained_clock_mhz < threshold:
        threshold = (burst_clock_mhz + sustained_clock_mhz) / 2.0
    clocks = f"SM clock {sm_clock_mhz:.0f} MHz against the burst's {burst_clock_mhz:.0f}"
    if sm_clock_mhz >= threshold:
        return BURST, f"{ran}, its {clocks}"
    return SUSTAINED, f"{ran}, its {clocks}"


def ceiling_for(result: Result, ceilings: Ceilings, stem: str) -> Ceiling | None:
    """The ceiling `stem` (a key without regime) as `result` is held to it: of its own
    power regime where the ceilings have regimes, else the one figure; None: none."""
    values = ceilings.values
    measured = {r: values[regime_key(stem, r)] for r in REGIMES if regime_key(stem, r) in values}
    if not measured:
        value = values.get(stem)
        return Ceiling(float(value)) if value else None

    def clock(regime: str) -> float | None:
        seen = ceilings.conditions.get(regime_key(stem, regime))
        return seen.sm_clock_mhz if seen is not None else None

    wanted, why = case_regime(_continuous_s(result), _sm_clock_mhz(result), *map(clock, REGIMES))
    if wanted in measured:
        return Ceiling(float(measured[wanted]), wanted, why)
    (held,) = measured  # a ceiling measured in one regime only: that one, said so
    what = CeilingKey.parse(stem).what()
    return Ceiling(float(measured[held]), held, f"{why}; no {wanted} ceiling of {what}")


def _continuous_s(result: Result) -> float | None:
    """How long the result's measured work ran: its region on the wall clock."""
    details = result.details
    if details.measured_wall is not None and len(details.measured_wall) == 2:
        start, end = details.measured_wall
        return end - start
    return details.loop_wall_s


def _sm_clock_mhz(result: Result) -> float | None:
    """The SM clock over the measured region, as the parent's timeline sampled it."""
    timeline = result.details.timeline
    summary = timeline.summary if timeline is not None else None
    return summary.sm_clock_mhz_mean if summary is not None else None


def efficiency(result: Result, ceilings: Ceilings | None) -> JSONObject | None:
    """The result's rate as a fraction of the matching ceiling, or None."""
    if ceilings is None or not result.ok:
        return None
    device = _device(result)
    details = result.details
    bus_bytes = details.transfer_bytes_per_step
    if bus_bytes is not None and bus_bytes > 0 and result.throughput:
        # A timed host-to-device copy bounds the step: the bytes that crossed the
        # bus against the bus's ceiling (the kernel's own bytes would overstate it)
        steps_per_s = result.throughput / (result.case.batch_size or 1)
        achieved = bus_bytes * steps_per_s / 1e9
        stem = ceiling_key(device, "host-to-device")
        unit, basis = "GB/s", "host-to-device bandwidth (bytes copied in the timed step)"
    elif result.primary_metric == "gbps" and result.gbps:
        kind = BANDWIDTH_CEILINGS.get(result.case.workload, "memory")
        if (details.transfer or "").startswith("inside"):
            kind = "host-to-device"  # recorded before the copied bytes were: the bus bounds it
        achieved, stem, unit = result.gbps, ceiling_key(device, kind), "GB/s"
        basis = f"{kind} bandwidth"
    elif result.gflops:
        stem = ceiling_key(device, "gflops", result.case.precision)
        achieved, unit = result.gflops, "GFLOP/s"
        basis = f"gemm {result.case.precision}"
    else:
        return None
    held = ceiling_for(result, ceilings, stem)
    if held is None:
        return None
    ceiling = held.value
    ranks = result.case.ranks
    if ranks > 1 and device != "cpu":
        # DDP's rate is the sum over N GPUs, each with this ceiling; CPU ranks
        # share one machine and so one ceiling
        ceiling *= ranks
        basis += f" x {ranks} GPUs"
    found = {
        "fraction": achieved / ceiling,
        "ceiling": ceiling,
        "unit": unit,
        "basis": basis if held.regime is None else f"{basis}, {held.regime} ({held.why})",
        "ceilings_run": ceilings.source_run,
    }
    if held.regime is not None:
        found["regime"] = held.regime
    if achieved > ABOVE_CEILING * ceiling:
        # The ceilings are measured far beyond the caches; a small working set
        # that stays in cache can beat them. Said, not hidden or clipped.
        found["note"] = "above the measured ceiling: the working set is likely cache-resident"
    return found


def efficiency_in_run(result: Result, run: Run) -> JSONObject | None:
    """The result's efficiency against its run's ceilings, or None. A result written
    before efficiency was computed on read carries the one its run showed (a --repeat
    result's from its last process, a roofline run's own against the ceilings measured
    so far): kept, so an old run shows the numbers it always did."""
    stored = result.details.stored_efficiency
    if stored is not None:
        return dict(stored)  # the caller's own copy of the read-only record's
    return efficiency(result, run.env.ceilings_or_none)


def with_measured_ceilings(run: Run, result: Result) -> Run:
    """`run` with `result`'s ceiling where it is a roofline run's: its env holds the
    ceilings it has measured so far (over those it copied), so its own results, and the
    ceilings table, are read against them."""
    if run.suite != CEILING_SUITE:
        return run  # a gemm in another suite, at another size or thread count, is no ceiling
    own = ceilings_from_results([result], run.id)
    if not own.values:
        return run
    return replace(run, env=replace(run.env, ceilings=merge(run.env.ceilings_or_none, own)))
