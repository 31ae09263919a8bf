"""The CLI reference page, written at build time from dlbench's own argparse parser.

MkDocs runs this file as a hook (`hooks:` in mkdocs.yml). `on_files` adds the
page `reference/cli.md` to the site; its text is `render(build_parser())`:
argparse's own help for `dlbench` and for each subcommand, one section each,
so the page follows `src/dlbench/cli/parser.py` whenever the parser changes. A
command with subcommands of its own (`dlbench fleet`) has one subsection each.

The parser module imports no deep-learning framework, and neither does this
file; MkDocs is imported only inside the hook, so the tests can call `render`
without it.
"""

from __future__ import annotations

import argparse
import copy
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

PAGE = "reference/cli.md"
# A fixed width, so the page does not depend on the terminal that builds it.
WIDTH = 100

INTRO = """\
# CLI reference

This page is generated when the documentation is built, from the parser that
`dlbench` itself uses (`build_parser()` in `src/dlbench/cli/parser.py`): each
section is argparse's own `--help` for that command. Wherever a `RUN` is asked
for, a run id in the store or a run JSON file works. Exit codes are in
[Running benchmarks](../running.md#exit-codes).
"""


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Each subcommand's parser and one-line help, by name, in the parser's order."""
    found: dict[str, tuple[argparse.ArgumentParser, str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            # one entry per command (aliases share it), with the help given to add_parser
            for choice in action._choices_actions:
                found[choice.dest] = (action.choices[choice.dest], choice.help or "")
    return found


def help_text(parser: argparse.ArgumentParser) -> str:
    """argparse's --help for `parser`, at WIDTH columns and without colour."""
    fixed = copy.copy(parser)  # the caller's parser keeps its own formatter
    fixed.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    fixed.color = False  # Python 3.14+ may colour help; a page must not hold escape codes
    return fixed.format_help().rstrip() + "\n"


def code_block(text: str) -> str:
    """`text` in a fenced block whose fence no run of backticks inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}{fence}\n"


def render(parser: argparse.ArgumentParser) -> str:
    """The reference page: the top-level help, then one section per subcommand."""
    commands = subcommands(parser)
    index = ", ".join(f"[`{name}`](#{parser.prog}-{name})" for name in commands)
    sections = [INTRO, f"Commands: {index}.\n"]
    sections += [f"## {parser.prog}\n", code_block(help_text(parser))]
    for name, (sub, summary) in commands.items():
        sections += command_section(f"## {parser.prog} {name}", sub, summary)
        # a command's own subcommands (`dlbench fleet run`), each a part of its section
        for inner, (subsub, inner_summary) in subcommands(sub).items():
            sections += command_section(f"### {parser.prog} {name} {inner}", subsub, inner_summary)
    return "\n".join(sections)


def command_section(heading: str, parser: argparse.ArgumentParser, summary: str) -> list[str]:
    """A command's heading, its one-line help as a sentence, and its --help."""
    parts = [f"{heading}\n"]
    line = summary.replace("%%", "%").rstrip(".")
    if line:
        parts.append(f"{line[0].upper()}{line[1:]}.\n")
    parts.append(code_block(help_text(parser)))
    return parts


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """MkDocs hook: add the generated page to the site's files."""
    from mkdocs.structure.files import File

    from dlbench.cli.parser import build_parser

    files.append(File.generated(config, PAGE, content=render(build_parser())))
    return files
