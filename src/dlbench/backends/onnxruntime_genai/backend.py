"""ONNX Runtime GenAI: the shared checkpoint through its model builder, greedy generation.

The builder (`python -m onnxruntime_genai.models.builder`, as the project documents
it) writes the ONNX model and genai_config.json from the checkpoint's folder, at
fp32 for the CPU. Threads go into the session options through a config overlay.
Each generation is a new Generator (its KV cache sized isl + osl): appending the
prompt and asking for each next token, as the project's own examples do.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

import numpy as np
import onnxruntime_genai as og

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

EXPORT = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", "{checkpoint}",
           "-o", "{out}", "-p", "fp32", "-e", "cpu", "-c", "{out}/.builder-cache"]  # fmt: skip
CONVERTER = "onnxruntime-genai model builder (fp32, cpu)"


class OrtGenAiGenerator(Generator):
    def __init__(self, job: Job, threads: int) -> None:
        folder, meta = converted("onnxruntime-genai", job.workload.name, job.seed, EXPORT,
                                 CONVERTER)  # fmt: skip
        config = og.Config(str(folder))
        options = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
        config.overlay(json.dumps({"model": {"decoder": {"session_options": options}}}))
        self.model = og.Model(config)
        self.device = "cpu"
        device_type = self.model.device_type.lower()
        self.details = Details(
            placement=placement("onnxruntime-genai device type", device_type, device_type),
            generation=kv_cache_record(job, "float32", meta),
            extra={"engine": "onnxruntime-genai Generator", "session_options": options},
        )

    def generate(
        self, prompt_ids: np.ndarray, osl: int, on_first_token: Callable[[], None] | None = None
    ) -> GenerationTrace:
        ids = np.asarray(prompt_ids, dtype=np.int32)
        batch, isl = ids.shape
        started = time.perf_counter()
        params = og.GeneratorParams(self.model)
        # exactly osl tokens: no end-of-sequence is ever produced (workloads.decoder)
        params.set_search_options(do_sample=False, batch_size=batch, max_length=isl + osl,
                                  min_length=isl + osl)  # fmt: skip
        generator = og.Generator(self.model, params)
        generator.append_tokens(ids)
        times: list[float] = []
        steps: list[np.ndarray] = []
        while not generator.is_done():
            generator.generate_next_token()
            steps.append(generator.get_next_tokens())
            times.append(time.perf_counter())
            if on_first_token is not None and len(times) == 1:
                on_first_token()
        tokens = np.stack(steps, axis=1).tolist() if steps else [[] for _ in range(batch)]
        return GenerationTrace(tokens=tokens, started_s=started, token_times_s=times)


class OrtGenAiBackend(CpuEngineBackend):
    name = "onnxruntime-genai"
    cpu_part = "CPU provider"
    inter_op = 1  # threads: the session options, set when the model loads

    def version(self) -> str:
        return og.__version__

    def prepare_generation(self, job: Job) -> Generator:
        return OrtGenAiGenerator(job, self.threads)
