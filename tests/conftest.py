"""Shared fixtures: every test gets its own store, never the user's."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlbench.spec.case import Case, Settings
from dlbench.worker.compile_cache import SHARED_CACHE_ENV

SESSION_TEMP: list[Path] = []  # the session's folder, shared by its test processes

# A shell without job control starts its background commands with SIGINT ignored, and
# children inherit that: the Ctrl-C tests' SIGINT would then be lost on dlbench. The test
# process takes Python's own handler back, so that it and the processes it starts (which
# begin with the default disposition) answer SIGINT as under a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def session_folder(name: str) -> Path:
    """A folder of the test session shared by pytest-xdist's test processes (what is
    made once for every test goes there; its writers lock it)."""
    folder = SESSION_TEMP[0] / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(autouse=True, scope="session")
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One artifact cache (ONNX exports, reference outputs) for the whole session,
    shared by pytest-xdist's test processes: dlbench writes it atomically."""
    session_temp = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:  # each test process has its own basetemp
        session_temp = session_temp.parent
    SESSION_TEMP[:] = [session_temp]
    cache = session_temp / "artifacts"
    cache.mkdir(exist_ok=True)
    os.environ["DLBENCH_CACHE"] = str(cache)
    # torch.compile's caches shared by every worker of the session: the same small
    # graphs compile once (test_every_compile_is_cold... unsets it and proves cold).
    compile_cache = session_temp / "compile-cache"
    compile_cache.mkdir(exist_ok=True)
    os.environ[SHARED_CACHE_ENV] = str(compile_cache)
    return cache


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked slow first (in their own order): on several test processes the
    long ones start at once and the short ones fill in behind them, rather than one
    long test running on its own at the end while the others wait. Tests marked
    `alone` last: each waits for every running test to end (below), and at the end
    those are short; among the slow ones at the start, one waited for a minute-long
    test while the cores it would not share stood idle."""
    items.sort(key=lambda item: (is_alone(item), item.get_closest_marker("slow") is None))


def is_alone(item: pytest.Item) -> bool:
    return item.get_closest_marker("alone") is not None


# The suite runs on several test processes (pytest-xdist's -n in addopts). A test
# marked `alone` measures time or CPU use, so nothing else may run beside it:
# every test holds the cores lock shared while it runs (set-up and tear-down
# included), an `alone` test holds it exclusively. The turnstile, taken first,
# lets a waiting `alone` test in before tests that arrive after it.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    with cores_held(item.config, is_alone(item)):
        return (yield)


@contextlib.contextmanager
def cores_held(config: pytest.Config, alone: bool) -> Iterator[None]:
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one test process: nothing runs beside
        yield
        return
    # xdist gives each test process the folder popen-gwN inside the run's own
    locks = Path(config.option.basetemp).parent
    with open(locks / "turnstile", "a") as turnstile, open(locks / "cores", "a") as cores:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(cores, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield  # closing the files releases both locks


@pytest.fixture(autouse=True)
def isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "store.sqlite"
    monkeypatch.setenv("DLBENCH_DB", str(db))
    return db


FAST = Settings(min_time_s=0.0, min_iters=3, warmup_iters=1, timeout_s=120.0)


def null_case(**options: str) -> Case:
    return Case(
        workload="mlp",
        framework="null",
        compile="default",
        device="cpu",
        threads=1,
        options=tuple(sorted(options.items())),
    )


DLBENCH = [sys.executable, "-m", "dlbench"]


def dlbench(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run the real command line, as a user does, and capture what it says."""
    options: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 300}
    return subprocess.run([*DLBENCH, *args], **{**options, **kwargs})


def spawn_dlbench(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Start the command line without waiting, for tests that signal or kill it."""
    options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    return subprocess.Popen([*DLBENCH, *args], **{**options, **kwargs})


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in this process, for what needs no worker (user errors,
    store commands): the same exit code and output as `dlbench`, without a new
    interpreter. The subprocess tests above keep proving the real entry point."""
    from dlbench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's own errors and --help
            code = exit_.code if isinstance(exit_.code, int) else 2
    return subprocess.CompletedProcess([*DLBENCH, *args], code, out.getvalue(), err.getvalue())
