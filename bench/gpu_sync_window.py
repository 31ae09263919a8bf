"""Does synchronising after every training step cost GPU throughput?

dlbench ends each timed step with torch.cuda.synchronize(), so the clock read
after it is honest. The host then cannot queue the next step's kernels while
the GPU finishes this one: where a step's launch work (Python, autograd, the
optimiser's launches) comes near its GPU time, the GPU idles at each step
boundary. One process, interleaved rounds, three ways of timing one case:

- dlbench: dlbench's own prepared step (synchronised every step);
- hand, synced: a hand-written loop of the same model, inputs, loss and
  optimiser, synchronised every step;
- hand, window: the same loop with one synchronise per window of K steps,
  so the host runs ahead as in a real training job.

Prints ms/step for each and, per round, hand-synced / window (what the
per-step synchronise costs) and dlbench / hand-synced (what the harness adds
beyond it). Needs a CUDA GPU, torch and transformers.

    python bench/gpu_sync_window.py [--rounds 4] [--window 15]
    python bench/gpu_sync_window.py --device cpu --small   # a rehearsal without a GPU
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from dlbench.backends.torch.backend import TARGET_NAMES, TorchBackend
from dlbench.backends.torch.models import LOSSES, OPTIMIZERS, training_module
from dlbench.backends.torch.precision import AUTOCAST_DTYPES
from dlbench.spec.case import Case, Settings
from dlbench.worker.steps import make_job

# (workload, precision, batch, params): the BERT case that drew 290-370 W on
# an H100 (host-bound?), its fp32 control, and ResNet-50 at AMP
CASES = (
    ("bert-base", "amp-bf16", 32, (("seq", 128),)),
    ("bert-base", "fp32", 32, (("seq", 128),)),
    ("resnet50", "amp-bf16", 256, ()),
)


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def hand_step(case: Case, inputs: dict[str, torch.Tensor], device: str) -> Callable[[], None]:
    """The training step a user writes: zero_grad, forward under autocast, loss, backward, step."""
    job = make_job(case, Settings(), device)
    layout = torch.channels_last if case.workload == "resnet50" else torch.contiguous_format
    model = training_module(case.workload, job.params, 0).to(device, memory_format=layout)
    optimizer = OPTIMIZERS[job.workload.optimizer](
        model.parameters(), lr=job.workload.learning_rate
    )
    loss_fn = LOSSES[job.workload.loss]
    args = [t for name, t in inputs.items() if name not in TARGET_NAMES]
    target = next(inputs[name] for name in TARGET_NAMES if name in inputs)
    dtype = AUTOCAST_DTYPES.get(case.precision)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):
            output = model(*args)
        loss_fn(output.float(), target).backward()
        optimizer.step()

    return step


def timed(step: Callable[[], object], steps: int, sync_each: bool) -> float:
    """ms per step over `steps` steps; the window starts and ends synchronised."""
    synchronize()
    began = time.perf_counter()
    for _ in range(steps):
        step()
        if sync_each:
            synchronize()
    synchronize()
    return (time.perf_counter() - began) / steps * 1000.0


def laid_out(array: object, device: str, workload: str) -> torch.Tensor:
    tensor = torch.from_numpy(array).to(device)
    if tensor.dim() == 4 and workload == "resnet50":
        return tensor.contiguous(memory_format=torch.channels_last)
    return tensor


def compare(case: Case, device: str, rounds: int, window: int) -> None:
    """Time the three ways in interleaved rounds and print the ratios."""
    job = make_job(case, Settings(), device)
    prepared = TorchBackend().prepare(job)  # dlbench's step, synchronised inside
    arrays = job.inputs(mode="train")
    inputs = {name: laid_out(a, device, case.workload) for name, a in arrays.items()}
    hand = hand_step(case, inputs, device)
    for warm in (prepared.step, hand):
        timed(warm, 5, sync_each=True)
    ways: list[tuple[str, Callable[[], float]]] = [
        ("dlbench", lambda: timed(prepared.step, window, sync_each=False)),
        ("synced", lambda: timed(hand, window, sync_each=True)),
        ("window", lambda: timed(hand, window, sync_each=False)),
    ]
    rows = []
    for index in range(rounds):
        order = ways if index % 2 == 0 else ways[::-1]
        rows.append({name: measure() for name, measure in order})
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    sync_cost = [r["synced"] / r["window"] for r in rows]
    harness = [r["dlbench"] / r["synced"] for r in rows]
    print(f"{case.label()}: ms/step dlbench {med['dlbench']:.2f}, hand synced "
          f"{med['synced']:.2f}, hand window {med['window']:.2f}")  # fmt: skip
    print(f"  synced/window per round {[round(x, 3) for x in sync_cost]} "
          f"median {statistics.median(sync_cost):.3f}")  # fmt: skip
    print(f"  dlbench/synced per round {[round(x, 3) for x in harness]} "
          f"median {statistics.median(harness):.3f}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--window", type=int, default=15)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--small", action="store_true", help="fp32, batch 2, sequence 32")
    args = parser.parse_args()
    device = args.device
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else device
    print(f"{name}, torch {torch.__version__}; K={args.window}")
    for workload, precision, batch, params in CASES:
        if args.small:
            precision, batch, params = "fp32", 2, tuple((k, 32) for k, _ in params)
        case = Case(workload, "torch", "eager", mode="train", device=device.split(":")[0],
                    precision=precision, batch_size=batch, threads=torch.get_num_threads(),
                    params=params)  # fmt: skip
        compare(case, device, args.rounds, args.window)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
