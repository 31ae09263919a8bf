"""An engine's server, started by the worker for its case and stopped at its end.

The server runs in a process group of its own, its output in a log beside the run
(worker.files). `ready` waits for its health path with a deadline, and fails the case
naming the engine's own error line where the server exits first. `stop` ends the whole
group (the engine's own processes are the server's children): SIGTERM, a grace for its
shutdown, then SIGKILL to whatever is left. It runs when the case ends however it
ends, an exception included; where the worker itself is killed, the server's starter
watch kills the group (backends/vllm/vllm_main.py). A server that exits during the
run is `exited()`, and the case fails with the last lines of its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import httpx

from dlbench.backends.openai_server import LOOPBACK, ServerLaunch
from dlbench.errors import CaseError
from dlbench.worker.thread_vars import THREAD_VARS

# Lines of the server's log a failure keeps (its error_detail)
LOG_TAIL_LINES = 30
# How often the wait for readiness looks, and how long one look may take
POLL_S = 0.5
PROBE_TIMEOUT_S = 2.0
# SIGTERM's grace: vLLM's engine shuts its workers down in a few seconds
STOP_GRACE_S = 20.0
# The line of a server's log that names why it stopped (the backend's rule)
CauseReader = Callable[[str], str | None]


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def require_free(port: int) -> None:
    """A port asked for (--option port=N) that something else holds is the case's error,
    said before a server starts on it."""
    with socket.socket() as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError as exc:
            raise CaseError(
                f"port {port} on {LOOPBACK} is in use ({exc.strerror}); give "
                "another with --option port=N, or none for a free one"
            ) from None


class EngineServer:
    """One server process group, its log, and its lifetime (a context manager)."""

    def __init__(self, launch: ServerLaunch, log_path: Path, cause: CauseReader) -> None:
        self.launch, self.log_path, self.cause = launch, log_path, cause
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_s: float | None = None

    def __enter__(self) -> EngineServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # the worker's thread variables are its own: the server's are the backend's
        inherited = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
        with open(self.log_path, "wb") as log:  # a file: a pipe nobody reads would fill
            # a session of its own is a process group of its own, whose id is the
            # server's pid, on every Python (Popen's process_group is 3.11's); the worker
            # already has no terminal to detach from
            self.process = subprocess.Popen(
                self.launch.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**inherited, **self.launch.env}, start_new_session=True,
            )  # fmt: skip
        if self.launch.cpus is not None:  # before it starts its engine: they inherit it
            os.sched_setaffinity(self.process.pid, self.launch.cpus)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self.stop()

    def ready(self, deadline_s: float) -> None:
        """Wait until the health path answers 200; CaseError where the server exits
        first (naming its own error line) or the deadline passes."""
        started = time.perf_counter()
        health = self.launch.url + self.launch.health_path
        while True:
            if self.exited() is not None:
                raise self.failure("stopped before it served")
            try:
                if httpx.get(health, timeout=PROBE_TIMEOUT_S).status_code == 200:
                    self.ready_s = time.perf_counter() - started
                    return
            except httpx.TransportError:
                pass  # not listening yet
            if time.perf_counter() - started > deadline_s:
                raise self.failure(f"did not answer {self.launch.health_path} within "
                                   f"{deadline_s:g} s")  # fmt: skip
            time.sleep(POLL_S)

    def exited(self) -> int | None:
        """Its exit status once it has exited, else None."""
        return None if self.process is None else self.process.poll()

    def exit_watch(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """A future of `loop`'s, done once the server's leader has exited (or cancelled
        by whoever stops watching). Its requests cannot be trusted to fail when it
        dies: vLLM's engine processes, orphaned, may hold its sockets open, and a
        request then waits for its read timeout, the case's whole --timeout.

        The loop watches a pidfd, readable once the process has exited (no polling);
        where the OS has none, it looks every POLL_S."""
        assert self.process is not None  # entered
        process, gone = self.process, loop.create_future()
        try:
            descriptor = os.pidfd_open(process.pid)
        except (AttributeError, OSError):  # not Linux 5.3+
            look = loop.create_task(_look_until_exited(process, gone))
            gone.add_done_callback(lambda _: look.cancel())
            return gone
        loop.add_reader(descriptor, _settle, gone)

        def forget(_: asyncio.Future[None]) -> None:
            loop.remove_reader(descriptor)
            os.close(descriptor)

        gone.add_done_callback(forget)
        return gone

    def failure(self, what: str) -> CaseError:
        """The case's error: the engine `what` (and its exit status), its own line
        naming why, and the last lines of its log as the detail."""
        log = self.log_text()
        status = self.exited()
        how = "" if status is None else f" ({_exit_words(status)})"
        cause = self.cause(log)
        message = f"{self.launch.engine}'s server {what}{how}"
        if cause:
            message += f": {cause}"
        tail = "\n".join(log.splitlines()[-LOG_TAIL_LINES:]) or "(its log is empty)"
        return CaseError(message, detail=f"{self.log_path}, its last lines:\n{tail}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """End the whole group: SIGTERM, then SIGKILL after the grace (also to what its
        leader left behind)."""
        if self.process is None:
            return
        group = self.process.pid  # a new session: the group is the server's pid
        _signal_group(group, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_GRACE_S)
        _signal_group(group, signal.SIGKILL)
        self.process.wait()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _look_until_exited(process: subprocess.Popen[bytes],
                             gone: asyncio.Future[None]) -> None:  # fmt: skip
    while process.poll() is None:
        await asyncio.sleep(POLL_S)
    _settle(gone)


def _signal_group(group: int, number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group has no process left
        os.killpg(group, number)


def _exit_words(status: int) -> str:
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exit status {status}"
