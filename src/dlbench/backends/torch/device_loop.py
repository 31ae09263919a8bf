"""dlbench's own greedy decode loop, kept on the device: gpt-fast's recipe.

transformers' `generate` does Python work between decoding steps (its logits
processors, stopping criteria and streamer) and reads every step's tokens on the
host, so a GPU waits for the host each token: on an H200 its CUDA-graph decode of
the Llama-3.1-8B shape kept the GPU 74% busy. This loop (`-c device-loop`) runs
the same transformers model, weights and static cache, but:

- the decoding step (the model's forward for one token, then the greedy choice) is
  one `torch.compile` graph, replayed as a CUDA graph (reduce-overhead's option);
- the next token is chosen on the device and fed to the next step there: the host
  only enqueues steps, and reads the tokens once, when the generation ends;
- Inductor's coordinate-descent tuning is on: with it Inductor lowers a batch of
  one's matrix-vector products to reductions it tunes (torch._inductor.decomposition
  says its own matrix-vector kernels reach peak bandwidth only so), where cuBLAS's
  bf16 GEMVs reached 61% of the memory bound on the H200;
- each token's time is a CUDA event recorded as its step ends (no host synchronise
  per token), put on the host's clock from an event recorded at the start.

So its token times are when each token exists on the device, not when a streaming
client would see it: the record says which (`token_clock`). The prefill runs
eagerly, as transformers' compiled decode keeps it. On a CPU the loop runs the
same code (no CUDA graphs there), stamping the host's clock after each step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from dlbench.backends.base import GenerationTrace, Job
from dlbench.backends.torch.decoder import TorchGenerator
from dlbench.errors import CaseError
from dlbench.results.details import DEVICE_CLOCK, HOST_STEP_CLOCK
from dlbench.workloads.decoder import EOS_ID

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM, StaticCache

# reduce-overhead's one option (torch._inductor.list_mode_options), and the tuning
# that makes Inductor write its own matrix-vector kernels for a batch of one
DECODE_STEP_OPTIONS: dict[str, str | int | bool | Callable[..., object]] = {
    "triton.cudagraphs": True,
    "coordinate_descent_tuning": True,
}


def greedy_choice(logits: torch.Tensor) -> torch.Tensor:
    """The next token of each sequence ([batch, 1]) from the last position's logits
    ([batch, vocab]): the largest, end-of-sequence excluded, as generate's
    min_new_tokens (equal to its max_new_tokens here) excludes it at every step."""
    logits[:, EOS_ID] = float("-inf")
    return logits.argmax(dim=-1, keepdim=True)


# The devices whose steps the loop can time: a GPU by CUDA events, a CPU (which runs
# each step before the call returns) by the host's clock
TIMED_DEVICES = ("cuda", "cpu")


class _StepClock:
    """Each step's end on the host's clock: a CUDA event per step on the case's GPU
    (on its current stream), read after the generation's one synchronise; the host's
    clock itself on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self._device = device if device.type == "cuda" else None
        self._events: list[torch.cuda.Event] = []
        self._host: list[float] = []
        self.started_s = 0.0
        self._start: torch.cuda.Event | None = None

    def _record(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self._device))
        return event

    def start(self) -> None:
        """The generation's start; the GPU first finishes what was queued before it."""
        if self._device is not None:
            torch.cuda.synchronize(self._device)
        self.started_s = time.perf_counter()
        if self._device is not None:
            self._start = self._record()

    def stamp(self) -> None:
        if self._device is not None:
            self._events.append(self._record())
        else:
            self._host.append(time.perf_counter())

    def wait_last(self) -> None:
        """Until the last stamped step is done (a server's first token)."""
        if self._events:
            self._events[-1].synchronize()

    def times_s(self) -> list[float]:
        """Every step's end, on the host's clock (after the generation's synchronise)."""
        if self._start is None:
            return list(self._host)
        start = self._start
        return [self.started_s + start.elapsed_time(event) / 1000.0 for event in self._events]


