"""Every exception dlbench raises on purpose, in one place.

Which one is raised decides what the user sees: a UserError is one line and
exit code 2; a CaseError or CaseSkipped inside a worker becomes a failed or
skipped result and the run goes on; RunInterrupted is Ctrl-C with the
finished cases kept. Anything else escaping is a dlbench bug and keeps its
traceback.
"""

from __future__ import annotations

from typing import Any


class UserError(Exception):
    """A bad config, name, value or file given by the user.

    The CLI prints its message as one line and exits with code 2, without a
    traceback.
    """


class MnistFileError(UserError, ValueError):
    """A missing, truncated or malformed MNIST file; the message is one line.

    A UserError so the command line prints it without a traceback, and a
    ValueError because that is what it is to callers outside the CLI.
    """


class CaseError(Exception):
    """This case cannot run here as asked (device absent, unsupported pair).

    Raised inside the worker; the case is recorded as failed with this message.
    """


class CaseSkipped(CaseError):
    """The device cannot do what the case asks (a precision it has no units for).

    Recorded with status "skipped" and this message as the reason: a run
    over a matrix of precisions stays green on hardware that lacks some.
    """

    device: str | None = None  # the resolved device, set by the worker


class ReferenceUnavailable(Exception):
    """The reference or the export could not be made (torch missing, export failed)."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: the finished cases are stored; `run` (a Run) holds them."""

    def __init__(self, run: Any) -> None:
        super().__init__(run.id)
        self.run = run
