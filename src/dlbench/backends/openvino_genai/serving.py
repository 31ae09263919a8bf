"""OpenVINO GenAI's continuous batching serving requests (worker.token_serving).

ContinuousBatchingPipeline is the scheduler behind openvino-genai's own serving (its
OpenVINO Model Server integration): requests join the running batch at the next
step, prompts are split into chunks of at most max_num_batched_tokens (dynamic
split-fuse) beside the sequences decoding, and the KV cache is paged. One thread
owns the pipeline: it adds the requests that arrived, runs a step, and reads each
request's new tokens, stamping them with the step's end, the moment a streaming
client could have them. With nothing to do it sleeps on the arrivals' queue.

The pipeline holds fp32 throughout, with the threads and no prefix cache, as the
generation loop's LLMPipeline does (backends.openvino_genai.backend); the KV cache
is sized for `streams` whole sequences, the most the scheduler runs at once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import openvino as ov
import openvino_genai as ov_genai

from dlbench.backends.base import Job, kv_cache_record, placement
from dlbench.backends.openvino_genai.pipeline_config import (
    CONVERTER,
    EXPORT,
    exact_length,
    fp32_properties,
)
from dlbench.backends.serving_engine import SteppingEngine, TokenSink
from dlbench.errors import CaseError
from dlbench.reference.decoder import converted
from dlbench.results.details import Details
from dlbench.untyped import FrameworkValue, JSONObject

ENDED = (ov_genai.GenerationStatus.IGNORED, ov_genai.GenerationStatus.CANCEL,
         ov_genai.GenerationStatus.STOP)  # fmt: skip


@dataclass
class _Running:
    handle: FrameworkValue  # the pipeline's GenerationHandle
    tokens: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)


class OvContinuousBatching(SteppingEngine):
    thread_name = "continuous-batching"

    def __init__(self, job: Job, threads: int, streams: int) -> None:
        super().__init__()
        folder, meta = converted("openvino-genai", job.workload.name, job.seed, EXPORT, CONVERTER)
        record = kv_cache_record(job, "float32", meta)
        self.scheduler = ov_genai.SchedulerConfig()
        self.scheduler.enable_prefix_caching = False  # every request does its prefill
        self.scheduler.max_num_seqs = streams
        kv_mb = (record.kv_cache_mb or 0.0) * streams
        self.scheduler.cache_size = max(1, math.ceil(kv_mb / 1024))  # GB, whole
        properties = fp32_properties(threads)
        self.pipeline = ov_genai.ContinuousBatchingPipeline(
            str(folder), self.scheduler, "CPU", properties
        )
        self.device = "cpu"
        self.batching = (
            f"continuous batching: up to {streams} sequences per step "
            f"(ContinuousBatchingPipeline, {self.scheduler.max_num_batched_tokens} tokens a step)"
        )
        self.details = Details(
            placement=placement("openvino-genai device", "CPU", "cpu"),
            generation=record,
            extra={"engine": "openvino-genai ContinuousBatchingPipeline",
                   "properties": properties, "scheduler": self._scheduler_record(),
                   "token_clock": "the end of the step that made the token"},
        )  # fmt: skip

    def _scheduler_record(self) -> JSONObject:
        s = self.scheduler
        return {"max_num_seqs": s.max_num_seqs, "max_num_batched_tokens": s.max_num_batched_tokens,
                "cache_size_gb": s.cache_size, "dynamic_split_fuse": s.dynamic_split_fuse,
                "enable_prefix_caching": s.enable_prefix_caching}  # fmt: skip

    def _serve(self, sink: TokenSink) -> None:
        running: dict[int, _Running] = {}
        closing = False
        while not (closing and not running):
            # sleep on the queue when nothing runs; else take what arrived, without waiting
            closing |= self._admit(running, sink, wait=not running and not closing)
            if not running:
                continue
            try:
                self.pipeline.step()
                self._read(running, sink, time.perf_counter())
            # the thread must live on: a request left unanswered would hang its caller
            except BaseException as exc:  # every running request is answered, then dropped
                for request_id in running:
                    sink.failed(request_id, exc)
                running.clear()

    def _admit(self, running: dict[int, _Running], sink: TokenSink, wait: bool) -> bool:
        """Add the arrived requests to the pipeline; True once close() was asked."""
        arrived, closing = self._arrived(wait)
        for item in arrived:
            try:
                ids = ov.Tensor(np.asarray([item.prompt], dtype=np.int64))
                handle = self.pipeline.add_request(item.request_id, ids, exact_length(item.osl))
                running[item.request_id] = _Running(handle)
            except BaseException as exc:  # answered as failed; the case fails at the end
                sink.failed(item.request_id, exc)
        return closing

    def _read(self, running: dict[int, _Running], sink: TokenSink, stamp: float) -> None:
        for request_id, state in list(running.items()):
            if state.handle.can_read():
                new = [int(t) for out in state.handle.read().values() for t in out.generated_ids]
                if new and not state.tokens:
                    sink.first_token(request_id)
                state.tokens += new
                state.times += [stamp] * len(new)
            status = state.handle.get_status()
            if status == ov_genai.GenerationStatus.FINISHED:
                sink.finished(request_id, state.tokens, state.times)
                del running[request_id]
            elif status in ENDED:
                sink.failed(request_id, CaseError(f"the pipeline ended the request: {status}"))
                del running[request_id]
