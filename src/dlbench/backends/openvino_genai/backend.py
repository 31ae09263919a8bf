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

import sys
import time
from typing import Any

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
from dlbench.reference.decoder import converted
from dlbench.results.details import Details

EXPORT = [sys.executable, "-m", "optimum.commands.optimum_cli", "export", "openvino",
          "--model", "{checkpoint}", "--task", "text-generation-with-past",
          "--weight-format", "fp32", "{out}"]  # fmt: skip
CONVERTER = "optimum-intel export openvino (fp32)"


class OvGenAiGenerator(Generator):
    def __init__(self, job: Job, threads: int) -> None:
        folder, meta = converted("openvino-genai", job.workload.name, job.seed, EXPORT, CONVERTER)
        self.properties = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
                           "INFERENCE_NUM_THREADS": threads}  # fmt: skip
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

    def generate(self, prompt_ids: Any, osl: int) -> GenerationTrace:
        ids = np.asarray(prompt_ids, dtype=np.int64)
        inputs = ov_genai.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        # exactly osl tokens (no end-of-sequence is ever produced: workloads.decoder)
        config = ov_genai.GenerationConfig(max_new_tokens=osl, min_new_tokens=osl,
                                           ignore_eos=True, do_sample=False)  # fmt: skip
        started = time.perf_counter()
        result = self.pipeline.generate(inputs, config)
        metrics = result.perf_metrics
        times = [t / 1000.0 for t in metrics.raw_metrics.m_new_token_times]
        tokens = [list(map(int, sequence)) for sequence in result.tokens]
        return GenerationTrace(tokens=tokens, started_s=started, token_times_s=times)


class OvGenAiBackend(CpuEngineBackend):
    name = "openvino-genai"
    streams_share_threads = True
    cpu_part = "CPU plugin"
    inter_op = "n/a"  # threads: INFERENCE_NUM_THREADS, set when the model loads

    def version(self) -> str:
        return ov_genai.__version__

    def prepare_generation(self, job: Job) -> Generator:
        return OvGenAiGenerator(job, self.threads)
