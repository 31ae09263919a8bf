"""The README stays a short front page, and the CLI reference covers the real parser."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType

from dlbench.cli.parser import build_parser

ROOT = Path(__file__).resolve().parent.parent
README_LIMIT_BYTES = 10_240
# The README opens with these two commands, in this order (`.ci/run` runs the second).
RUN_COMMAND = "pip install torch==2.13.0 && pip install -e . && dlbench run"
TEST_COMMAND = 'pip install torch==2.13.0 && pip install -e ".[dev]" && python -m pytest'
FENCED_BLOCK = re.compile(r"^```[^\n`]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def load_generator() -> ModuleType:
    """docs/hooks/cli_reference.py, imported as MkDocs does (it is not a package)."""
    path = ROOT / "docs" / "hooks" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parser_commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every subcommand the parser defines, read from argparse directly (not the generator)."""
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def test_readme_is_a_short_front_page():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT_BYTES, f"README.md is {size} bytes; move detail to docs/"


def test_readme_opens_with_the_run_and_test_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = FENCED_BLOCK.findall(text)
    assert [block.strip() for block in blocks[:2]] == [RUN_COMMAND, TEST_COMMAND]
    # nothing but the title comes before them
    assert text[: text.index("```")].strip() == "# dlbench"


def sections(page: str) -> dict[str, str]:
    """The page's `## ` sections by heading."""
    parts = re.split(r"^## (.+)$", page, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_cli_reference_has_a_section_for_every_subcommand():
    parser = build_parser()
    commands = parser_commands(parser)
    assert {"run", "compare", "roofline", "inspect"} <= set(commands)
    by_heading = sections(load_generator().render(parser))
    assert set(by_heading) == {"dlbench"} | {f"dlbench {name}" for name in commands}
    for name, sub in commands.items():
        section = by_heading[f"dlbench {name}"]
        for action in sub._actions:
            for option in action.option_strings:
                assert re.search(rf"(?<![\w-]){re.escape(option)}\b", section), (
                    f"`dlbench {name} {option}` is not in its section"
                )


def test_the_cli_reference_follows_the_parser():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    added = subparsers.add_parser("frobnicate", help="a command added after the page was written")
    added.add_argument("--wibble", help="an option only this test defines")
    section = sections(load_generator().render(parser))["dlbench frobnicate"]
    assert "A command added after the page was written." in section
    assert "--wibble" in section and "an option only this test defines" in section


def test_the_cli_reference_does_not_depend_on_the_terminal(monkeypatch):
    generator = load_generator()
    monkeypatch.setenv("COLUMNS", "40")
    narrow = generator.render(build_parser())
    monkeypatch.setenv("COLUMNS", "200")
    assert generator.render(build_parser()) == narrow
