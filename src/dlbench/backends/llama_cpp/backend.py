"""llama.cpp through llama-cpp-python: the shared checkpoint as an fp32 GGUF, greedy decoding.

The checkpoint is written to GGUF by `dlbench.backends.llama_cpp.gguf_export` (the
`gguf` package's writer) in a process of its own, cached like every conversion.
The model loads with the threads set for both prompt and generation, and an fp32
KV cache (llama.cpp's default is f16), sized for the case's isl + osl tokens.

`Llama.generate` keeps the previous generation's tokens and reuses the longest
matching prefix of the next prompt: every generation here repeats the case's
prompt, so the state is reset before each one, and each does its whole prefill,
as a new request does. Token times are taken as `generate` yields each token,
the moment its caller has it. llama-cpp-python's Llama holds one sequence, so a
case's batch is one (FrameworkInfo.max_batch); a generation server runs parallel
slots in a context of its own on the same weights (backends.llama_cpp.slots).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

import llama_cpp

from dlbench.backends.base import (
    CpuEngineBackend,
    GenerationTrace,
    Generator,
    Job,
    kv_cache_record,
    load_failure,
    placement,
)
from dlbench.backends.llama_cpp.gguf_export import CONVERTER, EXPORT, GGUF_FILE
from dlbench.backends.serving_engine import ServingEngine
from dlbench.reference.decoder import converted
from dlbench.results.details import Details, Placement
from dlbench.untyped import JSONObject

if TYPE_CHECKING:
    import numpy as np


class _Sampling(TypedDict):
    """Llama.generate's sampling arguments dlbench sets."""

    temp: float
    top_k: int
    repeat_penalty: float


class _Settings(TypedDict):
    """Llama's settings dlbench chooses, recorded with the result (recorded())."""

    n_ctx: int
    n_threads: int
    n_threads_batch: int
    type_k: int
    type_v: int
    n_gpu_layers: int


# Greedy: llama-cpp-python's sampler chain is the greedy sampler alone at temperature 0;
# a repeat penalty of 1 leaves the logits as they are.
GREEDY = _Sampling(temp=0.0, top_k=1, repeat_penalty=1.0)


def offload_placement() -> Placement:
    """No layer is offloaded (n_gpu_layers 0), whatever the build could do."""
    can = "can" if llama_cpp.llama_supports_gpu_offload() else "cannot"
    return placement("llama.cpp n_gpu_layers", f"0 layers offloaded (this build {can})", "cpu")


class LlamaCppGenerator(Generator):
    def __init__(self, job: Job, threads: int) -> None:
        folder, meta = converted("llama-cpp", job.workload.name, job.seed, EXPORT, CONVERTER)
        self.settings: _Settings = {
            "n_ctx": job.params["isl"] + job.params["osl"],
            "n_threads": threads,
            "n_threads_batch": threads,
            "type_k": llama_cpp.GGML_TYPE_F32,
            "type_v": llama_cpp.GGML_TYPE_F32,
            "n_gpu_layers": 0,
        }
        try:
            self.llm = llama_cpp.Llama(str(folder / GGUF_FILE), verbose=False, **self.settings)
        except ValueError as exc:  # llama.cpp's own reason went to its log, silenced here
            raise load_failure("llama.cpp could not load the GGUF file", exc) from None
        self.device = "cpu"
        self.details = Details(
            placement=offload_placement(),
            generation=kv_cache_record(job, "float32", meta),
            extra={"engine": "llama-cpp-python Llama.generate", "settings": self.recorded(),
                   "system_info": llama_cpp.llama_print_system_info().decode().strip()},
        )  # fmt: skip

    def recorded(self) -> JSONObject:
        """The settings as the loaded model holds them, the cache types by name."""
        flash = self.llm.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        return {**self.settings, "type_k": "f32", "type_v": "f32", "n_batch": self.llm.n_batch,
                "flash_attn": flash}  # fmt: skip

    def generate(
        self, prompt_ids: np.ndarray, osl: int, on_first_token: Callable[[], None] | None = None
    ) -> GenerationTrace:
        prompt = [int(token) for token in prompt_ids[0]]
        self.llm.reset()  # no prefix of the last generation is reused
        started = time.perf_counter()
        tokens: list[int] = []
        times: list[float] = []
        for token in self.llm.generate(prompt, **GREEDY):
            tokens.append(int(token))
            times.append(time.perf_counter())
            if on_first_token is not None and len(tokens) == 1:
                on_first_token()
            if len(tokens) == osl:
                break
        return GenerationTrace(tokens=[tokens], started_s=started, token_times_s=times)


class LlamaCppBackend(CpuEngineBackend):
    name = "llama-cpp"
    cpu_part = "CPU build"
    inter_op = "n/a"  # threads: n_threads and n_threads_batch, set when the model loads

    def version(self) -> str:
        return str(llama_cpp.__version__)

    def prepare_generation(self, job: Job) -> Generator:
        return LlamaCppGenerator(job, self.threads)

    def prepare_serving(self, job: Job, streams: int) -> ServingEngine:
        from dlbench.backends.llama_cpp.slots import LlamaCppSlots

        return LlamaCppSlots(LlamaCppGenerator(job, self.threads), job, self.threads, streams)
