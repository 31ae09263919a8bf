"""vLLM's server for one case: the `vllm serve` command line and environment, the line of
its log that names why it stopped, and the settings it reports.

The command is vLLM's CLI run through vllm_main.py (with the interpreter that has vLLM:
spec.python_env), so the CPU build, whose `vllm` console script fails on its package
name, starts the same way as `pip install vllm`'s. What the case asks is passed
explicitly, so the command line is the record of what was asked: the dtype, a context of
isl + osl, --streams as max_num_seqs, a KV cache that holds every sequence at its
whole length, the prefix cache off (dlbench's requests repeat the workload's seeded
prompts: a cache would serve their prefill from memory, which no other engine here
does), the seed. What vLLM made of it is read back from the running server
(/server_info, with VLLM_SERVER_DEV_MODE: its whole configuration) rather than taken
from the command.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

from dlbench.backends.base import Job
from dlbench.backends.openai_server import LOOPBACK
from dlbench.spec.registry import precision_info
from dlbench.untyped import JSONObject, JSONValue
from dlbench.workloads.decoder import kv_cache_bytes

SERVE_MAIN = Path(__file__).with_name("vllm_main.py")
# /server_info: the engine's whole configuration, served with VLLM_SERVER_DEV_MODE=1
SERVER_INFO_PATH = "/server_info?config_format=json"
# The KV cache is sized in whole runs of this many tokens a sequence: vLLM allocates
# blocks (128 tokens on a CPU, 16 on a GPU), so a sequence of 160 tokens takes 256
KV_TOKEN_GRANULE = 256
# What the worker sets for every server: no telemetry, no model hub (the checkpoint is
# a local folder), and /server_info
QUIET_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
             "TRANSFORMERS_OFFLINE": "1", "VLLM_SERVER_DEV_MODE": "1"}  # fmt: skip
# vLLM's log lines start "(EngineCore pid=123) ERROR 11-27 18:45:19 [core.py:1512] "
LOG_PREFIX = re.compile(r"^(?:\(\w+ pid=\d+\) )?(?:[A-Z]+ \d\d-\d\d [\d:]+ \[[^\]]*\] )?")
RAISED = re.compile(r"(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt): \S.*")
# Lines that only say the cause is elsewhere in the log
POINTERS = ("See root cause above", "See stack trace (above)")
# vLLM's log of where its compute threads run (its CPU worker's binding info)
BINDING = {"mode": re.compile(r"VLLM_CPU_OMP_THREADS_BIND='([^']*)'"),
           "compute_cpus": re.compile(r"core ids=(\[[^\]]*\])"),
           "reserved_cpus": re.compile(r"reserved_cpus=(\[[^\]]*\])")}  # fmt: skip
# The lines after an exception's that may carry on its message
CONTINUED = 2


def serve_argv(python: str, checkpoint: Path, job: Job, port: int, streams: int) -> list[str]:
    """`vllm serve` for the case, every setting that changes what is measured named."""
    case, params = job.case, job.params
    options = dict(case.options)
    argv = [python, str(SERVE_MAIN), "serve", str(checkpoint),
            "--served-model-name", job.workload.name, "--host", LOOPBACK, "--port", str(port),
            "--dtype", str(precision_info(case.precision).generation_dtype),
            "--max-model-len", str(params["isl"] + params["osl"]),
            "--max-num-seqs", str(streams),
            "--kv-cache-memory-bytes", str(kv_cache_size(job, streams)),
            "--seed", str(job.seed),
            "--enable-prefix-caching" if options.get("prefix_caching") == "on"
            else "--no-enable-prefix-caching",
            # one log line per request, written by the server while it serves
            "--disable-uvicorn-access-log"]  # fmt: skip
    if case.compile == "eager":
        argv.append("--enforce-eager")
    if "max_num_batched_tokens" in options:
        argv += ["--max-num-batched-tokens", str(int(options["max_num_batched_tokens"]))]
    return argv


def kv_cache_size(job: Job, streams: int) -> int:
    """Bytes of KV cache: the --option kv_cache_mib asked, else `streams` sequences of
    isl + osl tokens in the model's dtype, in whole runs of KV_TOKEN_GRANULE tokens (as
    the other engines here get one sized for their sequences: vLLM's own default on a
    CPU would take most of the machine's memory)."""
    asked = dict(job.case.options).get("kv_cache_mib")
    if asked is not None:
        return int(asked) * 2**20
    tokens = job.params["isl"] + job.params["osl"]
    tokens = math.ceil(tokens / KV_TOKEN_GRANULE) * KV_TOKEN_GRANULE
    value_bytes = precision_info(job.case.precision).value_bytes
    return kv_cache_bytes(job.workload.shape, streams, tokens, value_bytes)  # type: ignore[attr-defined]


