"""The range and name checks every part of a case's validation shares: each raises a
UserError that names the field, the bad value and what is allowed; and the wording of
a refusal that names options given where they do not apply."""

from __future__ import annotations

from collections.abc import Sequence

from dlbench.errors import UserError


def options_go(given: Sequence[str]) -> str:
    """ "--a, --b go" or "--a goes": the options a refusal names, and its verb."""
    return f"{', '.join(given)} {'goes' if len(given) == 1 else 'go'}"


def require_known(what: str, value: object, allowed: Sequence[str]) -> None:
    """A name from a fixed list (a scenario, a mode), or a UserError listing the list."""
    if value not in allowed:
        raise UserError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")


def require_int(what: str, value: object, low: int, high: int) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    _require(ok, what, value, f"an integer from {low} to {high}")


def _require(ok: bool, what: str, value: object, allowed: str) -> None:
    if not ok:
        raise UserError(f"invalid {what} {value!r}; expected {allowed}")
