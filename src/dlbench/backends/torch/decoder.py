"""The decoder workloads in transformers: the shared checkpoint, and torch's generation.

The checkpoint (weights, config and tokenizer in transformers' folder layout) is
what every engine converts, so all of them run the same weights. It is built
once per workload and seed by `dlbench.backends.torch.decoder_builder`, in a
process of its own, and cached (dlbench.reference.decoder).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dlbench.backends.base import GenerationTrace, Generator, Job, placement
from dlbench.backends.torch.precision import dtype_name
from dlbench.results.details import Details
from dlbench.workloads.decoder import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SHAPES,
    SPECIAL_TOKENS,
    DecoderShape,
)

# The synthetic corpus the tokenizer is trained on: words drawn from a seeded
# lexicon with Zipf's law, so merges follow frequency as in real text.
# Its size grows with the vocabulary: 400 lines of 2,000 words give 49,152 merges.
LEXICON_WORDS, WORDS_PER_LINE, VOCAB_PER_LINE = 40_000, 2_000, 128


def build_tokenizer(vocab: int, seed: int) -> Any:
    """A byte-level BPE tokenizer of exactly `vocab` tokens, trained here, offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lexicon = np.array(
        ["".join(rng.choice(letters, size=n)) for n in rng.integers(2, 11, size=LEXICON_WORDS)]
    )
    weights = 1.0 / np.arange(1, LEXICON_WORDS + 1)
    weights /= weights.sum()
    corpus = (
        " ".join(lexicon[rng.choice(LEXICON_WORDS, size=WORDS_PER_LINE, p=weights)])
        for _ in range(vocab // VOCAB_PER_LINE + 16)
    )
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer)
    if tokenizer.get_vocab_size() != vocab:
        raise RuntimeError(f"the tokenizer has {tokenizer.get_vocab_size()} tokens, not {vocab}")
    eos, bos, pad = (SPECIAL_TOKENS[i] for i in (EOS_ID, BOS_ID, PAD_ID))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=eos, bos_token=bos, pad_token=pad
    )


def llama_config(shape: DecoderShape) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.max_positions,
        rope_theta=shape.rope_theta,
        tie_word_embeddings=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
    )


def build_decoder(shape: DecoderShape, seed: int, device: str = "cpu", dtype: Any = None) -> Any:
    """The seeded model. The output rows of the special tokens are zero, so their logit
    is 0 and never the largest of thousands: no engine ever produces end-of-sequence,
    and each does all `osl` steps without one stopping or suppressing anything."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(llama_config(shape))
    model = model.to(dtype or torch.float32).eval()
    with torch.no_grad():
        model.lm_head.weight[: len(SPECIAL_TOKENS)] = 0
    return model


def save_checkpoint(workload: str, seed: int, folder: Path) -> None:
    """The workload's checkpoint and tokenizer, in transformers' folder layout.

    The output rows of the byte tokens that are no text alone (UTF-8's lead and
    continuation bytes, which the synthetic corpus never merges into characters) are
    zero too: a random model would pick them often (a quarter of llm-tiny's vocabulary),
    and a server streams no text for them, holding them back for bytes that never
    come. Every token is then text, as a trained model's nearly always is."""
    shape = SHAPES[workload]
    model = build_decoder(shape, seed)
    tokenizer = build_tokenizer(shape.vocab, seed)
    with torch.no_grad():
        model.lm_head.weight[partial_utf8_tokens(tokenizer)] = 0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def partial_utf8_tokens(tokenizer: Any) -> list[int]:
    """The ids whose bytes are not whole UTF-8 characters on their own."""
    return [
        token_id
        for token_id in range(len(tokenizer))
        if "\ufffd" in tokenizer.decode([token_id], skip_special_tokens=False)
    ]


def greedy_kwargs(osl: int) -> dict[str, Any]:
    """transformers' generate: exactly `osl` greedy tokens with a static KV cache.

    transformers compiles the decoding step itself where it sees a GPU and a static
    cache; disable_compile keeps eager eager, and compile mode compiles the forward
    explicitly (TorchGenerator), on every device alike."""
    return {
        "max_new_tokens": osl,
        "min_new_tokens": osl,
        "do_sample": False,
        "cache_implementation": "static",
        "disable_compile": True,
    }


class _TokenClock:
    """transformers' streamer interface: `put` gets the prompt, then each step's tokens."""

    def __init__(self, on_first_token: Callable[[], None] | None = None) -> None:
        self.times: list[float] = []
        self._prompt_seen = False
        self._on_first_token = on_first_token

    def put(self, value: Any) -> None:
        if self._prompt_seen:
            self.times.append(time.perf_counter())  # the step's tokens are on the host
            if self._on_first_token is not None and len(self.times) == 1:
                self._on_first_token()
        self._prompt_seen = True

    def end(self) -> None:
        return None


class TorchGenerator(Generator):
    """transformers' `generate` on the shared checkpoint: eager, or its forward under
    torch.compile; greedy, static cache, the model (and so its cache) held in `dtype`."""

    def __init__(self, job: Job, checkpoint: Path, dtype: torch.dtype) -> None:
        from transformers import LlamaForCausalLM

        self.device = job.device
        # loaded in its dtype: an 8B model is never held in fp32 on its way to bf16
        model = LlamaForCausalLM.from_pretrained(checkpoint, dtype=dtype)
        self.model = model.to(job.device).eval()
        if job.case.compile == "compile":
            # torch.compile's defaults, as a user writes it: with dynamic=False the
            # growing attention mask recompiled every decoding step (to the
            # recompile limit); its automatic dynamic shapes settle on three graphs
            # within the first two generations (the first call and the warm-up).
            # dynamic=True compiled llm-tiny faster (36 s against 53 s) but took
            # llm-135m's first call from 77 s to 158 s and its TPOT from 58 to 66 ms.
            self.model.forward = torch.compile(self.model.forward)
        placed = self._placed = next(self.model.parameters()).device
        self.details = Details(
            placement=placement("torch parameters", str(placed), placed.type),
            extra={
                "engine": "transformers generate",
                "cache": "static",
                "dtype": dtype_name(dtype),
            },
        )
        if placed.type == "cuda":
            torch.cuda.reset_peak_memory_stats(placed)  # the peak of generating, weights held

    def peak_device_memory_mb(self) -> float | None:
        if self._placed.type != "cuda":
            return None
        return torch.cuda.max_memory_allocated(self._placed) / 2**20

    def generate(
        self, prompt_ids: Any, osl: int, on_first_token: Callable[[], None] | None = None
    ) -> GenerationTrace:
        ids = torch.from_numpy(np.asarray(prompt_ids)).to(self.device)
        clock = _TokenClock(on_first_token)
        started = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), streamer=clock, **greedy_kwargs(osl)
            )
        tokens = out[:, ids.shape[1] :].tolist()
        return GenerationTrace(tokens=tokens, started_s=started, token_times_s=clock.times)


def reference_tokens(checkpoint: Path, prompt_ids: np.ndarray, osl: int) -> dict[str, np.ndarray]:
    """torch eager fp32's greedy tokens, and at each step its top two logits."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    ids = torch.from_numpy(prompt_ids)
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            output_logits=True,
            return_dict_in_generate=True,
            **greedy_kwargs(osl),
        )
    # the raw logits, one [batch, vocab] per step (before min_new_tokens masks EOS)
    top = torch.stack(out.logits, dim=1).topk(2, dim=-1).values
    return {
        "tokens": out.sequences[:, ids.shape[1] :].numpy(),
        "top1": top[..., 0].numpy(),
        "top2": top[..., 1].numpy(),
    }
