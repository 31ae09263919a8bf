"""llama.cpp's parallel slots serving requests (worker.token_serving), as llama-server does.

llama-server keeps `--parallel N` slots in one context: each slot is a sequence id
of the KV cache, and every step decodes one batch holding the next token of each
generating slot and chunks of the prompts still being read. llama-cpp-python's
`Llama` holds one sequence, and its own server serves one request at a time, so this
module drives llama.cpp's C API (`llama_decode` on a multi-sequence `llama_batch`)
through llama-cpp-python's bindings: no library offers it in Python.

One thread owns the context: it admits arrivals into free slots, decodes a step,
picks each slot's next token greedily (the largest logit, as llama.cpp's greedy
sampler does), stamps it with the step's end, and frees a slot's cache when its
request has its `osl` tokens. With nothing to do it sleeps on the arrivals' queue.
The weights and the KV cache are fp32, with the threads set, as for the generation
loop (backends.llama_cpp.backend); the cache holds `streams` whole sequences.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Protocol

import llama_cpp
import numpy as np

from dlbench.backends.base import Job
from dlbench.backends.serving_engine import Request, SteppingEngine, TokenSink
from dlbench.errors import CaseError
from dlbench.results.details import Details
from dlbench.untyped import JSONObject

# Tokens one decode may hold (llama-server's default --batch-size): prompts longer than
# what is left of it after the generating slots' tokens are read over several steps.
STEP_TOKENS = 2048
# What llama.cpp computes at once inside a step (llama-server's default --ubatch-size):
# its attention buffers are sized for this many tokens over the whole cache.
MICRO_BATCH_TOKENS = 512


@dataclass
class _Slot:
    request: Request
    fed: int = 0  # prompt tokens already in the cache
    tokens: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    @property
    def position(self) -> int:
        """The cache position of the next token this slot feeds."""
        return self.fed + max(0, len(self.tokens) - 1)


class LoadedModel(Protocol):
    """backends.llama_cpp.backend.LlamaCppGenerator as the slots use it (that module
    imports this one)."""

    llm: llama_cpp.Llama
    details: Details

    def recorded(self) -> JSONObject: ...


class LlamaCppSlots(SteppingEngine):
    thread_name = "llama-slots"

    def __init__(self, loaded: LoadedModel, job: Job, threads: int, streams: int) -> None:
        """`loaded`: the generation loop's LlamaCppGenerator, whose model this serves;
        its own one-sequence context stays unused."""
        super().__init__()
        self._loader = loaded
        llm = loaded.llm
        sequence = job.params["isl"] + job.params["osl"]
        # the generation loop's context settings (threads, fp32 cache, flash attention
        # as llama-cpp-python sets it), sized for `streams` sequences
        params = type(llm.context_params).from_buffer_copy(llm.context_params)
        params.n_ctx = streams * sequence
        params.n_batch, params.n_ubatch = STEP_TOKENS, MICRO_BATCH_TOKENS
        params.n_seq_max = streams
        params.kv_unified = True  # one cache shared by the slots, as llama-server's default
        self._ctx = llama_cpp.llama_init_from_model(llm.model, params)
        if not self._ctx:
            raise CaseError(f"llama.cpp could not make a context of {streams} sequences")
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._vocab = llm.n_vocab()
        self._batch = llama_cpp.llama_batch_init(STEP_TOKENS, 0, 1)
        self.streams = streams
        self.device = "cpu"
        self.batching = (
            f"continuous batching: {streams} parallel slots in one context, up to "
            f"{STEP_TOKENS} tokens a step (llama.cpp's llama_decode, as llama-server)"
        )
        self.details = Details(
            placement=loaded.details.placement,
            generation=self._loader.details.generation,  # one sequence's cache
            extra={"engine": "llama.cpp parallel slots (llama_decode, multi-sequence batch)",
                   "settings": {**self._loader.recorded(), "n_ctx": params.n_ctx,
                                "n_seq_max": streams, "n_batch": STEP_TOKENS,
                                "n_ubatch": MICRO_BATCH_TOKENS, "kv_unified": True},
                   "token_clock": "the end of the step that made the token"},
        )  # fmt: skip

    def _release(self) -> None:
        llama_cpp.llama_batch_free(self._batch)
        llama_cpp.llama_free(self._ctx)

    def _serve(self, sink: TokenSink) -> None:
        slots: dict[int, _Slot] = {}
        waiting: collections.deque[Request] = collections.deque()
        closing = False
        while not (closing and not slots and not waiting):
            idle = not slots and not waiting and not closing
            arrived, closed = self._arrived(wait=idle)
            waiting.extend(arrived)
            closing |= closed
            free = [s for s in range(self.streams) if s not in slots]
            while waiting and free:
                slots[free.pop(0)] = _Slot(waiting.popleft())
            if not slots:
                continue
            try:
                self._step(slots, sink)
            # the thread must live on: a request left unanswered would hang its caller
            except BaseException as exc:  # every running request is answered, then dropped
                for seq, slot in slots.items():
                    sink.failed(slot.request.request_id, exc)
                    llama_cpp.llama_memory_seq_rm(self._memory, seq, -1, -1)
                slots.clear()

    def _step(self, slots: dict[int, _Slot], sink: TokenSink) -> None:
        """One decode: each generating slot's last token, then prompt chunks in the room
        left; then each slot whose logits came out takes its next token."""
        batch, outputs = self._batch, {}
        n = 0
        for seq, slot in slots.items():  # decoding slots first: their latency is TPOT
            if slot.tokens:
                outputs[seq] = n
                n = _put(batch, n, slot.tokens[-1], slot.position, seq, True)
        for seq, slot in slots.items():
            prompt = slot.request.prompt
            while not slot.tokens and slot.fed < len(prompt) and n < STEP_TOKENS:
                last = slot.fed == len(prompt) - 1
                if last:
                    outputs[seq] = n
                n = _put(batch, n, int(prompt[slot.fed]), slot.fed, seq, last)
                slot.fed += 1
        batch.n_tokens = n
        if llama_cpp.llama_decode(self._ctx, batch) != 0:
            raise CaseError("llama_decode failed (the KV cache is full?)")
        stamp = time.perf_counter()
        for seq, row in outputs.items():
            slot = slots[seq]
            logits = llama_cpp.llama_get_logits_ith(self._ctx, row)
            slot.tokens.append(int(np.argmax(np.ctypeslib.as_array(logits, (self._vocab,)))))
            slot.times.append(stamp)
            if len(slot.tokens) == 1:
                sink.first_token(slot.request.request_id)
            if len(slot.tokens) == slot.request.osl:
                sink.finished(slot.request.request_id, slot.tokens, slot.times)
                llama_cpp.llama_memory_seq_rm(self._memory, seq, -1, -1)
                del slots[seq]


def _put(batch: llama_cpp.llama_batch, index: int, token: int, pos: int, seq: int,
         logits: bool) -> int:  # fmt: skip
    """Token `index` of the batch: at `pos` of sequence `seq`, its logits kept or not."""
    batch.token[index] = token
    # llama-cpp-python annotates pos as an array of arrays; llama.h's is `llama_pos * pos`,
    # one position (an int32) per token
    batch.pos[index] = pos  # type: ignore[call-overload]
    batch.n_seq_id[index] = 1
    batch.seq_id[index][0] = seq
    batch.logits[index] = 1 if logits else 0
    return index + 1
