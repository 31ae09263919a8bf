"""Every exception dlbench raises on purpose, in one place.

Which one is raised decides what the user sees: a UserError is one line and
exit code 2; a CaseError or CaseSkipped inside a worker becomes a failed or
skipped result and the run goes on; RunInterrupted is Ctrl-C with the
finished cases kept, and RunBroken a store or file fault in the middle of
a run, with the stored cases kept too. Anything else escaping is a dlbench
bug and keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

# Lines of a framework's error that say where it was raised, not why:
# OpenVINO's "Exception from src/...cpp:84:" and "Check 'x' failed at ...:151:",
# and the C++ function signatures ONNX Runtime puts before its reason.
LOCATION_LINE = re.compile(r"(Exception from|Check '.*' failed at) \S+:\d+:?")
# A traceback carried inside a message (TorchScript's interpreter, TensorFlow's
# py_func) ends with the line that names the exception: that line is the cause.
EXCEPTION_LINE = re.compile(r"(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt): \S.*")
CPP_FRAME = re.compile(
    r"\s*/?[\w./-]+\.(?:cc|cpp|cxx|h|hpp):\d+\s+[\w:~<>]+\([^()]*\)(?:\s*const)?\s*"
)


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
    `detail` keeps what the message shortened (a framework's whole error), for
    the result's error_detail.
    """

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail


class UntrustedModel(CaseError):
    """A model file only unsafe loading can read (a Keras Lambda layer's code), and
    --trust-model was not given. Raised by the loader; the parent's pre-run check
    (launch.preflight) turns it into a UserError, so no run is stored for it.
    """


class CaseSkipped(CaseError):
    """The device cannot do what the case asks (a precision it has no units for).

    Recorded with status "skipped" and this message as the reason: a run
    over a matrix of precisions stays green on hardware that lacks some.
    """

    device: str | None = None  # the resolved device, set by the worker


class ReferenceUnavailable(Exception):
    """The reference or the export could not be made (torch missing, export failed)."""


class StoppedRun(Protocol):
    """The run a stopped run's error holds (a results.records.Run, a room above this)."""

    @property
    def id(self) -> str: ...
    @property
    def results(self) -> Sequence[object]: ...


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: the finished cases are stored; `run` (a Run) holds them."""

    def __init__(self, run: StoppedRun) -> None:
        super().__init__(run.id)
        self.run = run


class RunBroken(UserError):
    """A store or file fault in the middle of a run (a full disk, a lock held too long):
    the cases stored so far are kept; `run` holds them and can be resumed."""

    def __init__(self, run: StoppedRun, cause: str) -> None:
        super().__init__(cause)
        self.run = run


def first_line(message: str | BaseException, limit: int = 300) -> str:
    """The first non-blank line of an error message, shortened: tables stay readable."""
    text = str(message) or (type(message).__name__ if isinstance(message, BaseException) else "")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "(no message)")
    return _shortened(line, limit)


def cause_summary(message: str | BaseException, limit: int = 300) -> str:
    """A framework's error in one line that names the cause.

    Frameworks put the cause below lines that only locate the throw
    (OpenVINO: "Exception from src/inference/src/cpp/core.cpp:84:" and then,
    lines down, "Model wasn't fully converted ... No conversion rule found for
    operations: ..."). The location lines are dropped and the rest joined.
    """
    text = str(message) or (type(message).__name__ if isinstance(message, BaseException) else "")
    lines = [CPP_FRAME.sub(" ", ln).strip() for ln in text.splitlines()]
    if any(ln.startswith("Traceback") for ln in lines):
        raised = [ln for ln in lines if EXCEPTION_LINE.fullmatch(ln)]
        if raised:
            return _shortened(raised[-1], limit)
    kept = [ln for ln in lines if ln and not LOCATION_LINE.fullmatch(ln)]
    return _shortened(" ".join(kept) or first_line(text, limit), limit)


def _shortened(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
