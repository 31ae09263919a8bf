"""Does dlbench report int8 as fast as a hand-written quantize-and-run loop?

For each framework's int8 path (ONNX Runtime's static QDQ quantization,
OpenVINO with NNCF, torch's PT2E with the X86 Inductor quantizer), the hand
loop quantizes the same fp32 model itself with the framework's own quantizer
(the same method and seeded calibration samples as dlbench's), then times the quantized
model with perf_counter as a careful user would. dlbench times its cached
quantized model of the same case. Each side runs in a fresh process, in
interleaved rounds. Prints the ratio of dlbench's median latency to the hand
loop's, best of the rounds (noise only adds time), and every round.
Target: every ratio <= 1.10.

Run: python bench/int8_fidelity.py [--rounds 5] [--min-time 2] [--workload mnist-cnn]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from fidelity import PRELUDE
from interleave import bench_parser, interleaved_rounds, thread_env

from dlbench.backends.calibration import CALIBRATION_BATCH as ORT_CALIBRATION_BATCH
from dlbench.backends.calibration import CALIBRATION_SAMPLES, CALIBRATION_SEED
from dlbench.launch.runner import run_case
from dlbench.plan.validate import validate_case
from dlbench.spec.case import Case, Settings

# dlbench's own calibration set (backends.calibration, seed 0 + its offset), so the
# hand loops quantize from the same samples and a change there cannot skew the ratio
CALIBRATION = f"""
calibration_samples = {CALIBRATION_SAMPLES}
ort_batch = {ORT_CALIBRATION_BATCH}
calibration = spec.make_inputs(calibration_samples, params, "infer", {CALIBRATION_SEED})
"""

HAND_LOOPS = {
    "onnxruntime": r"""
import onnxruntime as ort, tempfile, os
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process
folder = tempfile.mkdtemp()
quant_pre_process(sys.argv[6], os.path.join(folder, "pre.onnx"))
batches = [{k: v[i:i + ort_batch] for k, v in calibration.items()}
           for i in range(0, calibration_samples, ort_batch)]
class Reader(CalibrationDataReader):
    def __init__(self):
        self.items = iter(batches)
    def get_next(self):
        return next(self.items, None)
quantize_static(os.path.join(folder, "pre.onnx"), os.path.join(folder, "int8.onnx"), Reader(),
                quant_format=QuantFormat.QDQ, per_channel=True,
                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
options = ort.SessionOptions()
options.intra_op_num_threads = options.inter_op_num_threads = threads
session = ort.InferenceSession(os.path.join(folder, "int8.onnx"), options,
                               providers=["CPUExecutionProvider"])
feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
measure(lambda: session.run(None, feeds))
""",
    "openvino": r"""
import nncf, openvino as ov
core = ov.Core()
items = [{k: v[i:i + 1] for k, v in calibration.items()} for i in range(calibration_samples)]
model = nncf.quantize(core.read_model(sys.argv[6]), nncf.Dataset(items),
                      subset_size=calibration_samples)
model.reshape({n: list(a.shape) for n, a in inputs.items()})
compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY",
    "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"})
request = compiled.create_infer_request()
measure(lambda: request.infer(inputs, share_inputs=True))
""",
    "torch": r"""
import torch
torch.set_num_threads(threads); torch.set_num_interop_threads(threads)
import torch._inductor.config as inductor
import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as x86
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from dlbench.backends.torch.models import reference_module
model = reference_module(workload, params, 0).eval()
args = tuple(torch.from_numpy(v) for v in inputs.values())
quantizer = x86.X86InductorQuantizer()
quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
with torch.no_grad():
    prepared = prepare_pt2e(torch.export.export(model, args).module(), quantizer)
    for i in range(0, calibration_samples - batch + 1, batch):
        prepared(*[torch.from_numpy(v[i:i + batch]) for v in calibration.values()])
    converted = convert_pt2e(prepared)
inductor.freezing = True
compiled = torch.compile(converted)
with torch.inference_mode():
    measure(lambda: compiled(*args))
""",
}
COMPILE = {"onnxruntime": "default", "openvino": "default", "torch": "compile"}


def hand_loop_ms(framework: str, workload: str, batch: int, args: argparse.Namespace) -> float:
    from dlbench.reference.builtin import onnx_model
    from dlbench.workloads import get_workload

    params = get_workload(workload).resolve_params("cpu", {})
    model = str(onnx_model(workload, params, 0)[0])
    argv = [workload, str(batch), str(args.threads), str(args.min_time), json.dumps(params), model]
    code = PRELUDE + CALIBRATION + HAND_LOOPS[framework]
    out = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=thread_env(args.threads),
    )
    if out.returncode != 0:
        raise SystemExit(f"hand loop for {framework} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def dlbench_ms(framework: str, workload: str, batch: int, args: argparse.Namespace) -> float:
    case = Case(workload, framework, COMPILE[framework], device="cpu", batch_size=batch,
                threads=args.threads, precision="int8")  # fmt: skip
    settings = Settings(min_time_s=args.min_time, min_iters=20, warmup_iters=5)
    result = run_case(validate_case(case), settings)
    if not result.ok:
        raise SystemExit(f"dlbench int8 case on {framework} failed: {result.error}")
    return result.latency_ms.median


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--workload", default="mnist-cnn")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--only", nargs="*", help="frameworks to run (default: all)")
    args = parser.parse_args()
    worst = 0.0
    for framework in args.only or HAND_LOOPS:
        measure_args = (framework, args.workload, args.batch, args)
        ours, hand = interleaved_rounds(
            args.rounds,
            lambda a=measure_args: dlbench_ms(*a),
            lambda a=measure_args: hand_loop_ms(*a),
        )
        per_round = [o / h for o, h in zip(ours, hand, strict=True)]
        best = min(ours) / min(hand)
        worst = max(worst, best)
        print(
            f"{args.workload} bs={args.batch} int8 {framework:12s} threads={args.threads}: "
            f"dlbench {min(ours):.4f} ms, hand {min(hand):.4f} ms (best of {args.rounds}) -> "
            f"ratio {best:.3f}; per-round {', '.join(f'{r:.3f}' for r in per_round)} "
            f"(median {statistics.median(per_round):.3f})",
            flush=True,
        )
    print(
        f"worst best-of ratio: {worst:.3f} (target <= 1.10: {'OK' if worst <= 1.10 else 'ABOVE'})"
    )


if __name__ == "__main__":
    main()
