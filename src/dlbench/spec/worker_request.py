"""What the parent sends a process that measures a case: one typed document.

The launcher (launch.runner for a spawned worker, launch.torchrun for each DDP
rank) builds a `WorkerRequest` and sends it whole, as one JSON document; the
worker (worker.process, worker.ddp_rank) reads it back the same way. Every
path the worker writes to is in it, typed, so nothing travels as positional
strings or through environment variables read deep inside the worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.spec import JSONObject
from dlbench.spec.case import Case, Settings

# The request's own layout: a reader refuses a document of another version.
REQUEST_VERSION = 1


@dataclass(frozen=True)
class CaseOutputs:
    """Where a running case writes beside its result (each optional: a loop run
    outside a launched worker, as in a test, gets no progress file and a fresh
    temporary folder)."""

    # the progress lines of a long case (an epoch done), one per line, which the
    # parent reads between its waits for its progress bar
    progress_path: Path | None = None
    # the files that belong beside the run (LoadGen's logs, a served engine's log)
    files_dir: Path | None = None


@dataclass(frozen=True)
class WorkerRequest:
    """One case to measure, and where its process writes what it found."""

    case: Case
    settings: Settings
    result_path: Path
    log_path: Path
    # the launcher's process id: the worker ends itself if that process dies
    parent_pid: int
    outputs: CaseOutputs = field(default_factory=CaseOutputs)

    def to_json(self) -> str:
        document: JSONObject = {
            "version": REQUEST_VERSION,
            "case": self.case.to_dict(),
            "settings": self.settings.to_dict(),
            "result_path": str(self.result_path),
            "log_path": str(self.log_path),
            "parent_pid": self.parent_pid,
            "progress_path": _optional(self.outputs.progress_path),
            "files_dir": _optional(self.outputs.files_dir),
        }
        return json.dumps(document)

    @classmethod
    def from_json(cls, document: str) -> WorkerRequest:
        """The request a launcher wrote; ValueError for any other document."""
        data = json.loads(document)
        if not isinstance(data, dict) or data.get("version") != REQUEST_VERSION:
            raise ValueError(f"not a dlbench worker request of version {REQUEST_VERSION}")
        parent_pid = data["parent_pid"]
        if not isinstance(parent_pid, int):
            raise ValueError("a worker request's parent_pid must be an integer")
        return cls(
            case=Case.from_dict(data["case"]),
            settings=Settings.from_dict(data["settings"]),
            result_path=Path(data["result_path"]),
            log_path=Path(data["log_path"]),
            parent_pid=parent_pid,
            outputs=CaseOutputs(
                progress_path=_path_or_none(data.get("progress_path")),
                files_dir=_path_or_none(data.get("files_dir")),
            ),
        )


def _optional(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _path_or_none(value: object) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"a worker request's path must be a string, not {value!r}")
    return Path(value)
