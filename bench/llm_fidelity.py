"""Does dlbench report each LLM engine's TTFT and decode rate as the engine really runs?

For each engine, the same converted model, prompt, lengths and threads are measured
by dlbench (a case in its worker) and by a plain script against the engine's API,
each in a fresh process, interleaved over rounds. The hand script measures the way
optimum-benchmark does, with no per-token clock at all: TTFT is a whole generation
of one token, and the decode rate is (osl - 1) over a whole generation of `osl`
tokens minus that. Where the engine keeps its own counters (openvino-genai's
perf_metrics, llama.cpp's perf context), they are printed beside both.

Ratios: dlbench's TTFT over the hand TTFT, and the hand decode rate over
dlbench's (so above 1 means dlbench reports it slower). Best of the rounds on each
side, as bench/fidelity.py. Target: every ratio <= 1.05.

Run: python bench/llm_fidelity.py [--rounds 3] [--workload llm-135m] [--only torch ...]
"""

from __future__ import annotations

import json
import subprocess
import sys

from interleave import bench_parser, interleaved_rounds, thread_env

from dlbench.launch.runner import run_case
from dlbench.spec.case import Case, Settings

PRELUDE = r"""
import json, statistics, sys, time
workload = sys.argv[1]
isl, osl, threads, rounds = (int(a) for a in sys.argv[2:6])
from dlbench.workloads import get_workload
ids = get_workload(workload).make_inputs(1, {"isl": isl, "osl": osl}, "infer", 0)["input_ids"]

def measure(generate, own=lambda: {}):
    generate(osl); generate(osl)  # compile, allocate, warm
    firsts, wholes = [], []
    for _ in range(rounds):
        t0 = time.perf_counter(); generate(1); firsts.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); generate(osl); wholes.append(time.perf_counter() - t0)
    ttft, whole = statistics.median(firsts), statistics.median(wholes)
    print(json.dumps({"ttft_ms": ttft * 1000, "decode_tps": (osl - 1) / (whole - ttft), **own()}))
"""

HAND = {
    "torch": r"""
import torch
torch.set_num_threads(threads)
from transformers import LlamaForCausalLM
from dlbench.reference.decoder import checkpoint_folder
model = LlamaForCausalLM.from_pretrained(checkpoint_folder(workload, 0), dtype=torch.float32).eval()
x = torch.from_numpy(ids)
def generate(n):
    with torch.inference_mode():
        model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, cache_implementation="static", disable_compile=True)
measure(generate)
""",
    "onnxruntime-genai": r"""
import onnxruntime_genai as og
config = og.Config(sys.argv[6])
config.overlay(json.dumps({"model": {"decoder": {"session_options": {
    "intra_op_num_threads": threads, "inter_op_num_threads": 1}}}}))
model = og.Model(config)
def generate(n):
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, batch_size=1, max_length=isl + n, min_length=isl + n)
    generator = og.Generator(model, params)
    generator.append_tokens(ids.astype("int32"))
    while not generator.is_done():
        generator.generate_next_token()
measure(generate)
""",
    "openvino-genai": r"""
import numpy as np, openvino as ov, openvino_genai as g
scheduler = g.SchedulerConfig(); scheduler.enable_prefix_caching = False
pipe = g.LLMPipeline(sys.argv[6], "CPU", scheduler_config=scheduler, INFERENCE_NUM_THREADS=threads,
                     INFERENCE_PRECISION_HINT="f32", KV_CACHE_PRECISION="f32")
inputs = g.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
last = {}
def generate(n):
    config = g.GenerationConfig(max_new_tokens=n, min_new_tokens=n, ignore_eos=True,
                                do_sample=False)
    result = pipe.generate(inputs, config)
    if n == osl:
        m = result.perf_metrics
        last.update(own_ttft_ms=m.get_ttft().mean, own_decode_tps=1000.0 / m.get_tpot().mean)
measure(generate, lambda: last)
""",
    "llama-cpp": r"""
import llama_cpp
from dlbench.backends.llama_cpp.gguf_export import GGUF_FILE
llm = llama_cpp.Llama(sys.argv[6] + "/" + GGUF_FILE, n_ctx=isl + osl, n_threads=threads,
                      n_threads_batch=threads, type_k=llama_cpp.GGML_TYPE_F32,
                      type_v=llama_cpp.GGML_TYPE_F32, verbose=False)
prompt = [int(t) for t in ids[0]]
last = {}
def generate(n):
    llm.reset()
    llama_cpp.llama_perf_context_reset(llm.ctx)
    for count, _ in enumerate(llm.generate(prompt, temp=0.0, top_k=1, repeat_penalty=1.0), 1):
        if count == n:
            break
    if n == osl:  # llama.cpp's timings: the prompt's evaluation, then each further token's
        p = llama_cpp.llama_perf_context(llm.ctx)
        last.update(own_ttft_ms=p.t_p_eval_ms, own_decode_tps=1000.0 * p.n_eval / p.t_eval_ms)
measure(generate, lambda: last)
""",
}
CONVERTED = {"onnxruntime-genai": "onnxruntime_genai", "openvino-genai": "openvino_genai",
             "llama-cpp": "llama_cpp"}  # fmt: skip


