"""The README's main command: the quick suite runs end to end with real torch."""

from __future__ import annotations

import json

import pytest
from conftest import assert_page_fits, dlbench

from dlbench.results.details import HEADERS_BUILT
from dlbench.results.flags import COMPILE_BUILT_HEADERS
from dlbench.spec.worker_request import SHARED_COMPILE_CACHE_ENV

pytest.importorskip("torch")


@pytest.mark.slow
def test_quick_suite_passes_every_case_and_compiles_cold_in_a_private_cache(tmp_path, monkeypatch):
    """The README's command; and its torch.compile case's first call is cold, so two
    identical runs agree on compile time.

    One compile proves it: were the worker to use the caches the user already has
    (here named by TORCHINDUCTOR_CACHE_DIR, as a user may set it), a second run would
    hit what this one wrote there. Nothing is written there, this run misses, and the
    worker's private folder is gone when it ends (the rest of the test suite shares
    one compile cache; this test leaves it, as a user's run does)."""
    monkeypatch.delenv(SHARED_COMPILE_CACHE_ENV)
    users_cache = tmp_path / "users-inductor-cache"
    users_cache.mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(users_cache))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the private folder is made
    proc = dlbench("run", "--json", str(tmp_path / "quick.json"), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads((tmp_path / "quick.json").read_text())
    assert run["suite"] == "quick"
    failed = [
        (r["case"]["workload"], r["case"]["compile"], r["error"])
        for r in run["results"]
        if r["status"] != "ok"
    ]
    assert not failed
    kinds = {
        (r["case"]["workload"], r["case"]["framework"], r["case"]["compile"], r["case"]["mode"])
        for r in run["results"]
    }
    assert ("mlp", "torch", "compile", "infer") in kinds
    assert ("mnist-cnn", "torch", "eager", "train") in kinds
    add = next(r for r in run["results"] if r["case"]["workload"] == "add")
    assert add["gbps"] > 0 and add["case"]["params"] == {"size": 4096}
    (compiled,) = [r for r in run["results"] if r["case"]["compile"] == "compile"]
    assert compiled["details"]["compile_cache"].startswith("cold")
    # TMPDIR moved Inductor's global header folder here too: empty, as on a fresh
    # machine, so the first call built its precompiled headers and the result says so
    assert compiled["details"]["compile_cache"].endswith(HEADERS_BUILT)
    assert COMPILE_BUILT_HEADERS in compiled["flags"]
    headers = tmp_path.glob("torchinductor_*/precompiled_headers/*")
    assert [path for path in headers if path.suffix in (".gch", ".pch")]  # g++'s, or others
    assert all(COMPILE_BUILT_HEADERS not in r["flags"] for r in run["results"] if r is not compiled)
    counters = compiled["details"]["extra"]["compile_counters"]
    assert counters["fxgraph_cache_miss"] >= 1 and counters["fxgraph_cache_hit"] == 0
    assert counters["graphs"] >= 1
    assert list(users_cache.iterdir()) == []
    assert not list(tmp_path.glob("dlbench-compile-*"))
    # its HTML report fits a phone's screen, every chart label whole
    from dlbench.report.html import render
    from dlbench.results.files import read_json

    assert_page_fits(render([read_json(tmp_path / "quick.json")]), 390, tmp_path)
