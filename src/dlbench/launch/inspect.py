"""`dlbench inspect FILE`: what a model file is, and what each framework sees in it.

The format comes from the file's content; each installed framework that
reads the format loads it in a process of its own (worker.inspect_model) and
reports its inputs and outputs, or the reason it cannot.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from dlbench.spec import record_dict
from dlbench.spec.model_signature import InputSpec, LoaderAnswer, LoaderRequest
from dlbench.spec.registry import FRAMEWORKS
from dlbench.untyped import JSONObject
from dlbench.workloads.model_format import FORMATS, model_format, require_trusted

# Loading a large model in a slow framework can take a while; a hang cannot stop inspect.
LOAD_TIMEOUT_S = 600


@dataclass(frozen=True)
class FrameworkView:
    """What one framework sees in the file (`dlbench inspect --json` writes every field)."""

    WRITES_EVERY_FIELD: ClassVar[bool] = True

    framework: str
    version: str | None
    verdict: str  # "loads", "cannot load", "not installed", "does not read this format"
    reason: str = ""
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[InputSpec, ...] = ()
    # it loads only unsafely (a Keras Lambda layer) and --trust-model was not given
    untrusted: bool = False


@dataclass(frozen=True)
class Inspection:
    """A model file's format and each framework's view of it."""

    WRITES_EVERY_FIELD: ClassVar[bool] = True
    path: str
    format: str
    description: str
    size_bytes: int
    frameworks: tuple[FrameworkView, ...]

    def loads(self) -> bool:
        return any(view.verdict == "loads" for view in self.frameworks)

    def why_nothing_loads(self) -> str:
        """One line: the format, and why each framework that reads it did not load it."""
        readers = [view for view in self.frameworks if view.verdict != "does not read this format"]
        why = "; ".join(
            f"{view.framework}: {' '.join((view.reason or view.verdict).split())}"
            for view in readers
        )
        return (
            f"inspect {Path(self.path).name}: no installed framework loads this "
            f"{self.description} ({why or 'no framework dlbench has reads it'})"
        )

    def to_dict(self) -> JSONObject:
        return record_dict.to_dict(self)


def inspect_model(
    path: Path, trust: bool = False, progress: Callable[[str], None] | None = None
) -> Inspection:
    """Read the file's format, then ask every framework (UserError for a bad path)."""
    from dlbench.errors import UserError

    if not path.exists():
        raise UserError(f"inspect {path}: no such file or directory")
    kind = model_format(path)
    require_trusted(path, kind, trust, where="inspect")  # no loader unpickles it unasked
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else (
        path.stat().st_size)  # fmt: skip
    views = []
    for name, info in FRAMEWORKS.items():
        if name == "null" or info.import_name is None:
            continue
        version = info.installed_version()
        if kind not in info.model_formats:
            views.append(FrameworkView(name, version, "does not read this format"))
        elif version is None:
            views.append(FrameworkView(name, None, "not installed", info.install_hint))
        else:
            if progress is not None:
                progress(f"loading {path.name} with {name} {version}")
            views.append(load_in_worker(name, version, kind, path, trust))
    return Inspection(str(path), kind, FORMATS[kind], size, tuple(views))


def load_in_worker(name: str, version: str, kind: str, path: Path, trust: bool) -> FrameworkView:
    request = json.dumps(record_dict.to_dict(LoaderRequest(name, kind, path, trust)))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dlbench.worker.inspect_model", request],
            capture_output=True,
            text=True,
            timeout=LOAD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return FrameworkView(name, version, "cannot load", f"no answer in {LOAD_TIMEOUT_S} s")
    answer = _last_json_line(done.stdout)
    if answer is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return FrameworkView(
            name, version, "cannot load", f"the loader exited {done.returncode}: {tail}"
        )
    if not answer.ok:
        reason = answer.error or ""  # a failed answer has one (LoaderAnswer)
        return FrameworkView(name, version, "cannot load", reason, untrusted=answer.untrusted)
    return FrameworkView(name, version, "loads", "", answer.inputs, answer.outputs)


def _last_json_line(text: str) -> LoaderAnswer | None:
    """The worker's answer: the last line of its output that is a JSON object with "ok"
    (frameworks may print above it); one saying so where that line is not an answer."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and "ok" in value:
            try:
                return record_dict.from_dict(LoaderAnswer, value, "the loader's answer")
            except ValueError as exc:
                return LoaderAnswer(ok=False, error=f"the loader answered wrongly: {exc}")
    return None
