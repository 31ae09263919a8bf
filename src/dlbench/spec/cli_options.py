"""How the command line sets a Case or Settings field, declared on the field itself.

A field's metadata "cli" is a `CliOption`: its flags, help, the names its value
must be one of (a vocabulary: a registry table or tuple), whether it repeats,
how its text is read, and whether only some frameworks implement its values
other than the default (`by_framework`: the registry lists which). `dlbench
run` adds one option per such field (cli.parser), and the plan's RunRequest is
filled from them (plan.build.request_from_options), so an axis's option is
spelled once, beside its field.

The value readers here raise ValueError saying what was expected; the parser
turns that into its one-line usage error. Nothing here knows argparse.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar  # noqa: TID251  # cli()'s CliOption fields, passed on
from urllib.parse import urlsplit

from dlbench.measure.openai_auth import without_credentials

N = TypeVar("N")  # what a value reader makes of the text (an int, a float)


@dataclass(frozen=True)
class CliOption:
    """One command-line option of `dlbench run`; the first flag is its long name."""

    flags: tuple[str, ...]
    help: str
    # text -> value, raising ValueError that says what was expected (None: the text)
    parse: Callable[[str], object] | None = None
    # the names a value must be one of; others are refused when parsed
    vocabulary: Collection[str] | None = None
    # how a refused name is called ("unknown compile mode 'x'"); default: the field's name
    noun: str | None = None
    # given several times (action="append"): several values, each a filter or a case
    repeat: bool = False
    # a flag without a value (store_true); False means "not given"
    switch: bool = False
    # the value's name in --help; default: the vocabulary in braces, else the long flag's
    metavar: str | None = None
    # the --help section it is listed in (cli.parser.RUN_GROUPS titles them)
    group: str = "case"
    # Only some frameworks implement the values other than the field's default: each
    # framework's registry entry lists those it does (FrameworkInfo.axes) and
    # plan.validate refuses the rest by one rule, naming the frameworks that have
    # them. Its vocabulary maps each value to what it means, which that error quotes.
    by_framework: bool = False

    def __post_init__(self) -> None:
        # checked when Case is defined: the rule in plan.validate needs the meanings
        if self.by_framework and not (
            isinstance(self.vocabulary, Mapping)
            and all(isinstance(text, str) for text in self.vocabulary.values())
        ):
            raise ValueError(f"{self.long_flag}: a by_framework option maps values to meanings")

    @property
    def long_flag(self) -> str:
        return self.flags[0]

    @property
    def setting_key(self) -> str:
        """A setting's key in a suite: the option's name (min_time for --min-time), so a
        suite and the command line spell it alike."""
        return self.long_flag.removeprefix("--").replace("-", "_")

    def noun_for(self, name: str) -> str:
        """How a refused value of field `name` is called: "unknown {noun} 'x'"."""
        return self.noun or name.replace("_", " ")

    def default_metavar(self) -> str | None:
        """None lets argparse show the vocabulary in braces."""
        if self.metavar is not None or self.vocabulary is not None:
            return self.metavar
        return self.long_flag.lstrip("-").replace("-", "_").upper()


# `details`: CliOption's fields by name, passed on whole (Any: its constructor checks them)
def cli(*flags: str, **details: Any) -> dict[str, CliOption]:  # noqa: ANN401
    """Field metadata: the field is set by the option `flags` (long name first)."""
    return {"cli": CliOption(flags, **details)}


def cli_options(record: type) -> list[tuple[str, CliOption]]:
    """(field name, option) for each field of the dataclass `record` that has an option."""
    from dlbench.spec.record_dict import flat_fields

    return [(name, f.metadata["cli"]) for name, f in flat_fields(record) if "cli" in f.metadata]


def option_flag(record: type, name: str) -> str:
    """The long flag that sets field `name` of `record`, for messages."""
    return dict(cli_options(record))[name].long_flag


@dataclass(frozen=True)
class NumberReader(Generic[N]):
    """A number's value reader: `convert` the text, and refuse what `accept` does not,
    saying what was expected (nan is refused by every comparison). Planning holds a
    number a suite entry or a case file gives to the same rule (`check`)."""

    convert: Callable[[str], N]
    accept: Callable[[N], bool]
    expected: str

    def __call__(self, text: str) -> N:
        try:
            value = self.convert(text)
        except ValueError:
            raise ValueError(f"expected {self.expected}, got {text!r}") from None
        if not self.accept(value):
            raise ValueError(f"expected {self.expected}, got {text}")
        return value

    def check(self, value: object) -> None:
        """A value already read (a suite's YAML number): ValueError saying what was
        expected where it is not a number of the reader's type (an integer for an
        integer's; text such as "4" is not a number) or the command line would refuse
        it."""
        numbers = (int,) if self.convert is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, numbers):
            raise ValueError(f"expected {self.expected}")
        if not self.accept(self.convert(str(value))):
            raise ValueError(f"expected {self.expected}")


def integer_in(low: int, high: int) -> NumberReader[int]:
    """An integer from `low` to `high`: a count with a sane upper bound."""
    return NumberReader(int, lambda v: low <= v <= high, f"an integer from {low} to {high}")


def number_in(low: float, high: float) -> NumberReader[float]:
    """A number from `low` to `high`."""
    return NumberReader(float, lambda v: low <= v <= high, f"a number from {low:g} to {high:g}")


def positive_at_most(high: float) -> NumberReader[float]:
    """A number above 0 and at most `high`."""
    return NumberReader(float, lambda v: 0 < v <= high, f"a number > 0, at most {high:g}")


positive_int = NumberReader(int, lambda v: v > 0, "an integer > 0")
non_negative_float = NumberReader(float, lambda v: 0 <= v < math.inf, "a number >= 0")
positive_float = NumberReader(float, lambda v: 0 < v < math.inf, "a number > 0")
percentile_value = NumberReader(float, lambda v: 0 < v < 100, "a percentile in (0, 100)")
fraction = NumberReader(float, lambda v: 0 < v <= 1, "a fraction in (0, 1]")
port_number = NumberReader(int, lambda v: 0 < v < 65536, "a port from 1 to 65535")


def param_pair(text: str) -> tuple[str, int]:
    """KEY=INT, a workload parameter."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"expected KEY=INT, got {text!r}")
    return key, positive_int(value)


def option_pair(text: str) -> tuple[str, str]:
    """KEY=VALUE, a framework's own option."""
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def endpoint_url(text: str) -> str:
    """An http(s) URL with a host: the server's root (a trailing /v1 or / dropped, as
    the client adds the API's own path). Its credentials are kept (the CLI takes them
    out before anything else sees the URL) and never shown."""
    shown = without_credentials(text)
    not_a_url = ValueError(f"expected an http:// or https:// URL with a host, got {shown!r}")
    try:
        parsed = urlsplit(text.strip())
    except ValueError:  # a bad IPv6 host
        raise not_a_url from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise not_a_url
    try:
        parsed.port  # noqa: B018  # raises on a port that is not a number in range
    except ValueError:
        raise ValueError(f"expected a port from 0 to 65535 in {shown!r}") from None
    root = text.strip().rstrip("/")
    return root.removesuffix("/v1") if root.endswith("/v1") else root


def shell_words(text: str) -> tuple[str, ...]:
    """Options for another program, split as a shell would."""
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None


# A run's label is printed in one table cell and one message line: a commit hash, a
# version or `git describe` fits with room to spare.
LABEL_CHARS = 100


def run_label(text: str) -> str:
    """A run's label (a commit, a version): 1 to LABEL_CHARS printable characters, the
    spaces around it dropped (`history --order label` sorts and prints it)."""
    label = text.strip()
    if not label or len(label) > LABEL_CHARS or not label.isprintable():
        raise ValueError(f"expected 1 to {LABEL_CHARS} printable characters, got {text!r}")
    return label


def resolved_path(text: str) -> str:
    """A path made absolute now, so a worker started elsewhere finds the same files."""
    return str(Path(text).resolve())
