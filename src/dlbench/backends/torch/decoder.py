"""The decoder workloads in transformers: the shared checkpoint, and torch's generation.

The checkpoint (weights, config and tokenizer in transformers' folder layout) is
what every engine converts, so all of them run the same weights. It is built
once per workload and seed by `dlbench.backends.torch.decoder_builder`, in a
process of its own, and cached (dlbench.reference.decoder).

On a GPU torch builds the model from the seed on the device instead (`seeded_model`):
an 8B model's fp32 checkpoint would be 32 GB on disk and many minutes to write and
read. Its reference is made there too, from the same weights (`own_reference`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import torch

from dlbench.backends.base import GenerationTrace, Generator, Job, placement
from dlbench.backends.torch.pipeline import device_busy_s
from dlbench.backends.torch.precision import dtype_name
from dlbench.reference.builtin import package_version
from dlbench.reference.decoder import OwnReference, checkpoint_folder, own_reference
from dlbench.results.details import STREAMER_CLOCK, Details
from dlbench.results.env import cpu_model
from dlbench.spec.registry import seeded_on_device
from dlbench.untyped import JSONObject
from dlbench.workloads.decoder import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SHAPES,
    SPECIAL_TOKENS,
    DecoderShape,
    DecoderWorkload,
)

if TYPE_CHECKING:  # transformers is imported where a model or tokenizer is made
    from transformers import (
        CompileConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerBase,
        PreTrainedTokenizerFast,
    )

# The synthetic corpus the tokenizer is trained on: words drawn from a seeded
# lexicon with Zipf's law, so merges follow frequency as in real text.
# Its size grows with the vocabulary: 400 lines of 2,000 words give 49,152 merges.
LEXICON_WORDS, WORDS_PER_LINE, VOCAB_PER_LINE = 40_000, 2_000, 128


def build_tokenizer(vocab: int, seed: int) -> PreTrainedTokenizerFast:
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


def llama_config(shape: DecoderShape) -> LlamaConfig:
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


def build_decoder(
    shape: DecoderShape, seed: int, device: str = "cpu", dtype: torch.dtype | None = None
) -> LlamaForCausalLM:
    """The seeded model, built in fp32 on `device` (its random numbers are that
    device's), then its weights cast to `dtype`. The output rows of the special tokens
    are zero, so their logit is 0 and never the largest of thousands: no engine ever
    produces end-of-sequence, and each does all `osl` steps without one stopping or
    suppressing anything."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(llama_config(shape)).eval()
    with torch.no_grad():
        model.lm_head.weight[: len(SPECIAL_TOKENS)] = 0
    cast_weights(model, dtype or torch.float32)
    return model


def cast_weights(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """The model's weights (its parameters) in `dtype`, each freed in fp32 as it is cast.

    Its buffers, the rotary frequencies computed from the config, stay fp32, as
    transformers' from_pretrained(dtype=...) keeps them: a bf16 copy of them would
    turn position 1,000 by a wrong angle, a different model, not a rounded one."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data = parameter.data.to(dtype)


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


def partial_utf8_tokens(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The ids whose bytes are not whole UTF-8 characters on their own."""
    return [
        token_id
        for token_id in range(len(tokenizer))
        if "\ufffd" in tokenizer.decode([token_id], skip_special_tokens=False)
    ]


class GenerateOptions(TypedDict, total=False):
    """The options of transformers' generate that dlbench sets (greedy_kwargs,
    decode_step_compiled): keywords generate reads into its GenerationConfig."""

    max_new_tokens: int
    min_new_tokens: int
    do_sample: bool
    cache_implementation: str
    disable_compile: bool
    compile_config: CompileConfig


def greedy_kwargs(osl: int) -> GenerateOptions:
    """transformers' generate: exactly `osl` greedy tokens with a static KV cache.

    transformers compiles the decoding step itself where it sees a GPU and a static
    cache; disable_compile keeps eager eager, compile mode compiles the forward
    explicitly (TorchGenerator), and reduce-overhead asks for transformers' own
    compilation (`decode_step_compiled`), on every device alike."""
    return {
        "max_new_tokens": osl,
        "min_new_tokens": osl,
        "do_sample": False,
        "cache_implementation": "static",
        "disable_compile": True,
    }


def decode_step_compiled() -> GenerateOptions:
    """generate's options for transformers' own compilation of the decoding step:
    torch.compile(mode="reduce-overhead"), CUDA graphs replaying each step's kernels
    in one launch, as gpt-fast decodes. The prefill stays eager: transformers compiles
    the step whose shapes never change, and its static cache marks its tensors' fixed
    addresses for CUDA graphs only when they are made outside a compiled region (it
    says compiling the prefill under reduce-overhead is known to fail).

    transformers compiles so only on a GPU; on a CPU (where reduce-overhead has no
    CUDA graphs and is torch.compile's default) its testing switch asks for it, so a
    CPU case runs the code a GPU case does rather than an eager loop under this name."""
    from transformers import CompileConfig

    config = CompileConfig(mode="reduce-overhead")
    # transformers annotates this testing switch by its default alone, None
    config._compile_all_devices = True  # type: ignore[assignment]
    return {"disable_compile": False, "compile_config": config}


class _TokenClock:
    """transformers' streamer interface: `put` gets the prompt, then each step's tokens."""

    def __init__(self, on_first_token: Callable[[], None] | None = None) -> None:
        self.times: list[float] = []
        self._prompt_seen = False
        self._on_first_token = on_first_token

    def put(self, value: torch.Tensor) -> None:
        if self._prompt_seen:
            self.times.append(time.perf_counter())  # the step's tokens are on the host
            if self._on_first_token is not None and len(self.times) == 1:
                self._on_first_token()
        self._prompt_seen = True

    def end(self) -> None:
        return None


class TorchGenerator(Generator):
    """transformers' `generate` on the model it is given: eager, its forward under
    torch.compile, or its decoding step compiled by transformers (reduce-overhead);
    greedy, static cache, the model (and so its cache) held in `dtype`."""

    def __init__(
        self,
        job: Job,
        model: LlamaForCausalLM,
        dtype: torch.dtype,
        weights: str,
        compile_counters: Callable[[], dict[str, int]],
    ) -> None:
        self.device = job.device
        # transformers wraps PreTrainedModel.to with functools.wraps, which typeshed types
        # as a plain callable: the checker then wants the model as the first argument too
        self.model = model.to(job.device).eval()  # type: ignore[arg-type]
        self._compiled_step: GenerateOptions = {}
        if job.case.compile == "compile":
            # torch.compile's defaults, as a user writes it: with dynamic=False the
            # growing attention mask recompiled every decoding step (to the
            # recompile limit); its automatic dynamic shapes settle on three graphs
            # within the first two generations (the first call and the warm-up).
            # dynamic=True compiled llm-tiny faster (36 s against 53 s) but took
            # llm-135m's first call from 77 s to 158 s and its TPOT from 58 to 66 ms.
            self.model.forward = torch.compile(self.model.forward)
        elif job.case.compile == "reduce-overhead":
            self._compiled_step = decode_step_compiled()
        # what torch.compile built, read after the generations (backend.compile_counters)
        self._compile_counters = compile_counters if job.case.compile != "eager" else None
        placed = self._placed = next(self.model.parameters()).device
        self.details = Details(
            placement=placement("torch parameters", str(placed), placed.type),
            extra={
                "engine": "transformers generate",
                "cache": "static",
                "dtype": dtype_name(dtype),
                "weights": weights,
                "token_clock": STREAMER_CLOCK,
            },
        )
        if placed.type == "cuda":
            torch.cuda.reset_peak_memory_stats(placed)  # the peak of generating, weights held

    def peak_device_memory_mb(self) -> float | None:
        if self._placed.type != "cuda":
            return None
        return torch.cuda.max_memory_allocated(self._placed) / 2**20

    def after_generations(self) -> JSONObject:
        if self._compile_counters is None:
            return {}
        return {"compile_counters": self._compile_counters()}

    def decode_kernel_s(self, prompt_ids: np.ndarray, osl: int) -> tuple[float | None, str | None]:
        """A GPU's kernel time over the decode: one whole generation's profiled kernels
        less those of a one-token one (its prefill), as torch.profiler (CUPTI) records
        them, their overlaps counted once (backends.torch.pipeline.device_busy_s)."""
        if self._placed.type != "cuda":
            return None, None
        whole, why = self._kernel_s(prompt_ids, osl)
        prefill, why_prefill = self._kernel_s(prompt_ids, 1)
        if whole is None or prefill is None:
            return None, why or why_prefill
        return max(0.0, whole - prefill), None

    def _kernel_s(self, prompt_ids: np.ndarray, osl: int) -> tuple[float | None, str | None]:
        torch.cuda.synchronize(self._placed)

        def generation() -> None:
            self.generate(prompt_ids, osl)
            torch.cuda.synchronize(self._placed)

        return device_busy_s(generation)

    def generate(
        self, prompt_ids: np.ndarray, osl: int, on_first_token: Callable[[], None] | None = None
    ) -> GenerationTrace:
        ids = torch.from_numpy(np.asarray(prompt_ids)).to(self.device)
        clock = _TokenClock(on_first_token)
        options = {**greedy_kwargs(osl), **self._compiled_step}
        started = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), streamer=clock, **options
            )
        tokens = out[:, ids.shape[1] :].tolist()
        return GenerationTrace(tokens=tokens, started_s=started, token_times_s=clock.times)


