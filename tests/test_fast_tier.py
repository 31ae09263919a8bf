"""The fast tier (`python -m pytest -m unit`) holds its tests to importing no framework:
the guard in tests/conftest.py, run on test files made for it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import installed

# starts pytest in a process, and the files it runs import torch
pytestmark = [pytest.mark.integration, installed("torch")]

CONFTEST = Path(__file__).with_name("conftest.py")
# a unit test beside each run's own files: the guard must leave it alone
PLAIN = "def test_adds():\n    assert 1 + 1 == 2\n"


def unit_run(folder: Path, *options: str, **files: str) -> subprocess.CompletedProcess[str]:
    """`pytest -m unit` over `files` (name -> source) and test_plain (PLAIN) beside a copy
    of the suite's conftest and an empty ini file, in one test process unless `options`
    ask for pytest-xdist's (-n 2)."""
    shutil.copy(CONFTEST, folder / "conftest.py")
    (folder / "empty.ini").write_text("[pytest]\n")
    for name, source in {**files, "test_plain": PLAIN}.items():
        (folder / f"{name}.py").write_text(source)
    command = [sys.executable, "-m", "pytest", "-m", "unit", "-p", "no:cacheprovider", "-q"]
    # a run of its own: not one of this session's pytest-xdist test processes
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    return subprocess.run(
        [*command, *(options or ("-p", "no:xdist")), "-c", str(folder / "empty.ini"), str(folder)],
        capture_output=True, text=True, cwd=folder, env=env, timeout=300,
    )  # fmt: skip


def test_a_unit_test_that_imports_a_framework_fails_naming_the_marker_it_needs(tmp_path):
    run = unit_run(
        tmp_path,
        test_imports="def test_uses_torch():\n    import torch\n    assert torch.ones(1)\n",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "a unit test imported torch: mark it integration" in run.stdout
    # the guard fails the test as it ends: its teardown errs, the plain one is untouched
    assert "ERROR test_imports.py::test_uses_torch" in run.stdout
    assert "1 error" in run.stdout and "test_plain" not in run.stdout


def test_a_module_that_skips_whole_without_a_framework_is_not_collected(tmp_path):
    run = unit_run(
        tmp_path,
        test_needs_torch='import pytest\ntorch = pytest.importorskip("torch")\n\n'
        "def test_uses_torch():\n    assert torch.ones(1)\n",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout  # the plain one only: the other module is not imported


@pytest.mark.parametrize("processes", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_a_module_that_imports_a_framework_at_its_top_fails_the_fast_tier(tmp_path, processes):
    run = unit_run(
        tmp_path,
        *processes,
        test_top="import torch\n\ndef test_adds():\n    assert torch.ones(1)\n",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "collecting the unit tests imported torch: a test module imports" in run.stdout
    # its first unit test alone runs, and errs in the guard
    assert "1 error" in run.stdout and "INTERNALERROR" not in run.stdout + run.stderr


def test_the_fast_tier_keeps_pytests_own_ignore(tmp_path):
    (tmp_path / "test_ignored.py").write_text("def test_fails():\n    assert False\n")
    run = unit_run(tmp_path, "-p", "no:xdist", "--ignore", str(tmp_path / "test_ignored.py"))
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
