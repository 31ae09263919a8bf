"""How often does `dlbench history` call a change where there is none, and does it find
a step at the run where it began?

    python bench/history_calibration.py [--series 500] [--noise 0.01] [--min-change 1]

Draws seeded series of Gaussian noise around a level (`--noise`: its standard
deviation, relative), flat or with a step of 5% or 20% at the middle run, of 12,
30 and 100 runs, and runs dlbench's change-point detection on each
(report.history.find_changes: Apache Otava, with history's defaults but
`--min-change` and `--window`). It prints, per length:

- flat: the share of flat series with any change point (false changes);
- step: the share of stepped series whose only change is at the right run.

Needs `pip install --no-deps apache-otava` (history's change points).
The numbers docs/methodology.md quotes are this script's, with its defaults.
"""

from __future__ import annotations

import argparse

import numpy as np

from dlbench.report.history import DEFAULT_WINDOW, ChangeMethod, find_changes

LENGTHS = (12, 30, 100)
STEPS = (1.05, 1.20)


def series(length: int, step: float, noise: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    level = np.where(np.arange(length) >= length // 2, step, 1.0)
    return list(10.0 * level * (1 + noise * rng.standard_normal(length)))


def share(method: ChangeMethod, length: int, step: float, noise: float, count: int) -> float:
    """Flat (step 1): the share with any change; else the share found at the step alone."""
    hits = 0
    for seed in range(count):
        found = [c.index for c in find_changes(series(length, step, noise, seed), method)]
        hits += bool(found) if step == 1.0 else found == [length // 2]
    return hits / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=500, help="series per cell")
    parser.add_argument("--noise", type=float, default=0.01, help="relative std deviation")
    parser.add_argument("--min-change", type=float, default=1.0, help="in %%, as history's")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    args = parser.parse_args()
    method = ChangeMethod(window=args.window, min_change=args.min_change / 100)
    print(method.describe())
    print(f"noise {100 * args.noise:g}%, {args.series} series per cell")
    print("runs  flat: any change  " + "  ".join(f"{s - 1:+.0%} step: found" for s in STEPS))
    for length in LENGTHS:
        flat = share(method, length, 1.0, args.noise, args.series)
        steps = [share(method, length, s, args.noise, args.series) for s in STEPS]
        print(f"{length:4d}  {flat:16.1%}  " + "  ".join(f"{s:16.1%}" for s in steps))


if __name__ == "__main__":
    main()
