"""The README's main command: the quick suite runs end to end with real torch."""

from __future__ import annotations

import json

import pytest
from conftest import dlbench

pytest.importorskip("torch")


@pytest.mark.slow
def test_quick_suite_passes_every_case(tmp_path):
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
