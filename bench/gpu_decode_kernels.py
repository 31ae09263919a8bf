"""Where a compiled decode step's time goes: its kernels by total time, against the bound.

    python bench/gpu_decode_kernels.py [--workload llama-3.1-8b] [--isl 1024] [--osl 32]

Builds the workload's seeded model in bf16 on the GPU (as dlbench's torch
generation case does), runs transformers' generate with its reduce-overhead
decode step (dlbench's `-c reduce-overhead`) twice to compile and warm it, then
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

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from dlbench.backends.torch.decoder import build_decoder, decode_step_compiled, greedy_kwargs
from dlbench.workloads.decoder import SHAPES


def generate(model: torch.nn.Module, ids: torch.Tensor, osl: int) -> None:
    options = {**greedy_kwargs(osl), **decode_step_compiled()}
    with torch.inference_mode():
        model.generate(ids, attention_mask=torch.ones_like(ids), **options)
    if ids.is_cuda:
        torch.cuda.synchronize()


def kernel_times_us(model: torch.nn.Module, ids: torch.Tensor, osl: int) -> Counter[str]:
    """Each kernel name's total CUDA time (µs) over one generation of `osl` tokens."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        generate(model, ids, osl)
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
    values = (ceilings or {}).get("values", {})
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
    args = parser.parse_args()
    on_gpu = torch.cuda.is_available()
    device = "cuda" if on_gpu else "cpu"
    name = args.workload if on_gpu else "llm-tiny"
    shape = SHAPES[name]
    isl = args.isl if on_gpu else 32
    model = build_decoder(shape, seed=0, device=device, dtype=torch.bfloat16)
    prompts = np.random.default_rng(0).integers(3, shape.vocab, size=(1, isl))
    ids = torch.from_numpy(prompts).to(device)
    started = time.perf_counter()
    for _ in range(2):  # compile, then warm (CUDA graphs record on a later call)
        generate(model, ids, args.osl)
    print(f"{name} bf16 isl={isl}: compiled and warmed in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    generate(model, ids, args.osl)
    whole_s = time.perf_counter() - started
    started = time.perf_counter()
    generate(model, ids, 1)
    prefill_s = time.perf_counter() - started
    step_ms = (whole_s - prefill_s) / (args.osl - 1) * 1000.0
    print(f"decode step {step_ms:.3f} ms ({1000.0 / step_ms:.1f} tokens/s)")
    gbps = args.gbps or stored_memory_gbps()
    print(f"memory ceiling: {f'{gbps:,.0f} GB/s' if gbps else 'none (no GPU roofline run stored)'}")
    if not on_gpu:
        return
    decode = kernel_times_us(model, ids, args.osl)
    decode.subtract(kernel_times_us(model, ids, 1))
    steps = args.osl - 1
    busy_ms = sum(decode.values()) / steps / 1000.0
    print(f"kernels per decode step {busy_ms:.3f} ms ({busy_ms / step_ms:.0%} of the step)")
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    embedding = model.get_input_embeddings().weight
    step_bytes = weights - embedding.numel() * embedding.element_size()
    if gbps:
        bound_ms = step_bytes / (gbps * 1e9) * 1000.0
        print(f"weights read per step {step_bytes / 1e9:.2f} GB: bound {bound_ms:.3f} ms at "
              f"{gbps:,.0f} GB/s; the step is {bound_ms / step_ms:.0%} of it, "
              f"its kernels {bound_ms / busy_ms:.0%}")  # fmt: skip
    print(f"{'ms/step':>8} {'share':>6}  kernel")
    for kernel, total_us in decode.most_common(15):
        per_step_ms = total_us / steps / 1000.0
        print(f"{per_step_ms:8.3f} {per_step_ms / busy_ms:6.1%}  {kernel}")


if __name__ == "__main__":
    main()
