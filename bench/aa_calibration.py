"""Does compare's gate survive an A/A test, and does it catch real slowdowns?

    python bench/aa_calibration.py [--runs 6] [--repeat 5] [--min-time 0.1] [--keep DIR]

Runs the same cases (`gemm` and `mlp` on torch, 2 threads) `--runs` times,
and, interleaved with them round by round, two planted slowdowns of `gemm`
that keep its identity, made from outside dlbench: each runs another case
(1 thread instead of 2: about 2x; a 1.0625x larger matrix: about 20% more
work) and its run file is then given the baseline's identity, so compare
pairs it with the baseline (its GFLOP/s still count the work done). Then it
compares every pair of
identical runs (A/A) and every baseline run with every planted one, and
prints:

- the gate's false-alarm rate at --fail-on-regression 5 and 10 (A/A pairs);
- the detection rate of each planted slowdown at the same thresholds;
- how many worker processes were flagged `interference` (results.flags: other
  processes contending for the case's CPUs over a tenth of its measured
  window). On a quiet machine nothing else runs, so each one is a false alarm
  of that flag, and the target is none. Runs loaded with --load keep the
  flags the dlbench that made them decided.

Targets on a 2-CPU machine with --repeat 5: false alarms at most 5%, the 2x
slowdown always caught, the 20% one at least 80% of the time. `--repeat 1`
shows what single-process comparisons do (all inconclusive by design).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dlbench.report.compare import compare_runs, regressions
from dlbench.results.records import Run
from dlbench.results.repeats import processes, summary_of
from dlbench.workloads import get_workload

# Each plant: the options that slow the case down, and the identity fields they
# change, put back to the baseline's in the run file.
GEMM_SIZE = get_workload("gemm").resolve_params("cpu", {})["size"]
PLANTED_GEMM_SIZE = round(GEMM_SIZE * 1.0625)
PLANTS = {
    "2x (1 thread)": (["--threads", "1", "--interop-threads", "2"], {"threads": 2}),
    "~20% (size x1.0625)": (
        ["--param", f"size={PLANTED_GEMM_SIZE}"],
        {"params": {"size": GEMM_SIZE}},
    ),
}
THRESHOLDS = (5.0, 10.0)


def run_once(
    folder: Path, name: str, workloads: list[str], args: argparse.Namespace, plant: str
) -> Run:
    out = folder / f"{name}.json"
    env = {**os.environ, "DLBENCH_DB": str(folder / "store.sqlite")}
    command = [sys.executable, "-m", "dlbench", "run", "-f", "torch", "--threads", "2"]
    command += [arg for w in workloads for arg in ("-w", w)]
    command += ["--repeat", str(args.repeat), "--min-time", str(args.min_time), "-q"]
    slower, identity = PLANTS[plant] if plant else ([], {})
    done = subprocess.run(
        [*command, *slower, "--json", str(out)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{name}: dlbench failed: {done.stderr[-2000:]}")
    data = json.loads(out.read_text())
    for result in data["results"]:  # the later --threads wins; the baseline's identity back
        result["case"].update(identity)
    out.write_text(json.dumps(data))
    return Run.from_dict(data)


def alarm_rate(pairs: list[tuple[Run, Run]], percent: float, workload: str | None = None) -> float:
    alarms = total = 0
    for a, b in pairs:
        comparison = compare_runs(a, b, "latency")
        flagged = {c.label for c in regressions(comparison, percent)}
        for case in comparison.cases:
            if workload is None or case.label.startswith(workload):
                total += 1
                alarms += case.label in flagged
    return alarms / total if total else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.1)
    parser.add_argument("--keep", type=Path, help="keep the runs' JSON files in this folder")
    parser.add_argument("--load", type=Path, help="analyse runs kept earlier with --keep")
    args = parser.parse_args()
    if args.load is not None:
        report(*load_kept(args.load), args)
        return
    baseline: list[Run] = []
    planted: dict[str, list[Run]] = {name: [] for name in PLANTS}
    with tempfile.TemporaryDirectory(prefix="dlbench-aa-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(args.runs):  # interleaved rounds: drift reaches every arm
            baseline.append(run_once(folder, f"base{index}", ["gemm", "mlp"], args, ""))
            for index_of_plant, name in enumerate(PLANTS):
                run = run_once(folder, f"plant{index}-{index_of_plant}", ["gemm"], args, name)
                planted[name].append(run)
            print(f"round {index + 1}/{args.runs} done", flush=True)
    report(baseline, planted, args)


def load_kept(folder: Path) -> tuple[list[Run], dict[str, list[Run]]]:
    def runs(pattern: str) -> list[Run]:
        return [Run.from_dict(json.loads(p.read_text())) for p in sorted(folder.glob(pattern))]

    planted = {name: runs(f"plant*-{i}.json") for i, name in enumerate(PLANTS)}
    return runs("base*.json"), planted


def interference_flags(runs: list[Run]) -> tuple[int, int]:
    """(processes flagged interference, processes) over the runs' results."""
    listed = [p for run in runs for r in run.results for p in processes(r) or [summary_of(r)]]
    return sum("interference" in p.flags for p in listed), len(listed)


def report(baseline: list[Run], planted: dict[str, list[Run]], args: argparse.Namespace) -> None:
    aa_pairs = list(itertools.combinations(baseline, 2))
    settings = baseline[0].settings
    print(
        f"\n--repeat {settings.get('repeat')}, --min-time {settings.get('min_time_s')}, "
        f"{len(baseline)} runs per arm"
    )
    for percent in THRESHOLDS:
        rate = alarm_rate(aa_pairs, percent)
        print(f"A/A false alarms at --fail-on-regression {percent:g}: {rate:.1%} "
              f"({len(aa_pairs)} pairs x 2 cases)")  # fmt: skip
    flagged, total = interference_flags([*baseline, *itertools.chain(*planted.values())])
    print(f"interference flags (false alarms on a quiet machine): {flagged} of {total} processes")
    for name, runs in planted.items():
        pairs = [(a, b) for a in baseline for b in runs]
        for percent in THRESHOLDS:
            rate = alarm_rate(pairs, percent, workload="gemm")
            print(f"planted {name}: caught at {percent:g}%: {rate:.1%} ({len(pairs)} pairs)")


if __name__ == "__main__":
    main()
