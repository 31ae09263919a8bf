"""What a dlbench process costs to start: a worker's imports and a planning command.

Every case runs in a worker process of its own, and every command is a process:
their start-up is paid hundreds of times by a long run (and by the test suite).
This measures the CPU seconds of (1) importing what a worker imports before its
framework, and (2) `dlbench run -w mlp -f null --dry-run`, each in fresh
processes, for this checkout's `src/` and, with --against, another checkout's
(say, a `git worktree` of the commit before a change), in interleaved rounds, and
prints the medians and their ratio.

Run: python bench/startup_cost.py [--against OTHER/src] [--rounds 12]
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from interleave import interleaved_rounds

from dlbench.launch.worker_entry import WORKER_ENTRY

# what a spawned worker imports before its case's framework (launch.runner sends it so)
WORKER_IMPORTS = (
    "from dlbench.launch.worker_entry import import_in_worker; "
    f"import_in_worker({WORKER_ENTRY[0]!r})"
)
COMMANDS = {
    "a worker's imports": [sys.executable, "-c", WORKER_IMPORTS],
    "run --dry-run": [
        sys.executable,
        "-m",
        "dlbench",
        "run",
        "--dry-run",
        "-w",
        "mlp",
        "-f",
        "null",
    ],
}
THIS_SRC = Path(__file__).resolve().parent.parent / "src"


def cpu_s(source: Path, command: list[str]) -> float:
    """The CPU seconds (user and system) of `command` run with `source` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout's src/ folder to compare with")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    other = args.against or THIS_SRC
    for name, command in COMMANDS.items():
        ours, theirs = interleaved_rounds(
            args.rounds,
            functools.partial(cpu_s, THIS_SRC, command),
            functools.partial(cpu_s, other, command),
        )
        line = f"{name}: {statistics.median(ours) * 1000:.0f} ms CPU (median of {args.rounds})"
        if args.against:
            ratio = statistics.median(ours) / statistics.median(theirs)
            line += f"; against {statistics.median(theirs) * 1000:.0f} ms: {ratio:.3f}x"
        print(line)


if __name__ == "__main__":
    main()
