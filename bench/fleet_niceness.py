"""What does Ray's worker niceness cost a fleet node's run beside other work?

    python bench/fleet_niceness.py [--rounds 3] [--busy 6] [--min-time 1]

Ray starts its task workers at niceness 15 unless the task's environment sets
RAY_worker_niceness; `dlbench fleet run` sets it to 0 (launch/fleet.py). This
starts a local Ray instance (one node, this machine) and `--busy` processes
spinning at niceness 0 (other work on the node), then, round by round and in
alternating order, runs the fleet's own node task (streamed_node_task: a
one-case `null` suite measured for --min-time seconds) once at niceness 15 and
once at 0. It prints each task's wall time (sent to answered, its worker's
start included) and the niceness its run's fingerprint recorded, then the
median ratio 15/0. With --busy 0 the two should agree (nothing to yield to).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray

from dlbench.launch.fleet import RAY_WORKER_NICENESS_ENV, streamed_node_task

SUITE = """
name: niceness
settings: {{min_time: {min_time}, min_iters: 3, warmup: 1}}
cases:
  - {{workload: mlp, framework: "null"}}
"""
NICENESS = (15, 0)


def timed_task(suite: Path, niceness: int) -> tuple[float, int]:
    """Seconds from sending the node task to its answer, and the run's niceness."""
    task = ray.remote(streamed_node_task).options(
        num_returns="streaming",
        max_retries=0,
        runtime_env={"env_vars": {RAY_WORKER_NICENESS_ENV: str(niceness)}},
    )
    started = time.monotonic()
    *_, answer = (ray.get(ref) for ref in task.remote(str(suite), suite.read_text(), [], None))
    seconds = time.monotonic() - started
    if answer["run"] is None or answer["returncode"] != 0:
        sys.exit(f"the node's run failed: {answer['output']}")
    return seconds, answer["run"]["env"]["niceness"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=6, help="spinning processes beside")
    parser.add_argument("--min-time", type=float, default=1.0)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="fleet-niceness-"))
    suite = folder / "niceness.yaml"
    suite.write_text(SUITE.format(min_time=args.min_time))
    ray.init(num_cpus=1, log_to_driver=False, logging_level="ERROR")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    seconds: dict[int, list[float]] = {n: [] for n in NICENESS}
    try:
        for round_no in range(args.rounds):
            order = NICENESS if round_no % 2 == 0 else NICENESS[::-1]
            for niceness in order:
                took, recorded = timed_task(suite, niceness)
                seconds[niceness].append(took)
                print(f"round {round_no + 1}: niceness {niceness:2d} (run recorded {recorded}): "
                      f"{took:6.1f} s", flush=True)  # fmt: skip
    finally:
        for process in busy:
            process.kill()
        ray.shutdown()
    medians = {n: statistics.median(values) for n, values in seconds.items()}
    print(f"median: niceness 15 {medians[15]:.1f} s, niceness 0 {medians[0]:.1f} s, "
          f"ratio {medians[15] / medians[0]:.1f}x ({args.busy} busy processes)")  # fmt: skip


if __name__ == "__main__":
    main()
