"""Decoder-only language models (Llama architecture) for text generation, from a config.

Nothing is downloaded: the architecture is a shape below, the weights come from
torch's initialiser under the case's seed (backends/torch/decoder.py builds the
checkpoint once, and every engine converts that same checkpoint), and the
tokenizer is a byte-level BPE trained offline on a seeded synthetic corpus.

A case generates `osl` tokens after a prompt of `isl` seeded token ids, for
`batch` prompts at once. End-of-sequence is never produced (the checkpoint's
output rows of the special tokens are zero, so their logit is 0 while the
largest of thousands of others is positive), so every engine does the same
work and greedy decoding picks the same token wherever the logits agree. Nor is
a byte token that is no UTF-8 character alone (their rows are zero too), so a
server streams every output token as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from dlbench.errors import UserError
from dlbench.workloads.base import WeightDict, Workload

# The tokenizer's special tokens, in id order (ids 0, 1, 2); prompts never hold them.
SPECIAL_TOKENS = ("<|endoftext|>", "<|begin_of_text|>", "<|pad|>")
EOS_ID, BOS_ID, PAD_ID = 0, 1, 2
# The checkpoint and the reference tokens are torch eager fp32's (reference.decoder)
REFERENCE_VALUE_BYTES = 4


@dataclass(frozen=True)
class DecoderShape:
    """A Llama-architecture decoder: what transformers' LlamaConfig takes."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_positions: int
    rope_theta: float
    like: str  # the public model whose shape this is
    # a config's own head_dim where it is not hidden / heads (Gemma's, Qwen3's)
    explicit_head_dim: int | None = None

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden // self.heads

    def parameter_count(self) -> int:
        """Embedding, untied output head, and per layer attention, MLP and two norms."""
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        per_layer = attention + mlp + 2 * self.hidden
        return 2 * self.vocab * self.hidden + self.layers * per_layer + self.hidden


SHAPES = {
    # for tests: seconds per case on any machine
    "llm-tiny": DecoderShape(2, 64, 4, 2, 128, 512, 1024, 10000.0, "none (a test shape)"),
    # SmolLM2-135M's shape (its head untied here): fits a 2-core CPU run
    "llm-135m": DecoderShape(30, 576, 9, 3, 1536, 49152, 8192, 100000.0, "SmolLM2-135M"),
    # Llama-3.1-8B's shape, for a GPU (bf16: 16 GB of weights)
    "llama-3.1-8b": DecoderShape(32, 4096, 32, 8, 14336, 128256, 131072, 500000.0, "Llama-3.1-8B"),
}


def kv_cache_bytes(shape: DecoderShape, batch: int, tokens: int, bytes_per_value: int) -> int:
    """The KV cache of `tokens` positions: keys and values, every layer, every KV head."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * tokens * batch * bytes_per_value


def mean_decode_context(isl: int, osl: int) -> float:
    """The positions a decode step attends to, on average over a generation's decode
    steps: the step giving output token k (2 to osl) attends to isl + k - 1 of them."""
    return isl + osl / 2


def decode_step_bytes(
    shape: DecoderShape, batch: int, isl: int, osl: int, weight_bytes: int, kv_bytes: int
) -> float:
    """The bytes one decode step must read from memory, the least any engine can read:
    every weight at its stored precision but the embedding table, of which a step reads
    only its batch's rows (the output head is untied, so it is read whole); and the KV
    cache of every sequence at the steps' mean context. Activations, logits and the
    cache's one new position are kilobytes to megabytes beside gigabytes, and left out."""
    embedding = shape.vocab * shape.hidden
    weights = (shape.parameter_count() - embedding + batch * shape.hidden) * weight_bytes
    cache = kv_cache_bytes(shape, batch, 1, kv_bytes) * mean_decode_context(isl, osl)
    return float(weights + cache)


def decode_step_flops(shape: DecoderShape, batch: int, isl: int, osl: int) -> float:
    """The FLOPs of one decode step: 2 per weight per sequence (every weight but the
    embedding table, whose row is a lookup), and attention over the steps' mean context
    (QK^T and AV, 2 FLOPs each per position, head and head dimension)."""
    weights = shape.parameter_count() - shape.vocab * shape.hidden
    attention = 4.0 * shape.layers * shape.heads * shape.head_dim * mean_decode_context(isl, osl)
    return float(batch * (2.0 * weights + attention))


def prefill_flops(shape: DecoderShape, batch: int, isl: int) -> float:
    """The least FLOPs of a prefill of `isl` tokens a sequence: 2 per layer weight per
    prompt token; causal attention (position i attends to i positions: isl(isl + 1) / 2
    pairs, QK^T and AV 2 FLOPs each per head dimension); and the output head once, for
    the first output token's logits (an engine computes the last position's alone)."""
    table = shape.vocab * shape.hidden
    layer_weights = shape.parameter_count() - 2 * table
    pairs = isl * (isl + 1) / 2.0
    attention = 4.0 * shape.layers * shape.heads * shape.head_dim * pairs
    return float(batch * (2.0 * layer_weights * isl + 2.0 * table + attention))


