"""An engine dlbench serves as an OpenAI-compatible server of its own (vLLM).

The backend says how to start the server for a case (`ServerLaunch`: its command,
environment and address), which line of its log names why it stopped, and what the
running server reports of its settings. The worker starts it, waits for it, loads it
with the endpoint client and stops it (worker.engine_server, worker.served_engine);
no framework is imported in dlbench's process.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dlbench.backends.base import Backend, Job, Prepared
from dlbench.errors import CaseError
from dlbench.results.details import Details

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServerLaunch:
    """One server for one case: how it starts, where it answers, what it serves."""

    engine: str  # how messages name it
    argv: tuple[str, ...]
    env: Mapping[str, str]  # set over the worker's own environment
    url: str  # its root: http://127.0.0.1:PORT
    served_model: str  # the model name requests give
    health_path: str = "/health"  # answers 200 once it serves
    # the CPUs it may run on (its affinity, which its children inherit); None: any
    cpus: tuple[int, ...] | None = None


class OpenAIServerBackend(Backend):
    """A framework whose cases are its server under the endpoint client's load."""

    @abstractmethod
    def server_launch(self, job: Job, port: int, log_dir: Path) -> ServerLaunch:
        """The command that serves the case's model on LOOPBACK:`port` (its files, such
        as a compile cache, go where the backend keeps them; `log_dir` is the case's)."""

    @abstractmethod
    def cause_in_log(self, log: str) -> str | None:
        """The line of the server's log that names why it stopped, where one does."""

    @abstractmethod
    def served_details(self, job: Job, launch: ServerLaunch, log: str) -> Details:
        """What the running server reports of itself: where its work runs (the
        placement), its version and the settings that change what is measured."""

    def prepare(self, job: Job) -> Prepared:
        raise CaseError(f"{self.name} serves text generation as a server of its own "
                        "(worker.served_engine), not step by step")  # fmt: skip
