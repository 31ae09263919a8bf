"""Suites: YAML files that list cases as small matrices.

A suite file looks like:

    name: quick
    description: what it is for
    settings: {min_time: 0.5, min_iters: 10, warmup: 3, timeout: 300}
    cases:
      - workload: [mlp, mnist-cnn]      # a name or a list: the product is taken
        framework: torch
        compile: [eager, script]        # default: the framework's default mode
        mode: [infer, train]            # default: infer
        batch_size: [1, 64]             # default: the workload's default
        params: {size: 1024}            # workload parameters

Parsing is strict: an unknown key, a wrong type or a bad value is a UserError
naming the file, the place and what is allowed. A run's study tables follow
the suite's name (the report's STUDIES table), so no key chooses them.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from dlbench.errors import UserError
from dlbench.spec.case import suite_axes
from dlbench.untyped import JSONObject

if TYPE_CHECKING:
    from importlib.abc import Traversable  # importlib.resources.abc's from Python 3.11

TOP_KEYS = ("name", "description", "settings", "cases")
SETTING_KEYS = (
    "min_time",
    "min_iters",
    "warmup",
    "timeout",
    "seed",
    "repeat",
    "threads",
    "interop_threads",
    "device",
)
# A suite entry sets Case fields (those marked as suite axes), by their names,
# and may sweep some of them (plan.sweeps).
CASE_KEYS = (*suite_axes(), "sweep")


@dataclass(frozen=True)
class SuiteSpec:
    """A parsed, shape-checked suite; names are checked later, against the registry."""

    name: str
    description: str
    settings: JSONObject
    entries: tuple[JSONObject, ...]


def _builtin_folder() -> Traversable:
    """The suites that ship with dlbench (package data beside this module)."""
    return importlib.resources.files("dlbench.plan") / "builtin_suites"


def builtin_suite_names() -> list[str]:
    folder = _builtin_folder()
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_suite(name_or_path: str) -> SuiteSpec:
    """A built-in suite by name, or a suite file by path."""
    if name_or_path.endswith((".yaml", ".yml")) or Path(name_or_path).exists():
        path = Path(name_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not a readable text file"
            raise UserError(f"cannot read suite file {path}: {reason}") from None
        return parse_suite(text, str(path), default_name=path.stem)
    if name_or_path not in builtin_suite_names():
        raise UserError(
            f"unknown suite {name_or_path!r}; built-in: {', '.join(builtin_suite_names())} "
            "(or give a path to a .yaml file)"
        )
    text = (
        importlib.resources.files("dlbench.plan") / "builtin_suites" / f"{name_or_path}.yaml"
    ).read_text(encoding="utf-8")
    return parse_suite(text, f"suite {name_or_path}", default_name=name_or_path)


def parse_suite(text: str, source: str, default_name: str) -> SuiteSpec:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{source}: invalid YAML{where}") from None
    except RecursionError:
        raise UserError(f"{source}: YAML nested too deeply") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping with keys {', '.join(TOP_KEYS)}")
    _check_keys(data, TOP_KEYS, source)
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise UserError(f"{source}: settings must be a mapping")
    _check_keys(settings, SETTING_KEYS, f"{source}: settings")
    entries = data.get("cases")
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{source}: 'cases' must be a non-empty list")
    for index, entry in enumerate(entries):
        where = f"{source}: cases[{index}]"
        if not isinstance(entry, dict):
            raise UserError(f"{where}: expected a mapping with keys {', '.join(CASE_KEYS)}")
        _check_keys(entry, CASE_KEYS, where)
        if "workload" not in entry or "framework" not in entry:
            raise UserError(f"{where}: needs both 'workload' and 'framework'")
    name = data.get("name", default_name)
    description = data.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise UserError(f"{source}: name and description must be strings")
    return SuiteSpec(name, description, dict(settings), tuple(dict(e) for e in entries))


def _check_keys(data: Mapping[object, object], allowed: tuple[str, ...], where: str) -> None:
    for key in data:
        if key not in allowed:
            raise UserError(f"{where}: unknown key {key!r}; allowed: {', '.join(allowed)}")
