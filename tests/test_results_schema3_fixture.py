"""Run files of schema 3 written by dlbench before its typing refactor (commit 528e267:
tests/fixtures/schema-3-runs/README.md) still load, and show, compare and export byte for
byte as that code did: each command of the fixture's golden/index.json runs here, in this
process, on copies of the run files, and prints and writes what 528e267 printed and wrote.

The goldens' terminal was a pseudo-terminal of 120 columns (TERM=xterm, NO_COLOR=1), their
pipe a pipe (make_goldens.py): the command line's two rich consoles are put in those
states here, so that the pytest process's own terminal does not decide the layout."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import cli

from dlbench.results.files import read_json, write_json
from dlbench.results.records import SCHEMA_VERSION

FIXTURES = Path(__file__).parent / "fixtures" / "schema-3-runs"
RUNS = ("mixed", "user-model", "ddp", "endpoint")
COMMANDS = json.loads((FIXTURES / "golden/index.json").read_text())

# Outputs that changed on purpose since 528e267, and the part of each left out of the
# comparison. e68ac27 ("The terminal table sizes its wrapping columns itself: a flag is
# never broken mid-word"): a column header now counts whole when the results table is
# fitted to the terminal, so at 120 columns --wide's table drops the rate, or the
# device every case shares (then named in the title), where 528e267 kept every column
# and broke words mid-way ("noi|sy,"); the table's note then lists the dropped column.
# The rest of the output (the notes, the other tables) is still compared.
RESULTS_TABLE_LAYOUT = {
    "user-model.show-120-wide": "e68ac27: --wide's table at 120 columns drops the device",
    "ddp.show-120-wide": "e68ac27: --wide's table at 120 columns drops the rate",
}


# Under --wide, the note naming the columns the terminal had no room for points to a
# pager (a pipe shows every column) since that change; 528e267 asked for --wide again.
# (the line may end in the terminal's end-of-style code)
WIDE_NOTE_END = re.compile(r" --wide(\x1b\[0m)?$", re.MULTILINE)


def as_today(name: str, golden: str) -> str:
    """The golden with the documented changes since 528e267 made to it."""
    if not name.endswith("-wide"):
        return golden
    lines = golden.split("\n")
    return "\n".join(
        WIDE_NOTE_END.sub(r" --wide | less -S\1", line) if "more columns (" in line else line
        for line in lines
    )


def without_results_table(text: str) -> str:
    """The output less its first table (the results: from its title to its last border)
    and the 'more columns' note under it."""
    lines = text.split("\n")
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    return "\n".join(line for line in lines[end + 1 :] if "more columns (" not in line)


def as_in_goldens(monkeypatch: pytest.MonkeyPatch, terminal_120: bool) -> None:
    """The consoles as the goldens' command saw them: stdout a 120-column terminal with
    no colour (bold and dim kept) or a pipe, stderr a pipe."""
    from rich.color import ColorSystem

    from dlbench.cli import terminal

    if terminal_120:
        out = {"_force_terminal": True, "_width": 120, "_color_system": ColorSystem.STANDARD,
               "no_color": True}  # fmt: skip
    else:
        out = {"_force_terminal": False, "_width": terminal.PIPED_WIDTH, "_color_system": None}
    err = {"_force_terminal": False, "_width": 180, "_color_system": None}
    for console, state in ((terminal.out, out), (terminal.err, err)):
        for name, value in {"_height": 25, **state}.items():  # a height: no size probe
            monkeypatch.setattr(console, name, value)


def golden_text(name: str | None) -> str:
    return (FIXTURES / name).read_bytes().decode() if name else ""


@pytest.mark.parametrize("command", COMMANDS, ids=[c["name"] for c in COMMANDS])
def test_today_prints_and_writes_what_528e267_did(command, tmp_path, monkeypatch):
    for run in RUNS:
        shutil.copy(FIXTURES / f"{run}-run.json", tmp_path)
    monkeypatch.chdir(tmp_path)  # the commands name their files as the goldens' did
    as_in_goldens(monkeypatch, command["tty"])
    done = cli(*command["args"])
    assert done.returncode == command["rc"], done.stderr
    stdout, expected = done.stdout, as_today(command["name"], golden_text(command["stdout"]))
    if command["name"] in RESULTS_TABLE_LAYOUT:
        assert stdout != expected  # else the exception has outlived its change
        stdout, expected = without_results_table(stdout), without_results_table(expected)
    assert stdout == expected
    assert done.stderr == golden_text(command["stderr"])
    for written, golden in command["files"].items():
        assert (tmp_path / written).read_bytes() == (FIXTURES / golden).read_bytes(), written


@pytest.mark.parametrize("run", RUNS)
def test_a_schema_3_file_of_528e267_loads_at_schema_3_and_round_trips(run, tmp_path):
    assert json.loads((FIXTURES / f"{run}-run.json").read_text())["schema_version"] == 3
    loaded = read_json(FIXTURES / f"{run}-run.json")
    assert loaded.schema_version == SCHEMA_VERSION == 3
    write_json(loaded, tmp_path / "again.json")
    assert read_json(tmp_path / "again.json") == loaded
    # written back as it was read: the file 528e267 wrote, byte for byte
    assert (tmp_path / "again.json").read_bytes() == (FIXTURES / f"{run}-run.json").read_bytes()


def test_the_fixture_holds_each_kind_of_case():
    """What each kind of case leaves in its typed details, read from 528e267's files."""
    results = [r for run in RUNS for r in read_json(FIXTURES / f"{run}-run.json").results]
    kinds = {(r.case.workload, r.case.framework) for r in results}
    assert {("mlp", "null"), ("mlp", "torch"), ("mlp", "onnxruntime"), ("llm-tiny", "torch"),
            ("mnist-train", "torch"), ("user-model", "onnxruntime"), ("user-model", "openvino"),
            ("llm-requests", "endpoint")} <= kinds  # fmt: skip
    assert all(r.ok for r in results)
    for part in ("loadgen", "generation", "training", "quantization", "processes", "ddp",
                 "endpoint"):  # fmt: skip
        assert any(getattr(r.details, part) for r in results), part
