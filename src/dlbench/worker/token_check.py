"""An engine's greedy tokens held to the torch reference's (results.details.TokenCheck).

Greedy decoding picks the largest logit. Two engines computing the same
function at fp32 round differently, so where the reference's top two logits
are closer than rounding can tell apart (the precision's tolerance, relative
to the logits' magnitude as the output check's is), either token is right: the
divergence is a near tie, reported, and the case passes. A divergence at a
clear margin means the engine computed something else: the case fails. After
the first divergence the sequences differ in context, so what follows is
counted but proves nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from dlbench.results.details import TokenCheck

IDENTICAL, NEAR_TIE, DIVERGED = "identical", "near tie", "diverged"


def check_tokens(
    tokens: Sequence[Sequence[int]], reference: Mapping[str, np.ndarray], tolerance: float
) -> TokenCheck:
    """Compare [batch][osl] tokens with the reference's; the first divergence decides."""
    expected = reference["tokens"]
    got = np.asarray(tokens, dtype=np.int64)
    if got.shape != expected.shape:
        return TokenCheck(verdict=f"{DIVERGED}: shape {list(got.shape)} against "
                          f"the reference's {list(expected.shape)}")  # fmt: skip
    equal = got == expected
    check = TokenCheck(compared=int(equal.size), agreeing=int(equal.sum()), verdict=IDENTICAL)
    if equal.all():
        return check
    # the earliest output position where any sequence of the batch diverges
    first = int(np.argmin(equal.all(axis=0)))
    rows = np.flatnonzero(~equal[:, first])
    top1, top2 = reference["top1"][rows, first], reference["top2"][rows, first]
    margins = top1 - top2
    bounds = tolerance * np.maximum(1.0, np.abs(top1))
    return replace(
        check,
        first_divergence=first,
        margin_there=float(margins.max()),
        near_tie_bound=float(bounds[int(margins.argmax())]),
        verdict=NEAR_TIE if bool((margins <= bounds).all()) else DIVERGED,
    )


def check_generations(
    generations: Sequence[Sequence[Sequence[int]]],
    reference: Mapping[str, np.ndarray],
    tolerance: float,
) -> TokenCheck:
    """Each of an engine's repeated generations held to the reference on its own; the
    worst of them is the check, with whether they agree with one another.

    A GPU's bf16 kernels need not give the same bits twice (cuBLAS picks among
    reductions), and on a random model's near-flat logits one bit can turn a near
    tie the other way; each generation that departs from the reference only at a near
    tie is right. One that departs at a clear margin fails the case, whichever it is."""
    distinct = list(dict.fromkeys(_frozen(tokens) for tokens in generations))
    checks = [check_tokens(tokens, reference, tolerance) for tokens in distinct]
    worst = max(checks, key=_badness)
    return replace(worst, generations_agree=len(distinct) == 1)


def _frozen(tokens: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(token) for token in row) for row in tokens)


def _badness(check: TokenCheck) -> tuple[int, float]:
    """A clear divergence over a near tie over identical; among near ties the one
    closest to failing (its margin nearest its bound), among divergences the earliest."""
    rank = {IDENTICAL: 0, NEAR_TIE: 1}.get(check.verdict or "", 2)
    if rank == 1 and check.margin_there is not None and check.near_tie_bound:
        return rank, check.margin_there / check.near_tie_bound
    return rank, -check.first_divergence if check.first_divergence is not None else 0.0


def failure(check: TokenCheck) -> str | None:
    """The case's error where its tokens diverged at a clear margin, else None."""
    if check.verdict is None or not check.verdict.startswith(DIVERGED):
        return None
    if check.first_divergence is None:
        return f"generated tokens {check.verdict}"
    return (
        f"generated tokens diverge from the torch reference's at output position "
        f"{check.first_divergence}, where its top two logits are {check.margin_there:.3g} "
        f"apart (a near tie is at most {check.near_tie_bound:.3g})"
    )
