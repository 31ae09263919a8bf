"""The work one generation must do, for its roofline (results.roofline_bound).

From the model's shape (workloads.decoder): the bytes and FLOPs of one decode step and
of one prefill, recorded in the result's Generation. An in-process engine's shape is
its workload's, at the case's precision and its engine's KV-cache precision. A server's
is its model's config.json (`--model-config`, else the one beside `--tokenizer`) at the
config's dtype, its KV cache at that dtype too (vLLM's and SGLang's `auto`), one
request's prompt and answer as they were on average, and as many sequences a step as
the server reported running on average (its /metrics), else one: the least it could
have read, so a figure above the ceiling is never the count's doing. An engine dlbench
serves (vLLM) is its workload's, as in-process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from dlbench.backends.base import KV_CACHE_BYTES, Job
from dlbench.measure.server_counters import ServerCounters
from dlbench.results.details import Generation
from dlbench.spec.case import Case
from dlbench.spec.loads import ForeignServerLoad
from dlbench.spec.loop_kinds import case_load
from dlbench.spec.registry import precision_info
from dlbench.workloads.decoder import (
    DecoderShape,
    DecoderWorkload,
    decode_step_bytes,
    decode_step_flops,
    prefill_bytes,
    prefill_flops,
)
from dlbench.workloads.model_config import ModelConfig, read_model_config

NO_CONFIG = ("no model config for the roofline: give --model-config FILE (the served model's "
             "config.json) or --tokenizer its folder")  # fmt: skip


def decoder_work(record: Generation, job: Job, kv_cache_dtype: str | None) -> Generation:
    """An in-process engine's work: its workload's shape, batch and lengths, at the
    precision its weights are held in and its engine's KV-cache precision."""
    if kv_cache_dtype not in KV_CACHE_BYTES or not isinstance(job.workload, DecoderWorkload):
        return record
    weight_bytes = precision_info(job.case.precision).value_bytes
    work = Work(job.workload.shape, job.batch_size, job.batch_size, job.params["isl"],
                job.params["osl"], weight_bytes, KV_CACHE_BYTES[kv_cache_dtype])  # fmt: skip
    return work.into(record, f"workload {job.workload.name}")


def endpoint_work(record: Generation, job: Job, isl: int, osl: int,
                  server: ServerCounters | None) -> Generation:  # fmt: skip
    """A server's work a request: its model's config (or the workload dlbench serves)
    at the lengths the requests had, one prompt's prefill (a request's TTFT holds its
    own), and a decode step of the sequences it reported running."""
    batch = running_batch(server)
    record = replace(record, work_batch=batch)
    if isinstance(job.workload, DecoderWorkload):  # an engine dlbench serves
        value_bytes = precision_info(job.case.precision).value_bytes
        work = Work(job.workload.shape, batch, 1, isl, osl, value_bytes, value_bytes)
        return work.into(record, f"workload {job.workload.name}")
    try:
        config = served_config(job.case)
    except ValueError as exc:
        return replace(record, work_note=f"no roofline: {exc}")
    if config is None:
        return replace(record, work_note=NO_CONFIG)
    value_bytes = precision_info(config.precision).value_bytes
    record = replace(record, work_precision=config.precision)
    return Work(config.shape, batch, 1, isl, osl, value_bytes, value_bytes).into(
        record, config.source
    )


def served_config(case: Case) -> ModelConfig | None:
    """The served model's config: --model-config, else the config.json beside
    --tokenizer's file (None: neither given, or no config there)."""
    load = case_load(case, ForeignServerLoad)
    if load.model_config is not None:
        return read_model_config(Path(load.model_config), "--model-config")
    if load.tokenizer is None:
        return None
    folder = Path(load.tokenizer)
    folder = folder if folder.is_dir() else folder.parent
    if not (folder / "config.json").is_file():
        return None
    return read_model_config(folder, "the config.json beside --tokenizer")


def running_batch(server: ServerCounters | None) -> int:
    """The sequences a server's decode step held: its mean of running requests over the
    load (whole, rounded down: the least), else 1."""
    running = server.running if server is not None else None
    if running is None or running.samples == 0:
        return 1
    return max(1, math.floor(running.mean))


@dataclass(frozen=True)
class Work:
    """A model's shape at its lengths and precisions: a decode step of `decode_batch`
    sequences, a prefill of `prefill_batch` prompts."""

    shape: DecoderShape
    decode_batch: int
    prefill_batch: int
    isl: int
    osl: int
    weight_bytes: int
    kv_bytes: int

    def into(self, record: Generation, source: str) -> Generation:
        """The record with one decode step's and one prefill's bytes and FLOPs."""
        shape, isl, osl = self.shape, self.isl, self.osl
        return replace(
            record,
            decode_bytes_per_step=decode_step_bytes(
                shape, self.decode_batch, isl, osl, self.weight_bytes, self.kv_bytes
            ),
            decode_flops_per_step=decode_step_flops(shape, self.decode_batch, isl, osl),
            prefill_bytes=prefill_bytes(
                shape, self.prefill_batch, isl, self.weight_bytes, self.kv_bytes
            ),
            prefill_flops=prefill_flops(shape, self.prefill_batch, isl),
            work_source=source,
        )
