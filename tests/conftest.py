"""Shared fixtures: every test gets its own store, never the user's."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dlbench.spec.case import Case, Settings
from dlbench.worker.compile_cache import SHARED_CACHE_ENV


@pytest.fixture(autouse=True, scope="session")
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One artifact cache (ONNX exports, reference outputs) for the whole session."""
    import os

    cache = tmp_path_factory.mktemp("artifacts")
    os.environ["DLBENCH_CACHE"] = str(cache)
    # torch.compile's caches shared by every worker of the session: the same small
    # graphs compile once (test_every_compile_is_cold... unsets it and proves cold).
    os.environ[SHARED_CACHE_ENV] = str(tmp_path_factory.mktemp("compile-cache"))
    return cache


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
