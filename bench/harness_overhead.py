"""How much does dlbench itself cost? Two answers, measured side by side.

1. The null backend's per-iteration overhead (an empty step through the
   whole harness: timer loop, worker process), in microseconds.
2. For `mlp` batch 1000 on torch (CPU), the ratio of dlbench's median step
   latency to a plain hand-written `perf_counter` loop over the same network.
   Both run in fresh processes with the same threads, interleaved over
   several rounds so machine noise hits both alike. Target: ratio <= 1.05.
   The verdict compares each side's best median over the rounds (noise only
   adds time; a harness cost would show in the best round too).

Run: python bench/harness_overhead.py [--rounds 5] [--min-time 2] [--threads N]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from interleave import bench_parser, interleaved_rounds, thread_env

from dlbench.launch.runner import run_case
from dlbench.spec.case import Case, Settings

# A hand-written benchmark as a careful user would write it: same layers,
# same weights, inference_mode, explicit threads, warm-up, perf_counter.
HAND_LOOP = r"""
import json, statistics, sys, time
import torch
threads, min_time = int(sys.argv[1]), float(sys.argv[2])
torch.set_num_threads(threads)
torch.set_num_interop_threads(threads)
from dlbench.backends.torch.models import build_module
from dlbench.workloads import get_workload
mlp = get_workload("mlp")
model = build_module("mlp", mlp.reference_weights({}, 0)).eval()
x = torch.from_numpy(mlp.make_inputs(1000, {}, "infer", 0)["x"])
samples = []
with torch.inference_mode():
    for _ in range(4):
        model(x)
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(samples) < 10:
        t0 = time.perf_counter()
        model(x)
        samples.append(time.perf_counter() - t0)
print(json.dumps({"median_ms": statistics.median(samples) * 1000, "n": len(samples)}))
"""


def hand_loop_median_ms(threads: int, min_time: float) -> float:
    out = subprocess.run(
        [sys.executable, "-c", HAND_LOOP, str(threads), str(min_time)],
        capture_output=True,
        text=True,
        check=True,
        env=thread_env(threads),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def dlbench_median_ms(threads: int, min_time: float) -> float:
    case = Case("mlp", "torch", "eager", device="cpu", batch_size=1000, threads=threads)
    result = run_case(case, Settings(min_time_s=min_time, min_iters=10, warmup_iters=3))
    if not result.ok:
        raise SystemExit(f"dlbench case failed: {result.error}")
    return result.latency_ms.median


def null_overhead_us(min_time: float) -> tuple[float, float]:
    """Median timed empty step, and loop wall time per iteration, in µs."""
    case = Case("mlp", "null", "default", device="cpu", threads=1)
    result = run_case(case, Settings(min_time_s=min_time, min_iters=1000, warmup_iters=100))
    per_iteration = result.details.loop_wall_s / result.latency_ms.n * 1e6
    return result.latency_ms.median * 1000.0, per_iteration


def main() -> None:
    parser = bench_parser(__doc__)
    args = parser.parse_args()

    median_us, wall_us = null_overhead_us(args.min_time)
    print(
        f"null backend: timed empty step median {median_us:.3f} us; "
        f"loop wall per iteration {wall_us:.3f} us"
    )

    def report(index: int, ours_ms: float, hand_ms: float) -> None:
        print(
            f"round {index + 1}: mlp bs=1000 torch eager, threads={args.threads}: "
            f"dlbench {ours_ms:.4f} ms, hand loop {hand_ms:.4f} ms, "
            f"ratio {ours_ms / hand_ms:.3f}",
            flush=True,
        )

    ours, hand = interleaved_rounds(
        args.rounds,
        lambda: dlbench_median_ms(args.threads, args.min_time),
        lambda: hand_loop_median_ms(args.threads, args.min_time),
        report,
    )
    ratios = [o / h for o, h in zip(ours, hand, strict=True)]
    best = min(ours) / min(hand)
    verdict = "OK" if best <= 1.05 else "ABOVE TARGET"
    print(
        f"best-of-{args.rounds} ratio dlbench / hand loop: {best:.3f} (target <= 1.05: "
        f"{verdict}); median per-round ratio {statistics.median(ratios):.3f}"
    )


if __name__ == "__main__":
    main()