class DeviceLoopGenerator(TorchGenerator):
    """Greedy generation by dlbench's device loop (the module's docstring says how)."""

    def __init__(
        self,
        job: Job,
        model: LlamaForCausalLM,
        dtype: torch.dtype,
        weights: str,
        compile_counters: Callable[[], dict[str, int]],
    ) -> None:
        kind = torch.device(job.device).type
        if kind not in TIMED_DEVICES:
            raise CaseError(f"-c device-loop times its tokens on a GPU (CUDA events) or a "
                            f"CPU only, not on {kind!r}; use -c reduce-overhead or eager "
                            "there")  # fmt: skip
        super().__init__(job, model, dtype, weights, compile_counters)
        # one cache per batch size for the case's lengths, reset by each generation: its
        # tensors keep their addresses, so a CUDA graph recorded once replays for every
        # generation of that batch
        self._max_tokens = job.params["isl"] + job.params["osl"]
        self._caches: dict[int, StaticCache] = {}
        self._step = torch.compile(self._decode_step, fullgraph=True, options=DECODE_STEP_OPTIONS)
        on_gpu = self._placed.type == "cuda"
        self.details = replace(
            self.details,
            extra={
                **self.details.extra,
                "engine": "dlbench device loop (the transformers model's forward)",
                "decode_step": f"torch.compile fullgraph, options {DECODE_STEP_OPTIONS}",
                "token_clock": DEVICE_CLOCK if on_gpu else HOST_STEP_CLOCK,
            },
        )

    def _decode_step(
        self, token: torch.Tensor, position: torch.Tensor, cache: StaticCache
    ) -> torch.Tensor:
        out = self.model(input_ids=token, past_key_values=cache, cache_position=position,
                         use_cache=True)  # fmt: skip
        return greedy_choice(out.logits[:, -1])

    def _static_cache(self, batch: int, tokens: int) -> StaticCache:
        from transformers import StaticCache

        if tokens > self._max_tokens:
            raise ValueError(f"{tokens} tokens are beyond the case's {self._max_tokens}")
        if batch not in self._caches:
            self._caches[batch] = StaticCache(
                config=self.model.config, max_cache_len=self._max_tokens
            )
        return self._caches[batch]

    def generate(
        self, prompt_ids: np.ndarray, osl: int, on_first_token: Callable[[], None] | None = None
    ) -> GenerationTrace:
        ids = torch.from_numpy(np.asarray(prompt_ids)).to(self.device)
        batch, isl = ids.shape
        positions = torch.arange(isl + osl, device=ids.device)
        # step by step: each step's input, tokens[i - 1], is then contiguous whatever
        # the length, so one compiled graph serves every osl
        tokens = torch.empty((osl, batch, 1), dtype=torch.long, device=ids.device)
        clock = _StepClock(self._placed)
        with torch.inference_mode():
            cache = self._static_cache(batch, isl + osl)
            cache.reset()
            clock.start()
            tokens[0] = self._prefill(ids, positions[:isl], cache)
            clock.stamp()
            if on_first_token is not None:
                clock.wait_last()
                on_first_token()
            for i in range(1, osl):
                # each step a new CUDA-graph replay; its output is copied out at once
                torch.compiler.cudagraph_mark_step_begin()
                tokens[i] = self._step(tokens[i - 1], positions[isl + i - 1 : isl + i], cache)
                clock.stamp()
            generated = tokens[:, :, 0].T.tolist()  # the generation's one synchronise
        return GenerationTrace(tokens=generated, started_s=clock.started_s,
                               token_times_s=clock.times_s())  # fmt: skip

    def _prefill(
        self, ids: torch.Tensor, positions: torch.Tensor, cache: StaticCache
    ) -> torch.Tensor:
        """The prompt's forward, eager, filling the cache; its greedy token."""
        out = self.model(input_ids=ids, past_key_values=cache, cache_position=positions,
                         logits_to_keep=1, use_cache=True)  # fmt: skip
        return greedy_choice(out.logits[:, -1])
