"""Shared fixtures: every test gets its own store, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlbench.config import Case, Settings


@pytest.fixture(autouse=True, scope="session")
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One artifact cache (ONNX exports, reference outputs) for the whole session."""
    import os

    cache = tmp_path_factory.mktemp("artifacts")
    os.environ["DLBENCH_CACHE"] = str(cache)
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
