"""The `endpoint` framework: no model in this process, a server somewhere else.

The server does the work (on another machine, or on this one as a process of its
own), so the case's device is `remote` and there is no step: the worker's endpoint
loop (worker.endpoint_run) sends the requests through measure.openai_stream. This
backend gives what every backend gives the worker: a version (the HTTP client's),
the threads (one event loop), the device.
"""

from __future__ import annotations

import importlib.metadata

from dlbench.backends.base import Backend, Job, Prepared
from dlbench.errors import CaseError
from dlbench.spec.case import REMOTE_DEVICE
from dlbench.untyped import JSONObject


class EndpointClient(Backend):
    name = "endpoint"

    def version(self) -> str:
        return f"httpx {importlib.metadata.version('httpx')}"

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        # every request is a coroutine of one event loop: the client needs no pool
        return {"client": "one asyncio event loop"}

    def resolve_device(self, requested: str) -> str:
        if requested not in ("auto", REMOTE_DEVICE):
            raise CaseError(f"an endpoint's work runs on its server: device {requested!r} "
                            f"is not this client's; use auto or {REMOTE_DEVICE}")  # fmt: skip
        return REMOTE_DEVICE

    def prepare(self, job: Job) -> Prepared:
        raise CaseError("an endpoint is timed request by request (worker.endpoint_run), "
                        "not step by step")  # fmt: skip
