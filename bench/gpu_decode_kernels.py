"""Where a compiled decode step's time goes: its kernels by total time, against the bound.

    python bench/gpu_decode_kernels.py [--workload llama-3.1-8b] [--isl 1024] [--osl 32]
        [--loop generate|device] [--option NAME=VALUE ...]

Builds the workload's seeded model in bf16 on the GPU (as dlbench's torch
generation case does), runs transformers' generate with its reduce-overhead
decode step (dlbench's `-c reduce-overhead`), or with --loop device dlbench's own
device loop (`-c device-loop`, its step's Inductor options amended by --option),
twice to compile and warm it, then
profiles a generation of `osl` tokens and one of a single token (its prefill),
and prints the kernels of the difference (the decode) by total time: what each
kind costs per decode step, their sum against the step's wall time, and the bytes
one step must read over the memory bound: --gbps, else the memory ceiling of this
machine's newest `dlbench roofline` run in the store ($DLBENCH_DB).
Needs a CUDA GPU, torch and transformers; on a CPU it runs the same steps at
llm-tiny's shape (a rehearsal: no kernels are listed).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from dlbench.backends.base import Job
from dlbench.backends.torch import device_loop as loop
from dlbench.backends.torch.backend import compile_counters
from dlbench.backends.torch.decoder import build_decoder, decode_step_compiled, greedy_kwargs
from dlbench.spec.case import Case
from dlbench.workloads import get_workload
from dlbench.workloads.decoder import SHAPES

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

Generate = Callable[[torch.Tensor, int], None]


def transformers_generate(model: LlamaForCausalLM) -> Generate:
    """transformers' generate with its own reduce-overhead decode step."""

    def generate(ids: torch.Tensor, osl: int) -> None:
        options = {**greedy_kwargs(osl), **decode_step_compiled()}
        with torch.inference_mode():
            model.generate(ids, attention_mask=torch.ones_like(ids), **options)
        if ids.is_cuda:
            torch.cuda.synchronize()

    return generate


def device_loop(model: LlamaForCausalLM, name: str, isl: int, osl: int,
                options: dict[str, bool | int | str]) -> Generate:  # fmt: skip
    """dlbench's device loop (-c device-loop) on `model`, its step's options amended."""
    loop.DECODE_STEP_OPTIONS.update(options)
    device = str(next(model.parameters()).device)
    case = Case(name, "torch", "device-loop", device=device, batch_size=1, threads=1,
                precision="bf16")  # fmt: skip
    job = Job(case, get_workload(name), device, 1, {"isl": isl, "osl": osl}, seed=0)
    generator = loop.DeviceLoopGenerator(job, model, torch.bfloat16, "seeded", compile_counters)

    def generate(ids: torch.Tensor, length: int) -> None:
        generator.generate(ids.cpu().numpy(), length)

    return generate


def inductor_option(text: str) -> tuple[str, bool | int | str]:
    """NAME=VALUE as Inductor takes it: true/false a bool, digits an int, else text."""
    name, equals, value = text.partition("=")
    if not name or not equals:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE")
    if value in ("true", "false"):
        return name, value == "true"
    return name, int(value) if value.isdigit() else value


def kernel_times_us(generate: Generate, ids: torch.Tensor, osl: int) -> Counter[str]:
    """Each kernel name's total CUDA time (µs) over one generation of `osl` tokens."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        generate(ids, osl)
    totals: Counter[str] = Counter()
    for event in prof.profiler.kineto_results.events():  # as pipeline.device_busy_s reads them
        if event.device_type() == torch.autograd.DeviceType.CUDA and not event.is_user_annotation():
            totals[event.name()[:90]] += (event.end_ns() - event.start_ns()) / 1000.0
    return totals


def stored_memory_gbps() -> float | None:
    """The best memory ceiling of this machine's newest roofline run in the store."""
    import socket

    from dlbench.results.ceilings import REGIMES, ceiling_key, regime_key
    from dlbench.results.store import open_store

    with open_store(read_only=True) as store:
        ceilings = store.latest_ceilings(socket.gethostname())
    values = ceilings.values if ceilings is not None else {}
    stem = ceiling_key("cuda:0", "memory")
    keys = [stem, *(regime_key(stem, regime) for regime in REGIMES)]
    memory = [values[key] for key in keys if key in values]
    return max(memory) if memory else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="llama-3.1-8b")
    parser.add_argument("--isl", type=int, default=1024)
    parser.add_argument("--osl", type=int, default=32)
    parser.add_argument("--gbps", type=float, default=None,
                        help="memory ceiling, GB/s (default: the store's roofline)")  # fmt: skip
    parser.add_argument("--loop", choices=("generate", "device"), default="generate")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        type=inductor_option,
                        help="an Inductor option of the device loop's step")  # fmt: skip
    args = parser.parse_args()
    if args.option and args.loop != "device":
        parser.error("--option amends the device loop's step: give --loop device too")
    on_gpu = torch.cuda.is_available()
    device = "cuda" if on_gpu else "cpu"
    name = args.workload if on_gpu else "llm-tiny"
    shape = SHAPES[name]
    isl = args.isl if on_gpu else 32
    model = build_decoder(shape, seed=0, device=device, dtype=torch.bfloat16)
    prompts = np.random.default_rng(0).integers(3, shape.vocab, size=(1, isl))
    ids = torch.from_numpy(prompts).to(device)
    if args.loop == "device":
        generate = device_loop(model, name, isl, args.osl, dict(args.option))
    else:
        generate = transformers_generate(model)
    started = time.perf_counter()
    for _ in range(2):  # compile, then warm (CUDA graphs record on a later call)
        generate(ids, args.osl)
    print(f"{name} bf16 isl={isl} ({args.loop} {args.option}): compiled and warmed in "
          f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    started = time.perf_counter()
    generate(ids, args.osl)
    whole_s = time.perf_counter() - started
    started = time.perf_counter()
    generate(ids, 1)
    prefill_s = time.perf_counter() - started
    step_ms = (whole_s - prefill_s) / (args.osl - 1) * 1000.0
    print(f"decode step {step_ms:.3f} ms ({1000.0 / step_ms:.1f} tokens/s)")
    gbps = args.gbps or stored_memory_gbps()
    print(f"memory ceiling: {f'{gbps:,.0f} GB/s' if gbps else 'none (no GPU roofline run stored)'}")
    if not on_gpu:
        return
    decode = kernel_times_us(generate, ids, args.osl)
    decode.subtract(kernel_times_us(generate, ids, 1))
    steps = args.osl - 1
    busy_ms = sum(decode.values()) / steps / 1000.0
    print(f"kernels per decode step {busy_ms:.3f} ms ({busy_ms / step_ms:.0%} of the step)")
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    embedding = model.model.embed_tokens.weight
    step_bytes = weights - embedding.numel() * embedding.element_size()
    if gbps:
        bound_ms = step_bytes / (gbps * 1e9) * 1000.0
        print(f"weights read per step {step_bytes / 1e9:.2f} GB: bound {bound_ms:.3f} ms at "
              f"{gbps:,.0f} GB/s; the step is {bound_ms / step_ms:.0%} of it, "
              f"its kernels {bound_ms / busy_ms:.0%}")  # fmt: skip
    print(f"{'ms/step':>8} {'share':>6}  kernel")
    for kernel, total_us in decode.most_common(20):
        per_step_ms = total_us / steps / 1000.0
        print(f"{per_step_ms:8.3f} {per_step_ms / busy_ms:6.1%}  {kernel}")


if __name__ == "__main__":
    main()
