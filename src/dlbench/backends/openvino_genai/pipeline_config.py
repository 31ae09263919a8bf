"""How dlbench makes and configures openvino-genai's pipelines, shared by the generation
loop's LLMPipeline (backend) and the server's ContinuousBatchingPipeline (serving):
the export command, fp32 throughout, and exactly osl greedy tokens."""

from __future__ import annotations

import sys

import openvino_genai as ov_genai

EXPORT = [sys.executable, "-m", "optimum.commands.optimum_cli", "export", "openvino",
          "--model", "{checkpoint}", "--task", "text-generation-with-past",
          "--weight-format", "fp32", "{out}"]  # fmt: skip
CONVERTER = "optimum-intel export openvino (fp32)"


def fp32_properties(threads: int) -> dict[str, str | int]:
    """fp32 compute and KV cache (the CPU plugin's defaults are bf16 and u8 where the
    CPU has bf16 units), on `threads` threads."""
    return {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
            "INFERENCE_NUM_THREADS": threads}  # fmt: skip


def exact_length(osl: int) -> ov_genai.GenerationConfig:
    """Greedy decoding of exactly osl tokens (no end-of-sequence is ever produced:
    workloads.decoder)."""
    return ov_genai.GenerationConfig(max_new_tokens=osl, min_new_tokens=osl, ignore_eos=True,
                                     do_sample=False)  # fmt: skip
