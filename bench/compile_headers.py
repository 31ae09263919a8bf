"""What a machine's first torch.compile adds to a compiled case's first call.

Inductor keeps the precompiled headers its C++ kernels include in its default cache
folder, whatever TORCHINDUCTOR_CACHE_DIR says, so dlbench's private per-worker caches
(worker.compile_cache) leave them warm: only the first compile on a machine (or after
a torch upgrade, or once /tmp is cleared) builds them. This runs the same compiled
case with no headers (a fresh TMPDIR, where Inductor's folder follows) and with them
built (a TMPDIR one earlier run filled), in interleaved rounds, and prints the medians
of `first_call_ms`, their ratio, and whether each side's results carry the flag
`compile-built-headers`.

Run: python bench/compile_headers.py [--rounds 5] [--workload mlp] [--min-time 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from interleave import bench_parser, interleaved_rounds

FLAG = "compile-built-headers"


def first_call_ms(tmpdir: str, args: argparse.Namespace, flags_seen: list[bool]) -> float:
    """One `dlbench run` of the compiled case with TMPDIR at `tmpdir`."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run.json"
        env = {**os.environ, "TMPDIR": tmpdir, "DLBENCH_DB": str(Path(scratch) / "s.sqlite")}
        command = [sys.executable, "-m", "dlbench", "run", "-w", args.workload, "-f", "torch",
                   "-c", "compile", "-t", str(args.threads), "--min-time", str(args.min_time),
                   "-q", "--json", str(out)]  # fmt: skip
        subprocess.run(command, env=env, check=True, capture_output=True)
        (result,) = json.loads(out.read_text())["results"]
    flags_seen.append(FLAG in result["flags"])
    return float(result["first_call_ms"])


def main() -> None:
    parser = bench_parser(__doc__, min_time=0.2)  # the first call is the figure
    parser.add_argument("--workload", default="mlp")
    args = parser.parse_args()
    warm_dir = tempfile.mkdtemp(prefix="bench-headers-warm-")
    first_call_ms(warm_dir, args, [])  # builds the headers there once
    cold_flags: list[bool] = []
    warm_flags: list[bool] = []

    def cold() -> float:
        with tempfile.TemporaryDirectory(prefix="bench-headers-cold-") as fresh:
            return first_call_ms(fresh, args, cold_flags)

    def warm() -> float:
        return first_call_ms(warm_dir, args, warm_flags)

    def report(index: int, cold_ms: float, warm_ms: float) -> None:
        print(f"round {index + 1}: no headers {cold_ms:.0f} ms, built {warm_ms:.0f} ms")

    cold_ms, warm_ms = interleaved_rounds(args.rounds, cold, warm, report)
    ratio = statistics.median(cold_ms) / statistics.median(warm_ms)
    print(f"first_call_ms median: no headers {statistics.median(cold_ms):.0f}, "
          f"built {statistics.median(warm_ms):.0f}, ratio {ratio:.2f}x")  # fmt: skip
    print(f"flagged {FLAG}: no headers {sum(cold_flags)}/{len(cold_flags)}, "
          f"built {sum(warm_flags)}/{len(warm_flags)}")  # fmt: skip


if __name__ == "__main__":
    main()