def prefill_bytes(
    shape: DecoderShape, batch: int, isl: int, weight_bytes: int, kv_bytes: int
) -> float:
    """The least bytes a prefill moves: every weight read once for the whole batch (of
    the embedding table only the prompts' rows), and the KV cache of the prompts written."""
    table = shape.vocab * shape.hidden
    weights = (shape.parameter_count() - table + batch * isl * shape.hidden) * weight_bytes
    return float(weights + kv_cache_bytes(shape, batch, isl, kv_bytes))


class DecoderWorkload(Workload):
    """Greedy generation of `osl` tokens after an `isl`-token prompt, per sequence."""

    modes = ("infer",)
    torch_scriptable = False
    transformer = True
    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"isl": 128, "osl": 32})
    gpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"isl": 1024, "osl": 128})
    cpu_batch_size = 1
    # a GPU decodes one sequence no faster than eight: the batch fills it
    gpu_batch_size = 8
    primary_metric = "gbps"  # decoding reads every weight for each token

    @property
    def shape(self) -> DecoderShape:
        return SHAPES[self.name]

    # transformers generate runs eagerly, with its forward under torch.compile, or with
    # its decoding step compiled by transformers in CUDA graphs (reduce-overhead); or
    # dlbench's own loop keeps the decode on the device (device-loop)
    compile_modes: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType(
        {"torch": ("eager", "compile", "reduce-overhead", "device-loop")}
    )

    def validate_params(self, given: Mapping[str, int]) -> None:
        super().validate_params(given)
        for defaults in (self.cpu_params, self.gpu_params):
            self.check_context({**defaults, **given})

    def check_context(self, params: Mapping[str, int]) -> None:
        """isl + osl fit the model's context (the case's resolved parameters)."""
        tokens = params["isl"] + params["osl"]
        if tokens > self.shape.max_positions:
            raise UserError(
                f"workload {self.name!r}: isl + osl = {tokens} is beyond its context of "
                f"{self.shape.max_positions} tokens"
            )

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        """One sequence: 2 FLOPs per weight per token (prompt and output), plus attention."""
        tokens = params["isl"] + params["osl"]
        shape = self.shape
        dense = 2.0 * (shape.parameter_count() - shape.vocab * shape.hidden) * tokens
        # each position attends to those before it: QK^T and AV, 2 FLOPs each per pair
        attention = 4.0 * shape.layers * shape.hidden * tokens * tokens / 2.0
        return dense + attention

    def bytes_per_sample(
        self, params: Mapping[str, int], mode: str, value_bytes: int
    ) -> float | None:
        """The weights read once for the prompt and once per further output token, by
        a batch of one: a batch's sequences share each step's reads, so the generation
        loop divides them among its sequences (worker.generation)."""
        return float(value_bytes * self.parameter_count * params["osl"])

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 8.0 * params["isl"]  # int64 token ids

    def memory_bytes(
        self,
        batch_size: int,
        params: Mapping[str, int],
        mode: str,
        value_bytes: int,
        data_files: bool = False,
    ) -> float:
        """The weights and the KV cache of every position, in the model's dtype; and at
        least the fp32 weights, which the checkpoint and the reference tokens the case
        is checked against are built with, in host memory, whatever it runs in."""
        tokens = params["isl"] + params["osl"]
        cache = kv_cache_bytes(self.shape, batch_size, tokens, value_bytes)
        running = value_bytes * self.parameter_count + cache
        return float(max(running, REFERENCE_VALUE_BYTES * self.parameter_count))

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        """Seeded prompts: `isl` token ids per sequence, none of them special."""
        import numpy as np  # here alone: the shapes and their arithmetic are the plan's too

        rng = np.random.default_rng(seed)
        low = len(SPECIAL_TOKENS)
        ids = rng.integers(low, self.shape.vocab, size=(batch_size, params["isl"]))
        return {"input_ids": ids.astype(np.int64)}


class LlmTiny(DecoderWorkload):
    name = "llm-tiny"
    description = "a 2-layer Llama-architecture decoder, random weights (for tests)"
    parameter_count = SHAPES["llm-tiny"].parameter_count()
    cpu_params = MappingProxyType({"isl": 32, "osl": 16})
    gpu_params = cpu_params


class Llm135m(DecoderWorkload):
    name = "llm-135m"
    description = "a Llama-architecture decoder of SmolLM2-135M's shape, random weights"
    parameter_count = SHAPES["llm-135m"].parameter_count()


class Llama31_8b(DecoderWorkload):
    name = "llama-3.1-8b"
    description = "a decoder of Llama-3.1-8B's shape, random weights (for a GPU)"
    parameter_count = SHAPES["llama-3.1-8b"].parameter_count()


LLM_TINY, LLM_135M, LLAMA_31_8B = LlmTiny(), Llm135m(), Llama31_8b()
