"""A generation result's prefill against the compute bound, computed when read.

A prefill runs every layer weight over every prompt token at once: its work is
matrix products, and no engine does it faster than the device's GEMM throughput at
the case's precision allows. From the FLOPs one prefill must do (the result's
`generation.prefill_flops`: workloads.decoder.prefill_flops) and the median TTFT:

- achieved prefill FLOP/s = prefill FLOPs / TTFT p50;
- the bound = ceiling / prefill FLOPs x the prompts' tokens (tokens/s), and the
  least TTFT the ceiling allows = prefill FLOPs / ceiling;
- MFU (model FLOP utilisation) = achieved / ceiling = prefill tokens/s / the bound.

The ceiling is the run's measured GEMM rate of the result's device at the precision
its weights are held in (`dlbench roofline`, results.ceilings: the case's precision,
or a server's config dtype), in the result's power regime; else, for a known GPU at
bf16 or fp16, its datasheet's dense tensor figure, labelled so; else none, and the
bound says to run `dlbench roofline` (results.decode_bound.roofline_device says
whose device a server's is). A TTFT holds more than the prefill (the request's
transport, a server's queue), so an endpoint's MFU is at least the share given. A
figure above the ceiling (beyond ceilings.ABOVE_CEILING of a measured one, any of a
datasheet's) cannot be: work was skipped or a cache served it, a token was
miscounted, or the ceiling or precision is wrong; it is said so, never a record.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.results.ceilings import ABOVE_CEILING, ceiling_for, ceiling_key
from dlbench.results.decode_bound import device_name, gpu_datasheet, roofline_device
from dlbench.results.records import Result, Run
from dlbench.spec.registry import PRECISIONS
from dlbench.untyped import JSONObject

# The precisions a GPU's datasheet bf16 figure holds (fp16 runs at the same rate)
DATASHEET_PRECISIONS = ("bf16", "fp16")


@dataclass(frozen=True)
class ComputeCeiling:
    """A device's GEMM throughput at a precision, and where the figure comes from."""

    gflops: float
    source: str  # "measured gemm fp32, run <id>" or "datasheet: <GPU> bf16 dense"
    measured: bool

    @property
    def label(self) -> str:
        """The source without its run."""
        return self.source.partition(", run ")[0]


@dataclass(frozen=True)
class PrefillBound:
    """A generation result's prefill against its compute bound."""

    flops: float  # one prefill of the batch's prompts
    prompt_tokens: float  # the tokens it fills: batch x isl
    achieved_gflops: float | None  # flops / TTFT p50
    ceiling: ComputeCeiling | None
    precision: str

    @property
    def mfu(self) -> float | None:
        if self.ceiling is None or self.achieved_gflops is None:
            return None
        return self.achieved_gflops / self.ceiling.gflops

    @property
    def bound_tokens_per_s(self) -> float | None:
        """The most prompt tokens/s the ceiling allows a prefill of this shape."""
        if self.ceiling is None:
            return None
        return self.prompt_tokens * self.ceiling.gflops * 1e9 / self.flops

    @property
    def least_ttft_ms(self) -> float | None:
        return self.flops / (self.ceiling.gflops * 1e9) * 1000.0 if self.ceiling else None

    @property
    def above_bound(self) -> bool:
        """Faster than the device computes: a measured ceiling gets its slack, a
        datasheet's none."""
        if self.mfu is None or self.ceiling is None:
            return False
        return self.mfu > (ABOVE_CEILING if self.ceiling.measured else 1.0)

    def note(self, missing: str) -> str | None:
        if self.ceiling is None:
            return missing
        if self.above_bound:
            return (
                f"impossible: prefill at {self.mfu:.0%} of {self.ceiling.gflops:,.0f} GFLOP/s "
                f"({self.ceiling.source}); no prefill computes faster than the device, so "
                "work was skipped or cached, a token miscounted, or the ceiling is not this "
                "precision's"
            )
        return None

    def as_dict(self, missing: str) -> JSONObject:
        """The figures as a run's JSON file shows them beside the result."""
        return {
            "flops": self.flops,
            "precision": self.precision,
            "achieved_gflops": self.achieved_gflops,
            "ceiling_gflops": self.ceiling.gflops if self.ceiling else None,
            "ceiling_source": self.ceiling.source if self.ceiling else None,
            "bound_tokens_per_s": self.bound_tokens_per_s,
            "least_ttft_ms": self.least_ttft_ms,
            "mfu": self.mfu,
            "note": self.note(missing),
        }


def work_precision(result: Result) -> str:
    """The precision the result's weights are held in: a server's config dtype, else
    the case's."""
    record = result.details.generation
    found = record.work_precision if record is not None else None
    return found or result.case.precision


def achieved_prefill_gflops(result: Result) -> float | None:
    """One prefill's FLOPs over the median TTFT, in GFLOP/s."""
    record = result.details.generation
    if record is None or not record.prefill_flops or not record.ttft_p50_ms:
        return None
    return record.prefill_flops / (record.ttft_p50_ms / 1000.0) / 1e9


def prefill_bound(result: Result, run: Run | None) -> PrefillBound | None:
    """The result's prefill against the bound (None: not a measured generation, or one
    recorded before its prefill FLOPs were)."""
    record = result.details.generation
    if not result.ok or record is None or not record.prefill_flops:
        return None
    precision = work_precision(result)
    # a server's TTFT is one request's: its own prompt's prefill
    prompts = 1 if record.work_batch is not None else (result.case.batch_size or 1)
    return PrefillBound(
        flops=record.prefill_flops,
        prompt_tokens=float(prompts * record.isl),
        achieved_gflops=achieved_prefill_gflops(result),
        ceiling=compute_ceiling(result, run, precision),
        precision=precision,
    )


def compute_ceiling(result: Result, run: Run | None, precision: str) -> ComputeCeiling | None:
    """The measured GEMM ceiling of the result's device at `precision`, else a known
    GPU's datasheet figure at bf16 or fp16."""
    return measured_compute_ceiling(result, run, precision) or datasheet_compute_ceiling(
        device_name(result, run), precision
    )


def measured_compute_ceiling(
    result: Result, run: Run | None, precision: str
) -> ComputeCeiling | None:
    """The run's measured GEMM rate of the result's device at `precision`, in the power
    regime the result ran in (results.ceilings.ceiling_for)."""
    ceilings = run.env.ceilings_or_none if run else None
    device = roofline_device(result, run)
    known = PRECISIONS.get(precision)
    gemm = (known.gemm_ceiling if known else None) or precision
    stem = ceiling_key(device, "gflops", gemm) if device else None
    held = ceiling_for(result, ceilings, stem) if stem and ceilings else None
    if ceilings is None or held is None or held.value <= 0:
        return None
    regime = f", {held.regime}" if held.regime else ""
    source = f"measured gemm {gemm}{regime}, run {ceilings.source_run}"
    return ComputeCeiling(held.value, source, measured=True)


def datasheet_compute_ceiling(name: str | None, precision: str) -> ComputeCeiling | None:
    """A known GPU's datasheet dense bf16 (= fp16) tensor throughput, at those precisions."""
    sheet = gpu_datasheet(name)
    if sheet is None or precision not in DATASHEET_PRECISIONS:
        return None
    source = f"datasheet: {sheet.label} {precision} dense"
    return ComputeCeiling(sheet.bf16_tflops * 1000.0, source, measured=False)
