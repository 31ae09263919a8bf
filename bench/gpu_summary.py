"""One line per result of the run files given: what the GPU validation's summary shows.

    python bench/gpu_summary.py RUN.json [RUN.json ...]

For each result: its case, status, rate, efficiency against the run's ceilings,
and for a pipelined (throughput-mode) result the synchronised rate beside it
(what the per-step synchronise costs), the share of a step's interval its
kernels filled, its hidden synchronisations and its flags; for a generation,
TPOT and the decode rate. Read with dlbench's own readers, so it shows what
`dlbench show` would.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dlbench.results.ceilings import efficiency_in_run
from dlbench.results.files import read_json
from dlbench.results.records import Result, Run


def line(result: Result, run: Run) -> str:
    case = result.case.label()
    if not result.ok:
        return f"{case}: {result.status}: {result.error}"
    parts = [f"{result.throughput:,.1f}/s" if result.throughput else "-"]
    efficiency = efficiency_in_run(result, run)
    if efficiency:
        parts.append(f"{100 * efficiency['fraction']:.0f}% of {efficiency['basis']}")
    pipelined = result.details.pipelined
    if pipelined is not None and pipelined.synced_samples_per_s:
        ratio = result.throughput / pipelined.synced_samples_per_s if result.throughput else 0
        parts.append(f"synced {pipelined.synced_samples_per_s:,.1f}/s (pipelined {ratio:.3f}x)")
    if pipelined is not None and pipelined.device_busy is not None:
        parts.append(f"kernels {100 * pipelined.device_busy:.0f}% of the interval")
    if pipelined is not None and pipelined.hidden_syncs is not None:
        parts.append(f"{pipelined.hidden_syncs} hidden syncs")
    generation = result.details.generation
    if generation is not None and generation.tpot_p50_ms:
        parts.append(f"TPOT {generation.tpot_p50_ms:.2f} ms")
        parts.append(f"decode {generation.decode_tokens_per_s or 0:,.1f} tok/s")
    if result.flags:
        parts.append("flags " + ",".join(result.flags))
    return f"{case}: " + "; ".join(parts)


def main(paths: list[str]) -> int:
    for path in paths:
        try:
            run = read_json(Path(path))
        except Exception as exc:  # a step cut off mid-write: say so, read the others
            print(f"{path}: unreadable ({exc})")
            continue
        for result in run.results:
            print(line(result, run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
