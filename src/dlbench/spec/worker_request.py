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

from dlbench.spec import record_dict
from dlbench.spec.case import Case, Settings

# The request's own layout: a reader refuses a document of another version.
REQUEST_VERSION = 3
# dlbench's own test suite names one compiler cache folder here for every worker it
# starts (the same small graphs compile once); the launcher reads it and puts it in
# the request, and nothing else does (worker.compile_cache)
SHARED_COMPILE_CACHE_ENV = "DLBENCH_TEST_SHARED_COMPILE_CACHE"


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
    # the compiler caches' folder shared by the test suite's workers; None, as for
    # every user: a fresh private one per process, so compile times are cold
    shared_compile_cache: Path | None = None

    def to_json(self) -> str:
        return json.dumps({"version": REQUEST_VERSION, **record_dict.to_dict(self)})

    @classmethod
    def from_json(cls, document: str) -> WorkerRequest:
        """The request a launcher wrote; ValueError for any other document."""
        data = json.loads(document)
        if not isinstance(data, dict) or data.get("version") != REQUEST_VERSION:
            raise ValueError(f"not a dlbench worker request of version {REQUEST_VERSION}")
        return record_dict.from_dict(cls, data, "worker request")
