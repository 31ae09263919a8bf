"""Does dlbench's decode MBU agree with one computed by hand for the same case?

For each in-process engine on this CPU, in one run: dlbench measures the case (its
worker) and reports its decode MBU against the memory ceiling (results.decode_bound:
its bytes per step from workloads.decoder, over its median TPOT, over the ceiling).
The hand figure shares nothing with that code but the ceiling: the bytes one decode
step reads are counted from the checkpoint's own tensors (the safetensors file's
shapes: every tensor but the embedding table read whole, the batch's one row of it,
and the KV cache of the steps' mean context from its config.json), and the decode
rate is a plain script's against the engine's API with no per-token clock
(bench/llm_fidelity.py: a whole generation of osl tokens less a one-token one). Both
are divided by the same ceiling: this machine's memory bandwidth, measured first by
dlbench's own `copy` ceiling case, the best of three (so a ratio says nothing of the
ceiling, only of the bytes and the rate), or given with --ceiling-gbps.

Prints each engine's dlbench MBU, hand MBU and their ratio (best of the rounds on each
side, interleaved), and the two factors apart: bytes (dlbench / hand) and decode rate.

Run: python bench/decode_mbu_check.py [--rounds 2] [--workload llm-135m] [--only torch ...]
"""

from __future__ import annotations

import json

from interleave import interleaved_rounds
from llm_fidelity import HAND, hand

from dlbench.launch.runner import run_case
from dlbench.reference.decoder import checkpoint_folder
from dlbench.results.ceilings import ceilings_from_results
from dlbench.results.decode_bound import decode_bound
from dlbench.results.env import Ceilings, Fingerprint
from dlbench.results.records import Result, Run
from dlbench.spec.case import Case, Settings, available_cpus

FP32 = 4  # bytes a value: the checkpoint, its KV cache and every engine here run fp32


def measured_ceiling(threads: int, rounds: int) -> Ceilings:
    """This machine's memory ceiling as `dlbench roofline` measures it (its copy case),
    the best of `rounds` (other work on the machine only ever lowers it)."""
    case = Case("copy", "torch", "eager", device="cpu", threads=threads,
                options=(("ceiling", "sustained"),))  # fmt: skip
    results = [run_case(case, Settings(min_time_s=1.0, min_iters=10, warmup_iters=3))
               for _ in range(rounds)]  # fmt: skip
    failed = [r.error for r in results if not r.ok]
    if failed:
        raise SystemExit(f"the copy ceiling failed: {failed[0]}")
    return ceilings_from_results(results, "bench")


def hand_bytes_per_step(workload: str, isl: int, osl: int) -> float:
    """One decode step's bytes, from the checkpoint's own tensors and config."""
    from safetensors import safe_open

    folder = checkpoint_folder(workload, 0)
    config = json.loads((folder / "config.json").read_text())
    weights = 0
    with safe_open(str(folder / "model.safetensors"), "np") as tensors:
        for name in tensors.keys():  # noqa: SIM118 (safe_open has no iterator)
            shape = tensors.get_slice(name).get_shape()
            count = 1
            for size in shape:
                count *= size
            if "embed_tokens" in name:
                count = shape[1]  # a step looks up its one token's row
            weights += count
    layers, kv_heads = config["num_hidden_layers"], config["num_key_value_heads"]
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    # token k (2..osl) attends to isl + k - 1 positions: keys and values of each
    context = sum(isl + k - 1 for k in range(2, osl + 1)) / (osl - 1)
    cache = 2 * layers * kv_heads * head_dim * context
    return (weights + cache) * FP32


def ours(framework: str, args: object, run: Run) -> tuple[float, float]:
    """dlbench's MBU of the case and the bytes per step it counted."""
    compile_mode = "eager" if framework == "torch" else "default"
    case = Case(args.workload, framework, compile_mode, device="cpu", batch_size=1,
                threads=args.threads, params=(("isl", args.isl), ("osl", args.osl)))  # fmt: skip
    result: Result = run_case(case, Settings(min_time_s=0.0, min_iters=args.samples,
                                             warmup_iters=1))  # fmt: skip
    if not result.ok:
        raise SystemExit(f"dlbench case {framework} failed: {result.error}")
    bound = decode_bound(result, run)
    assert bound is not None and bound.mbu is not None
    return bound.mbu, bound.bytes_per_step


def check(framework: str, args: object, run: Run, gbps: float, step_bytes: float) -> float:
    ours_runs, hand_runs = interleaved_rounds(
        args.rounds, lambda: ours(framework, args, run), lambda: hand(framework, args)
    )
    our_mbu, our_bytes = max(ours_runs)
    rate = max(r["decode_tps"] for r in hand_runs)
    hand_mbu = step_bytes * rate / (gbps * 1e9)
    ratio = our_mbu / hand_mbu
    print(f"{args.workload} isl={args.isl} osl={args.osl} {framework:18s}: MBU dlbench "
          f"{our_mbu:.4f}, hand {hand_mbu:.4f} -> ratio {ratio:.3f} (bytes a step dlbench / "
          f"hand {our_bytes / step_bytes:.4f}; the rest is the decode rate: hand "
          f"{rate:.1f} tok/s)", flush=True)  # fmt: skip
    return ratio


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=available_cpus())
    parser.add_argument("--workload", default="llm-135m")
    parser.add_argument("--isl", type=int, default=128)
    parser.add_argument("--osl", type=int, default=32)
    parser.add_argument("--samples", type=int, default=5, help="timed generations a side")
    parser.add_argument("--ceiling-gbps", type=float, help="the memory ceiling, not measured")
    parser.add_argument("--only", nargs="*", help="engines to run (default: all)")
    args = parser.parse_args()
    if args.ceiling_gbps:
        ceilings = Ceilings(source_run="given", values={"cpu|memory": args.ceiling_gbps})
    else:
        ceilings = measured_ceiling(args.threads, rounds=3)
    gbps = float(ceilings.values["cpu|memory"])
    print(f"memory ceiling: {gbps:.1f} GB/s ({ceilings.source_run})", flush=True)
    run = Run(id="bench", started_at="", suite="bench", settings=Settings(),
              env=Fingerprint(ceilings=ceilings))  # fmt: skip
    step_bytes = hand_bytes_per_step(args.workload, args.isl, args.osl)
    ratios = [check(framework, args, run, gbps, step_bytes) for framework in HAND
              if not args.only or framework in args.only]  # fmt: skip
    print(f"ratios dlbench / hand: {', '.join(f'{r:.3f}' for r in ratios)}")


if __name__ == "__main__":
    main()
