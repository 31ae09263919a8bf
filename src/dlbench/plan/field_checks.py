"""The name check every part of a case's validation shares (a UserError naming the
field, the bad value and what is allowed), and the wording of a refusal that names
options given where they do not apply. A number's range is its option's reader's
(spec.cli_options), held to in plan.validate."""

from __future__ import annotations

from collections.abc import Sequence

from dlbench.errors import UserError


def options_go(given: Sequence[str]) -> str:
    """ "--a, --b go" or "--a goes": the options a refusal names, and its verb."""
    return f"{', '.join(given)} {'goes' if len(given) == 1 else 'go'}"


def require_known(what: str, value: object, allowed: Sequence[str]) -> str:
    """A name from a fixed list (a scenario, a mode), or a UserError listing the list."""
    if not isinstance(value, str) or value not in allowed:
        raise UserError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
    return value