def engine_folder(framework: str, workload: str) -> list[str]:
    """The engine's converted model, made through dlbench's own cache (a case runs first)."""
    if framework not in CONVERTED:
        return []
    import importlib

    backend = importlib.import_module(f"dlbench.backends.{CONVERTED[framework]}.backend")
    from dlbench.reference.decoder import converted

    return [str(converted(framework, workload, 0, backend.EXPORT, backend.CONVERTER)[0])]


def hand(framework: str, args: object) -> dict[str, float]:
    argv = [args.workload, str(args.isl), str(args.osl), str(args.threads), str(args.samples)]
    argv += engine_folder(framework, args.workload)
    done = subprocess.run([sys.executable, "-c", PRELUDE + HAND[framework], *argv],
                          capture_output=True, text=True, env=thread_env(args.threads))  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"hand script for {framework} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours(framework: str, args: object) -> dict[str, float]:
    compile_mode = "eager" if framework == "torch" else "default"
    case = Case(args.workload, framework, compile_mode, device="cpu", batch_size=1,
                threads=args.threads, params=(("isl", args.isl), ("osl", args.osl)))  # fmt: skip
    result = run_case(case, Settings(min_time_s=0.0, min_iters=args.samples, warmup_iters=1))
    if not result.ok:
        raise SystemExit(f"dlbench case {framework} failed: {result.error}")
    generation = result.details.generation
    return {"ttft_ms": generation.ttft_p50_ms, "decode_tps": generation.decode_tokens_per_s}


def compare(framework: str, args: object) -> float:
    ours_runs, hand_runs = interleaved_rounds(
        args.rounds, lambda: ours(framework, args), lambda: hand(framework, args)
    )
    ttft = min(r["ttft_ms"] for r in ours_runs) / min(r["ttft_ms"] for r in hand_runs)
    decode = max(r["decode_tps"] for r in hand_runs) / max(r["decode_tps"] for r in ours_runs)
    own = [r for r in hand_runs if "own_ttft_ms" in r]
    counters = ""
    if own:
        counters = (f"; the engine's own counters: TTFT {min(r['own_ttft_ms'] for r in own):.1f}"
                    f" ms, decode {max(r['own_decode_tps'] for r in own):.1f} tok/s")  # fmt: skip
    print(
        f"{args.workload} isl={args.isl} osl={args.osl} {framework:18s} t={args.threads}: "
        f"TTFT dlbench {min(r['ttft_ms'] for r in ours_runs):.1f} ms, hand "
        f"{min(r['ttft_ms'] for r in hand_runs):.1f} ms -> ratio {ttft:.3f}; decode dlbench "
        f"{max(r['decode_tps'] for r in ours_runs):.1f} tok/s, hand "
        f"{max(r['decode_tps'] for r in hand_runs):.1f} tok/s -> ratio {decode:.3f}{counters}",
        flush=True,
    )
    return max(ttft, decode)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.set_defaults(rounds=3)
    parser.add_argument("--workload", default="llm-135m")
    parser.add_argument("--isl", type=int, default=128)
    parser.add_argument("--osl", type=int, default=32)
    parser.add_argument("--samples", type=int, default=5, help="timed generations a side")
    parser.add_argument("--only", nargs="*", help="engines to run (default: all)")
    args = parser.parse_args()
    worst = max(compare(framework, args) for framework in HAND
                if not args.only or framework in args.only)  # fmt: skip
    verdict = "OK" if worst <= 1.05 else "ABOVE"
    print(f"worst best-of ratio: {worst:.3f} (target <= 1.05: {verdict})")


if __name__ == "__main__":
    main()
