"""Does dlbench's MNIST time-to-train report torch as fast as a hand-written loop?

The hand loop is what the pytorch/examples MNIST script does, minus the
DataLoader: the same network and initial weights, Adadelta (lr 1.0) with
StepLR(0.7), batch 64, over the same in-memory synthetic data, with a
perf_counter around each epoch and `loss.item()` never called inside it.
Both sides run 2 epochs in a fresh process with the same thread settings;
the second epoch's samples/s is compared (the first holds one-off
allocation). Rounds alternate so that machine noise hits both alike.

Prints per-round ratios (dlbench / hand, in samples/s: higher is better for
dlbench) and the verdict on each side's best round. Target: >= 0.95.

Run: python bench/train_fidelity.py [--rounds 5] [--samples 12800] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from interleave import interleaved_rounds, thread_env

from dlbench.launch.runner import run_case
from dlbench.spec.case import Case, Settings, available_cpus

HAND_LOOP = r"""
import json, sys, time
import numpy as np, torch
import torch.nn.functional as F
samples, threads = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads); torch.set_num_interop_threads(threads)
from dlbench.backends.torch.models import reference_module
from dlbench.data.mnist import normalised, synthetic_mnist
data = synthetic_mnist(samples, 1000, 0)
used = samples // 64 * 64
x = torch.from_numpy(normalised(data.train_images[:used]))
y = torch.from_numpy(data.train_labels[:used])
torch.manual_seed(0)
model = reference_module("mnist-cnn", {}, 0).train()
optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
rates = []
for epoch in (1, 2):
    order = torch.from_numpy(np.random.default_rng((0, epoch)).permutation(used))
    start = time.perf_counter()
    for rows in order.view(-1, 64):
        optimizer.zero_grad()
        loss = F.nll_loss(model(x[rows]), y[rows])
        loss.backward()
        optimizer.step()
    float(loss)
    rates.append(used / (time.perf_counter() - start))
    scheduler.step()
print(json.dumps({"samples_per_s": rates[-1]}))
"""


def hand_rate(samples: int, threads: int) -> float:
    done = subprocess.run(
        [sys.executable, "-c", HAND_LOOP, str(samples), str(threads)],
        capture_output=True,
        text=True,
        check=True,
        env=thread_env(threads),
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["samples_per_s"])


def dlbench_rate(samples: int, threads: int) -> float:
    case = Case(
        "mnist-train",
        "torch",
        "eager",
        mode="train",
        device="cpu",
        threads=threads,
        params=(("epochs", 2), ("test_samples", 1000), ("train_samples", samples)),
    )
    result = run_case(case, Settings(timeout_s=1800))
    if not result.ok:
        raise SystemExit(f"dlbench case failed: {result.error}")
    return float(result.details.training.epochs[-1].samples_per_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=12_800)
    parser.add_argument("--threads", type=int, default=available_cpus())
    args = parser.parse_args()

    def report(index: int, ours: float, hand: float) -> None:
        print(
            f"round {index + 1}: dlbench {ours:.0f} samples/s, "
            f"hand {hand:.0f} samples/s, ratio {ours / hand:.3f}",
            flush=True,
        )

    ours, hands = interleaved_rounds(
        args.rounds,
        lambda: dlbench_rate(args.samples, args.threads),
        lambda: hand_rate(args.samples, args.threads),
        report,
    )
    ratios = [o / h for o, h in zip(ours, hands, strict=True)]
    best = max(ours) / max(hands)
    print(f"median per-round ratio {statistics.median(ratios):.3f}")
    verdict = "OK" if best >= 0.95 else "BELOW TARGET"
    print(f"best-of-{args.rounds} ratio dlbench/hand = {best:.3f} (target >= 0.95): {verdict}")


if __name__ == "__main__":
    main()
