"""OpenVINO GenAI: the shared checkpoint exported by optimum-intel, run by LLMPipeline.

`optimum-cli export openvino` (optimum-intel, as OpenVINO documents the path)
writes the stateful IR and the tokenizer IRs from the checkpoint's folder, at
fp32. The pipeline is held to fp32 throughout: on a CPU with bf16 units its
default inference precision is bf16 and its default KV cache is u8, so both are
set explicitly, with the threads, and recorded. Its prefix cache is off (see below).

Token times are the pipeline's own: perf_metrics' new-token times, stamped as
each token is produced, on the same monotonic clock as time.perf_counter (in ms),
so TTFT runs from dlbench's start of the call. A streamer would stamp them as
they reach the caller, but a Python streamer cost llm-135m 12% of its decode rate
against a plain loop (bench/llm_fidelity.py), and LLMPipeline streams no batch
larger than one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import openvino as ov
import openvino_genai as ov_genai

from dlbench.backends.base import (
    CpuEngineBackend,
    GenerationTrace,
    Generator,
    Job,
    kv_cache_record,
    placement,
)
from dlbench.backends.openvino_genai.pipeline_config import (
    CONVERTER,
    EXPORT,
    exact_length,
    fp32_properties,
)
from dlbench.backends.serving_engine import ServingEngine
from dlbench.reference.decoder import converted
from dlbench.results.details import Details


class OvGenAiGenerator(Generator):
    def __init__(self, job: Job, threads: int) -> None:
        folder, meta = converted("openvino-genai", job.workload.name, job.seed, EXPORT, CONVERTER)
        self.properties = fp32_properties(threads)
        # Its default scheduler caches prompt prefixes: the same prompt again skipped the
        # prefill (TTFT 26 ms against 160 ms cold for llm-135m's 128 tokens). Every
        # generation here repeats the case's prompts, so the cache is off: each one
        # does its prefill, as a new request does.
        scheduler = ov_genai.SchedulerConfig()
        scheduler.enable_prefix_caching = False
        self.pipeline = ov_genai.LLMPipeline(
            str(folder), "CPU", scheduler_config=scheduler, **self.properties
        )
        self.device = "cpu"
        self.details = Details(
            placement=placement("openvino-genai device", "CPU", "cpu"),
            generation=kv_cache_record(job, "float32", meta),
            extra={"engine": "openvino-genai LLMPipeline", "properties": self.properties,
                   "prefix_caching": scheduler.enable_prefix_caching,
                   "token_clock": "LLMPipeline's perf_metrics new-token times"},
        )  # fmt: skip

    def generate(
        self, prompt_ids: np.ndarray, osl: int, on_first_token: Callable[[], None] | None = None
    ) -> GenerationTrace:
        ids = np.asarray(prompt_ids, dtype=np.int64)
        inputs = ov_genai.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        streamer = _FirstToken(on_first_token) if on_first_token is not None else None
        started = time.perf_counter()
        result = self.pipeline.generate(inputs, exact_length(osl), streamer)
        metrics = result.perf_metrics
        times = [t / 1000.0 for t in metrics.raw_metrics.m_new_token_times]
        tokens = [list(map(int, sequence)) for sequence in result.tokens]
        return GenerationTrace(tokens=tokens, started_s=started, token_times_s=times)


class _FirstToken(ov_genai.StreamerBase):
    """Tells a server's client of the first token as the pipeline hands it over; later
    tokens pass untouched (their times are perf_metrics')."""

    def __init__(self, on_first_token: Callable[[], None]) -> None:
        super().__init__()
        self._on_first_token: Callable[[], None] | None = on_first_token

    def write(self, token: int | list[int]) -> ov_genai.StreamingStatus:
        if self._on_first_token is not None:
            self._on_first_token()
            self._on_first_token = None
        return ov_genai.StreamingStatus.RUNNING

    def end(self) -> None:
        return None


class OvGenAiBackend(CpuEngineBackend):
    name = "openvino-genai"
    streams_share_threads = True
    cpu_part = "CPU plugin"
    inter_op = "n/a"  # threads: INFERENCE_NUM_THREADS, set when the model loads

    def version(self) -> str:
        return ov_genai.__version__

    def prepare_generation(self, job: Job) -> Generator:
        return OvGenAiGenerator(job, self.threads)

    def prepare_serving(self, job: Job, streams: int) -> ServingEngine:
        from dlbench.backends.openvino_genai.serving import OvContinuousBatching

        return OvContinuousBatching(job, self.threads, streams)
