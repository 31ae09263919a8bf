"""OpenMP's wait policy on an oversubscribed machine: the CPU a torch forward burns.

The test suite runs three test processes on two cores, each starting workers, so
its cores are always oversubscribed; tests/conftest.py sets OMP_WAIT_POLICY=PASSIVE
for that reason. This bench measures why. Beside --busy processes that each spin a
core, a fresh process builds ResNet-50 (dlbench's seeded builder, image 64, batch 2)
and times --forwards forwards, in three settings interleaved over --rounds:

- two threads, libgomp's default wait (it spins at each barrier before it sleeps);
- two threads, OMP_WAIT_POLICY=PASSIVE (it sleeps at once);
- one thread (no barrier to wait at).

Printed per setting: the process's CPU per forward and its wall time per forward
(medians over the rounds), and each setting's CPU over the passive one's. Run with
--busy 0 to see the same on an idle machine, where spinning costs little.

Run: python bench/omp_wait_under_load.py [--rounds 3] [--busy 2] [--forwards 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# One measurement, in a process of its own: libgomp reads its wait policy as it loads
FORWARDS = """
import json, sys, time
import torch
torch.set_num_threads(int(sys.argv[1]))
from dlbench.backends.torch.models import reference_module
model = reference_module("resnet50", {"image": 64}, 0)
images = torch.randn(2, 3, 64, 64)
count = int(sys.argv[2])
with torch.no_grad():
    model(images)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        model(images)
    print(json.dumps({"cpu_ms": (time.process_time() - cpu) / count * 1e3,
                      "wall_ms": (time.perf_counter() - wall) / count * 1e3}))
"""
SPIN = "while True: pass"
# name: (threads, OMP_WAIT_POLICY or None for libgomp's default)
SETTINGS = {"2 threads, default wait": (2, None), "2 threads, passive wait": (2, "PASSIVE"),
            "1 thread": (1, None)}  # fmt: skip


def measure(threads: int, policy: str | None, forwards: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    done = subprocess.run([sys.executable, "-c", FORWARDS, str(threads), str(forwards)],
                          env=env, capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2, help="processes spinning a core each")
    parser.add_argument("--forwards", type=int, default=30)
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
    readings: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    try:
        for round_index in range(args.rounds):
            for name, (threads, policy) in SETTINGS.items():  # interleaved, round by round
                readings[name].append(measure(threads, policy, args.forwards))
            print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for hog in hogs:
            hog.kill()
    passive = statistics.median(r["cpu_ms"] for r in readings["2 threads, passive wait"])
    print(f"ResNet-50 forward (image 64, batch 2) beside {args.busy} busy processes, "
          f"{os.cpu_count()} CPUs, median of {args.rounds} rounds:")  # fmt: skip
    for name, values in readings.items():
        cpu = statistics.median(r["cpu_ms"] for r in values)
        wall = statistics.median(r["wall_ms"] for r in values)
        print(f"  {name:24} CPU {cpu:8.1f} ms  wall {wall:8.1f} ms  CPU / passive's "
              f"{cpu / passive:6.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