def serve_env(device: str, cache_root: Path) -> dict[str, str]:
    """The server's environment over the worker's (whose thread variables it does not
    get): its compile cache in dlbench's cache (never the user's home); on a CPU,
    vLLM's own placement of its threads (auto: bound, a core of the CPUs it may use
    kept for its front end and engine loop, which spins; on 2 cores its decode was
    12-18% faster so than with 2 unbound threads); on a GPU, the case's device."""
    env = {**QUIET_ENV, "VLLM_CACHE_ROOT": str(cache_root)}
    if device == "cpu":
        env["VLLM_CPU_OMP_THREADS_BIND"] = "auto"
    else:
        env["CUDA_VISIBLE_DEVICES"] = device.partition(":")[2] or "0"
    return env


def server_cpus(device: str, threads: int) -> tuple[int, ...] | None:
    """The CPUs a CPU server may use: the first `threads` this process may (-t), all
    of them by default; vLLM places its threads within them."""
    if device != "cpu":
        return None
    allowed = sorted(os.sched_getaffinity(0))
    return tuple(allowed[: max(1, threads)])


def omp_binding(log: str) -> dict[str, str]:
    """Where vLLM put its compute threads, as its log says (ompmultiprocessing's
    binding info): the cores they are bound to, and the ones kept for the rest."""
    found = {name: BINDING[name].search(log) for name in BINDING}
    return {name: match.group(1) for name, match in found.items() if match}


def cause_in_log(log: str) -> str | None:
    """The first exception vLLM raised, as its log shows it (the root cause: the lines
    after it only repeat it, or point back to it), with the indented lines that carry on
    its message (pydantic's says what was wrong there); else its last ERROR line."""
    lines = log.splitlines()
    errors = []
    for index, line in enumerate(lines):
        text = LOG_PREFIX.sub("", line).strip()
        if RAISED.fullmatch(text) and not any(pointer in text for pointer in POINTERS):
            return " ".join([text, *_continued(lines[index + 1 : index + 1 + CONTINUED])])
        if " ERROR " in line and text:
            errors.append(text)
    return errors[-1] if errors else None


def _continued(after: list[str]) -> list[str]:
    """An exception message's own further lines: indented, and no traceback frame."""
    kept = []
    for line in after:
        text = LOG_PREFIX.sub("", line)
        if not text[:1].isspace() or text.strip().startswith("File "):
            break
        kept.append(text.strip().split(" [type=")[0])  # pydantic's echo of the input
    return kept


def served_settings(info: Mapping[str, JSONValue]) -> JSONObject:
    """What the running engine holds (its /server_info configuration), in the words
    the other engines' records use."""
    model, cache = info.get("model_config") or {}, info.get("cache_config") or {}
    scheduler = info.get("scheduler_config") or {}
    compilation = info.get("compilation_config") or {}
    return {
        "dtype": str(model.get("dtype", "")).removeprefix("torch."),
        "max_model_len": model.get("max_model_len"),
        "max_num_seqs": scheduler.get("max_num_seqs"),
        "max_num_batched_tokens": scheduler.get("max_num_batched_tokens"),
        "chunked_prefill": scheduler.get("enable_chunked_prefill"),
        "prefix_caching": cache.get("enable_prefix_caching"),
        "kv_cache_bytes": cache.get("kv_cache_memory_bytes"),
        # vLLM counts a CPU's KV cache blocks in num_gpu_blocks too
        "kv_cache_blocks": cache.get("num_gpu_blocks"),
        "kv_cache_block_tokens": cache.get("block_size"),
        "kv_cache_dtype": cache.get("cache_dtype"),
        "enforce_eager": model.get("enforce_eager"),
        "compilation_mode": compilation.get("mode"),  # vllm.config.CompilationMode
        "cudagraph_mode": compilation.get("cudagraph_mode"),
        "device": (info.get("device_config") or {}).get("device"),
        "seed": model.get("seed"),
    }
