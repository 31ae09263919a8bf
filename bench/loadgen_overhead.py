"""What does MLPerf LoadGen add per query? Its single-stream p50 beside the step loop's median.

For each case, the same prepared step is timed two ways in fresh worker
processes, interleaved round by round so machine drift hits both alike:
dlbench's own step loop (median step time), and LoadGen's single-stream
scenario (its p50, from issuing a query to its completion). The difference
is LoadGen's per-query cost as a Python SUT sees it (the call into the SUT,
the completion call, LoadGen's bookkeeping); the ratio says whether the two
agree within 10% (issue: the serving cross-check). The null backend's empty
step shows the cost alone.

Run: python bench/loadgen_overhead.py [--rounds 5] [--min-time 2]
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from interleave import bench_parser, interleaved_rounds

from dlbench.launch.runner import run_case
from dlbench.plan.validate import validate_case
from dlbench.spec.case import Case, Settings

CASES = {
    "null (empty step)": Case("mlp", "null", "default"),
    "mlp onnxruntime": Case("mlp", "onnxruntime", "default"),
    "mlp torch eager": Case("mlp", "torch", "eager"),
    "distilbert seq 128 onnxruntime": Case("distilbert", "onnxruntime", "default"),
}


def measure(case: Case, settings: Settings, loadgen: bool) -> float:
    """The median step (ms), or LoadGen's single-stream p50 (ms)."""
    result = run_case(validate_case(case.replaced(loadgen=loadgen)), settings)
    if not result.ok:
        raise SystemExit(f"{case.label()} failed: {result.error}")
    if loadgen:
        return float(result.details.loadgen.latency_ms["50"])
    return result.latency_ms.median


def main() -> None:
    parser = bench_parser(__doc__)
    args = parser.parse_args()
    settings = Settings(min_time_s=args.min_time, min_iters=20, warmup_iters=5, timeout_s=900)
    for name, base in CASES.items():
        case = replace(
            base, device="cpu", scenario="single-stream", batch_size=1, threads=args.threads
        )

        def report(index: int, loadgen_ms: float, steps_ms: float, name: str = name) -> None:
            print(
                f"{name}, round {index + 1}: LoadGen p50 {loadgen_ms * 1000:.2f} us, "
                f"step loop median {steps_ms * 1000:.2f} us, ratio {loadgen_ms / steps_ms:.3f}",
                flush=True,
            )

        with_lg, steps = interleaved_rounds(
            args.rounds,
            lambda case=case: measure(case, settings, loadgen=True),
            lambda case=case: measure(case, settings, loadgen=False),
            report,
        )
        added = [(lg - st) * 1000 for lg, st in zip(with_lg, steps, strict=True)]
        ratios = [lg / st for lg, st in zip(with_lg, steps, strict=True)]
        ratio = statistics.median(ratios)
        verdict = "agree within 10%" if abs(ratio - 1) <= 0.10 else "differ by more than 10%"
        print(
            f"{name}: median ratio LoadGen p50 / step median {ratio:.3f} ({verdict}); "
            f"LoadGen adds {statistics.median(added):.2f} us per query (median of rounds)\n",
            flush=True,
        )


if __name__ == "__main__":
    main()