def seeds_on_device(job: Job) -> bool:
    """Build the model from the seed on the case's device: on a GPU (an 8B checkpoint
    would be 32 GB written on the host and read back), for the generation loop. A
    LoadGen server is held to the shared reference of its prompts, made apart, so it
    loads the shared checkpoint as every CPU case does."""
    return seeded_on_device("torch", torch.device(job.device).type, job.case.driven_by_loadgen)


def generation_model(
    job: Job, dtype: torch.dtype, seeded: bool
) -> tuple[LlamaForCausalLM, str, OwnReference | None]:
    """The case's model in `dtype`, where its weights come from (as the result records
    it), and its own reference where it has one: built from the seed on the case's
    device (`seeded_model`), else the shared checkpoint, held to the shared reference."""
    name = dtype_name(dtype)
    if seeded:
        model, reference = seeded_model(job, dtype)
        cast = "" if dtype == torch.float32 else f", cast to {name}"
        return model, f"seeded on {job.device} in fp32{cast}", reference
    model = checkpoint_model(checkpoint_folder(job.workload.name, job.seed), dtype)
    return model, f"the shared checkpoint (fp32), loaded as {name}", None


def checkpoint_model(checkpoint: Path, dtype: torch.dtype) -> LlamaForCausalLM:
    """The shared checkpoint, loaded in `dtype`: an 8B model is never held in fp32 on
    its way to bf16."""
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(checkpoint, dtype=dtype)


