"""What reading and writing a stored run costs: its JSON to a Run (checked) and back.

Every `show`, `compare`, `report` and `export` reads runs from the store, and every
finished case writes one: the records' JSON path (spec.record_dict) is paid for each
sample of each result. This builds one large run (a reference run's first result,
repeated, each with thousands of samples), then, in fresh processes, times
`Run.from_dict` on its parsed JSON and `Run.to_dict` on the Run, for this checkout's
`src/` and, with --against, another checkout's (a `git worktree` of the commit before
a change), in interleaved rounds, and prints the medians and their ratio.

Run: python bench/run_json.py [--against OTHER/src] [--rounds 7] [--results 200]
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

from interleave import interleaved_rounds

THIS_SRC = Path(__file__).resolve().parent.parent / "src"
REFERENCE_RUN = Path(__file__).resolve().parent.parent / "results" / "h100" / "seed-add.json"
# In the child: the parse is not timed, only the records' reading and writing
CHILD = """
import json, sys, time
from dlbench.results.records import Run
data = json.loads(open(sys.argv[1], encoding="utf-8").read())
start = time.process_time()
run = Run.from_dict(data, "bench")
read = time.process_time() - start
start = time.process_time()
run.to_dict()
print(read, time.process_time() - start)
"""


def large_run(results: int, samples: int) -> str:
    """The reference run with `results` copies of its first result, `samples` each."""
    data = json.loads(REFERENCE_RUN.read_text(encoding="utf-8"))
    first = data["results"][0]
    first["samples_ms"] = [1.0 + index * 1e-6 for index in range(samples)]
    data["results"] = [dict(first) for _ in range(results)]
    return json.dumps(data)


def timed(source: Path, path: str) -> tuple[float, float]:
    """(read s, write s) of the run at `path`, with `source` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run([sys.executable, "-c", CHILD, path], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    read, write = done.stdout.split()
    return float(read), float(write)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout's src/ folder to compare with")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--results", type=int, default=200)
    parser.add_argument("--samples", type=int, default=5000)
    args = parser.parse_args()
    other = args.against or THIS_SRC
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        handle.write(large_run(args.results, args.samples))
    try:
        pairs: dict[str, list[tuple[float, float]]] = {"ours": [], "theirs": []}

        def side(name: str, source: Path) -> float:
            pairs[name].append(timed(source, handle.name))
            return 0.0

        interleaved_rounds(args.rounds, lambda: side("ours", THIS_SRC),
                           lambda: side("theirs", other))  # fmt: skip
    finally:
        os.unlink(handle.name)
    print(f"a run of {args.results} results x {args.samples} samples, median of {args.rounds}:")
    for index, what in enumerate(("read (Run.from_dict)", "write (Run.to_dict)")):
        ours = statistics.median(pair[index] for pair in pairs["ours"])
        line = f"{what}: {ours * 1000:.0f} ms CPU"
        if args.against:
            theirs = statistics.median(pair[index] for pair in pairs["theirs"])
            line += f"; against {theirs * 1000:.0f} ms: {ours / theirs:.3f}x"
        print(line)


if __name__ == "__main__":
    main()
