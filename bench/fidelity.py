"""Does dlbench report each framework as fast as a careful hand-written loop?

Targets: mlp at batch 1000 on all five frameworks, and bert-base at batch 1,
sequence 128, on torch, ONNX Runtime and OpenVINO.

For each framework, the same model (same weights, same input, same threads
and settings) is timed by dlbench and by a plain loop written directly
against the framework's API, each in a fresh process, interleaved over
several rounds so that machine noise hits both alike. Prints the ratio of
dlbench's median latency to the hand loop's. Target: every ratio <= 1.10.

The verdict uses each side's best (lowest) median over the rounds: on a
shared machine interference only ever adds time, so the minimum estimates
each side's undisturbed speed, and a harness cost shows up in every round,
the best one included. Per-round ratios are printed too.

Run: python bench/fidelity.py [--rounds 3] [--min-time 2] [--threads N] [--only torch ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass

from interleave import bench_parser, interleaved_rounds, thread_env

from dlbench.launch.runner import run_case
from dlbench.spec.case import Case, Settings

# Shared by every hand loop: the input, and a timing loop with warm-up and
# perf_counter, as a careful user writes it.
PRELUDE = r"""
import json, statistics, sys, time
workload, batch = sys.argv[1], int(sys.argv[2])
threads, min_time = int(sys.argv[3]), float(sys.argv[4])
params = json.loads(sys.argv[5])
from dlbench.workloads import get_workload
spec = get_workload(workload)
weights = spec.reference_weights(params, 0)
inputs = spec.make_inputs(batch, params, "infer", 0)

def measure(call):
    for _ in range(5):
        call()
    samples, start = [], time.perf_counter()
    while time.perf_counter() - start < min_time or len(samples) < 20:
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    print(json.dumps({"median_ms": statistics.median(samples) * 1000}))
"""

HAND_LOOPS = {
    "torch": r"""
import torch
torch.set_num_threads(threads); torch.set_num_interop_threads(threads)
from dlbench.backends.torch.models import reference_module
model = reference_module(workload, params, 0).eval()
args = [torch.from_numpy(v) for v in inputs.values()]
with torch.inference_mode():
    measure(lambda: model(*args))
""",
    "tensorflow": r"""
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(threads)
from dlbench.backends.tensorflow.models import BUILDERS, to_framework_layout
model = BUILDERS[workload](weights)
x = tf.constant(to_framework_layout(workload, inputs["x"]))
forward = tf.function(lambda x: model(x, training=False))
measure(lambda: forward(x).numpy())
""",
    "jax": r"""
import jax
from dlbench.backends.jax.models import FORWARDS
params = {k: jax.device_put(v) for k, v in weights.items()}
x = jax.device_put(inputs["x"])
forward = jax.jit(FORWARDS[workload])
measure(lambda: forward(params, x).block_until_ready())
""",
    "onnxruntime": r"""
import onnxruntime as ort
options = ort.SessionOptions()
options.intra_op_num_threads = options.inter_op_num_threads = threads
session = ort.InferenceSession(sys.argv[6], options, providers=["CPUExecutionProvider"])
feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
measure(lambda: session.run(None, feeds))
""",
    "openvino": r"""
import numpy as np, openvino as ov
core = ov.Core()
model = core.read_model(sys.argv[6])
offline = batch > 1
config = {"PERFORMANCE_HINT": "THROUGHPUT" if offline else "LATENCY",
          "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
requests = 1
if offline:
    model.reshape({n: [1, *a.shape[1:]] for n, a in inputs.items()})
    probe = core.compile_model(model, "CPU", config)
    wanted = int(probe.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    requests = next(n for n in range(min(wanted, batch), 0, -1) if batch % n == 0)
model.reshape({n: [batch // requests, *a.shape[1:]] for n, a in inputs.items()})
compiled = core.compile_model(model, "CPU", config)
splits = zip(*(np.split(a, requests) for a in inputs.values()))
chunks = [dict(zip(inputs, parts)) for parts in splits]
if offline:
    queue = ov.AsyncInferQueue(compiled, requests)
    def run():
        for c in chunks:
            queue.start_async(c, share_inputs=True)
        queue.wait_all()
    measure(run)
else:
    request = compiled.create_infer_request()
    measure(lambda: request.infer(chunks[0], share_inputs=True))
""",
}
DEFAULT_COMPILE = {
    "torch": "eager",
    "tensorflow": "function",
    "jax": "jit",
    "onnxruntime": "default",
    "openvino": "default",
}


@dataclass(frozen=True)
class Target:
    workload: str
    batch: int
    frameworks: tuple[str, ...]
    params: tuple[tuple[str, int], ...] = ()


TARGETS = (
    Target("mlp", 1000, tuple(HAND_LOOPS)),
    Target("bert-base", 1, ("torch", "onnxruntime", "openvino"), (("seq", 128),)),
)


def hand_loop_ms(framework: str, target: Target, threads: int, min_time: float) -> float:
    extra = []
    if framework in ("onnxruntime", "openvino"):
        from dlbench.reference.builtin import onnx_model

        extra = [str(onnx_model(target.workload, dict(target.params), 0)[0])]
    params = json.dumps(dict(target.params))
    argv = [target.workload, str(target.batch), str(threads), str(min_time), params, *extra]
    code = PRELUDE + HAND_LOOPS[framework]
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=thread_env(threads)
    )
    if out.returncode != 0:
        raise SystemExit(f"hand loop for {framework} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def dlbench_ms(framework: str, target: Target, threads: int, min_time: float) -> float:
    case = Case(
        target.workload,
        framework,
        DEFAULT_COMPILE[framework],
        device="cpu",
        batch_size=target.batch,
        threads=threads,
        params=target.params,
    )
    result = run_case(case, Settings(min_time_s=min_time, min_iters=20, warmup_iters=5))
    if not result.ok:
        raise SystemExit(f"dlbench case {framework} failed: {result.error}")
    return result.latency_ms.median


def compare(framework: str, target: Target, args: argparse.Namespace) -> float:
    """Interleaved rounds; returns the best-of ratio (see the module docstring)."""
    measure_args = (framework, target, args.threads, args.min_time)
    ours, hand = interleaved_rounds(
        args.rounds, lambda: dlbench_ms(*measure_args), lambda: hand_loop_ms(*measure_args)
    )
    per_round = [o / h for o, h in zip(ours, hand, strict=True)]
    best = min(ours) / min(hand)
    print(
        f"{target.workload} bs={target.batch} {framework:12s} [{DEFAULT_COMPILE[framework]}] "
        f"threads={args.threads}: dlbench {min(ours):.4f} ms, hand {min(hand):.4f} ms (best of "
        f"{args.rounds}) -> ratio {best:.3f}; per-round ratios "
        f"{', '.join(f'{r:.3f}' for r in per_round)} (median {statistics.median(per_round):.3f})",
        flush=True,
    )
    return best


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--only", nargs="*", help="frameworks to run (default: all)")
    args = parser.parse_args()
    worst = 0.0
    for target in TARGETS:
        for framework in target.frameworks:
            if not args.only or framework in args.only:
                worst = max(worst, compare(framework, target, args))
    print(
        f"worst best-of ratio: {worst:.3f} (target <= 1.10: {'OK' if worst <= 1.10 else 'ABOVE'})"
    )


if __name__ == "__main__":
    main()