def seeded_model(job: Job, dtype: torch.dtype) -> tuple[LlamaForCausalLM, OwnReference]:
    """The case's model built from the seed on its own device, and the fp32 reference
    made there from the same weights before they are cast to `dtype`.

    No checkpoint, no tokenizer (the prompts are token ids): the fp32 weights are made
    in place (torch's initialisers on the device, no copy from the host), held to make
    the reference where the cache has none, then cast, so the case runs exactly the
    seeded fp32 weights rounded to its type. The byte tokens' output rows stay as they
    are: no tokenizer, no text streamed."""
    device = torch.device(job.device)
    assert isinstance(job.workload, DecoderWorkload), "a generation case's workload"
    model = build_decoder(job.workload.shape, job.seed, device=str(device))
    reference = seeded_reference(job, model, device)
    cast_weights(model, dtype)
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the fp32 copy's blocks go back before generating
    return model, reference


def seeded_reference(job: Job, model: LlamaForCausalLM, device: torch.device) -> OwnReference:
    """torch eager fp32's greedy tokens and top two logits for the case's prompts, from
    `model` (fp32) on `device`, TF32 off; made once per key (reference.decoder)."""
    osl = job.params["osl"]
    where = device_name(device)
    key = {"workload": job.workload.name, "prompts": job.case_inputs().digest(),
           "device": where, "torch": torch.__version__,
           "transformers": package_version("transformers")}  # fmt: skip
    origin = f"torch eager fp32 on {where}, TF32 off, from the same seeded weights"

    def make() -> dict[str, np.ndarray]:
        prompts = job.inputs()
        return greedy_reference(model, prompts["input_ids"], osl)

    return own_reference(key, origin, make)


def device_name(device: torch.device) -> str:
    """The device as the reference's key and record name it: the GPU's or the CPU's model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model() if device.type == "cpu" else device.type


@contextmanager
def tf32_off() -> Iterator[None]:
    """Strict fp32 matmuls inside (a tf32 case has them on), as they were after."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())  # fmt: skip
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def greedy_reference(
    model: LlamaForCausalLM, prompt_ids: np.ndarray, osl: int
) -> dict[str, np.ndarray]:
    """`model`'s eager greedy tokens ([batch, osl]) and at each step its top two logits,
    on the device it is on, TF32 off."""
    from transformers.generation import GenerateDecoderOnlyOutput

    ids = torch.from_numpy(prompt_ids).to(next(model.parameters()).device)
    with torch.inference_mode(), tf32_off():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            output_logits=True,
            return_dict_in_generate=True,
            **greedy_kwargs(osl),
        )
    # return_dict_in_generate, on a decoder, with output_logits
    assert isinstance(out, GenerateDecoderOnlyOutput) and out.logits is not None
    # generate keeps its static cache on the model (`_cache`, in transformers 5.0 to
    # 5.17) for a next call of the same batch, whatever the dtype the model is then
    # in: the reference's is fp32, and a case's is made anew, in its type, by its own
    # first generation (its memory the case's too)
    if hasattr(model, "_cache"):
        del model._cache
    # the raw logits, one [batch, vocab] per step (before min_new_tokens masks EOS)
    top = torch.stack(out.logits, dim=1).topk(2, dim=-1).values.float().cpu()
    return {
        "tokens": out.sequences[:, ids.shape[1] :].cpu().numpy(),
        "top1": top[..., 0].numpy(),
        "top2": top[..., 1].numpy(),
    }


def reference_tokens(checkpoint: Path, prompt_ids: np.ndarray, osl: int) -> dict[str, np.ndarray]:
    """torch eager fp32's greedy tokens from the shared checkpoint, on the CPU."""
    return greedy_reference(checkpoint_model(checkpoint, torch.float32).eval(), prompt_ids, osl)
