"""The reference runs committed under results/: each reads with today's reader, names
its machine by a label, and holds none of the measuring machine's paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlbench.results.files import read_json

RESULTS = Path(__file__).resolve().parent.parent / "results"
RUN_FILES = sorted(RESULTS.glob("*/*.json"))


def test_every_machine_folder_has_runs_and_a_readme():
    folders = sorted(path for path in RESULTS.iterdir() if path.is_dir())
    assert folders, "no reference results"
    for folder in folders:
        assert (folder / "README.md").is_file(), folder
        assert list(folder.glob("*.json")), folder


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_reference_run_reads_and_carries_no_machine_path(path):
    run = read_json(path)
    assert run.results, path
    assert run.env.hostname == f"{path.parent.name}-reference"
    assert all(result.case.device.startswith("cuda") for result in run.results)
    text = path.read_text(encoding="utf-8")
    for private in ("/root/", "/tmp/", "/home/"):
        assert private not in text, (path, private)
    # the platform without its kernel's release, which names the machine's build
    assert re.fullmatch(r"Linux-x86_64-with-glibc[\d.]+", run.env.os), run.env.os
    assert run.command[0] == "dlbench"
