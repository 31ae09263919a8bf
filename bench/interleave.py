"""What every bench/ comparison of dlbench with a hand-written loop shares.

The hand loop runs with the thread variables dlbench's worker sets, so the two
sides differ only by the harness; and the rounds alternate which side goes
first, so drift in the machine's load favours neither.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable


def thread_env(threads: int) -> dict[str, str]:
    """The environment for a hand loop: dlbench's thread variables set before import.

    On a 2-core machine torch's MLP ran ~15% faster with OMP_NUM_THREADS set
    than with torch.set_num_threads alone.
    """
    from dlbench.worker.process import THREAD_VARS

    return {**os.environ, **dict.fromkeys(THREAD_VARS, str(threads))}


def interleaved_rounds(
    rounds: int,
    ours: Callable[[], float],
    hand: Callable[[], float],
    after_round: Callable[[int, float, float], None] | None = None,
) -> tuple[list[float], list[float]]:
    """Measure both sides `rounds` times, alternating who goes first; (ours, hand)."""
    ours_values: list[float] = []
    hand_values: list[float] = []
    for index in range(rounds):
        if index % 2 == 0:
            ours_values.append(ours())
            hand_values.append(hand())
        else:
            hand_values.append(hand())
            ours_values.append(ours())
        if after_round is not None:
            after_round(index, ours_values[-1], hand_values[-1])
    return ours_values, hand_values


def bench_parser(doc: str, min_time: float = 2.0) -> argparse.ArgumentParser:
    """The options every side-by-side bench takes: rounds, seconds a side, threads."""
    from dlbench.spec.case import available_cpus

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=min_time)
    parser.add_argument("--threads", type=int, default=available_cpus())
    return parser
