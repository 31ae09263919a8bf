"""What hiding the incidental libraries saves a worker: import CPU and memory.

A worker hides the other frameworks and the libraries frameworks import only
because they are installed (backends.framework_guard.INCIDENTAL_LIBRARIES:
scikit-learn, pandas, matplotlib, IPython; and, from a case that does not
quantize, the framework's quantizer package: torchao for torch). This imports
each framework in fresh processes under the worker's guard, with those libraries
hidden and, on the other side, visible, in interleaved rounds, and prints the
medians of the import's CPU seconds and the process's peak RSS, and their ratios.

A quantizer's process (ONNX Runtime's, OpenVINO's NNCF) hides the other frameworks
too: their quantization tools import torch wherever it is installed. --quantizers
compares what they import under that guard with no guard at all.

Run: python bench/incidental_imports.py [--rounds 6] [--framework tensorflow=tensorflow]
     python bench/incidental_imports.py --quantizers
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys

from interleave import interleaved_rounds

# framework name (the registry's) = modules its worker imports
DEFAULT_IMPORTS = {
    "tensorflow": "tensorflow",
    # modeling_utils: what a BERT or decoder case imports, and where torchao comes in
    "torch": "transformers,transformers.generation.candidate_generator,transformers.modeling_utils",
}
# what a quantizer process imports (backends/*/quantize.py: the pre-processing's tools)
QUANTIZER_IMPORTS = {
    "onnxruntime": "onnxruntime.quantization,onnxruntime.tools.symbolic_shape_infer",
    "openvino": "openvino,nncf",
}
CHILD = r"""
import importlib, json, resource, sys, time
from dlbench.backends import framework_guard
framework, modules, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "quantizer":  # a quantizer process's guard
    framework_guard.block_other_frameworks(framework, quantizes=True)
elif mode != "unguarded":
    framework_guard.block_other_frameworks(framework, hide_incidental=mode == "hide")
before = resource.getrusage(resource.RUSAGE_SELF)
for module in modules.split(","):
    importlib.import_module(module)
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
print(json.dumps({"cpu_s": cpu, "rss_mb": after.ru_maxrss / 1024}))
"""


def measure(framework: str, modules: str, mode: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, framework, modules, mode],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(framework: str, modules: str, rounds: int, quantizer: bool = False) -> str:
    """One framework's line: import CPU and peak RSS, hidden against visible (a
    quantizer's: its guard against none)."""
    modes = {True: "quantizer", False: "unguarded"} if quantizer else {True: "hide", False: "show"}
    rss: dict[bool, list[float]] = {True: [], False: []}

    def side(hide: bool) -> float:
        reading = measure(framework, modules, modes[hide])
        rss[hide].append(reading["rss_mb"])
        return reading["cpu_s"]

    hidden, shown = interleaved_rounds(
        rounds, functools.partial(side, True), functools.partial(side, False)
    )
    cpu_h, cpu_s = statistics.median(hidden), statistics.median(shown)
    rss_h, rss_s = statistics.median(rss[True]), statistics.median(rss[False])
    return (
        f"{framework} ({modules}): import CPU {cpu_h:.2f} s hidden, {cpu_s:.2f} s visible "
        f"({cpu_h / cpu_s:.2f}x); peak RSS {rss_h:.0f} MB against {rss_s:.0f} MB "
        f"({rss_h / rss_s:.2f}x); median of {rounds}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--framework", action="append", default=None, metavar="NAME=MODULES")
    parser.add_argument(
        "--quantizers", action="store_true", help="quantizer processes: guarded against not"
    )
    args = parser.parse_args()
    imports = QUANTIZER_IMPORTS if args.quantizers else DEFAULT_IMPORTS
    if args.framework:
        imports = dict(item.split("=", 1) for item in args.framework)
    for framework, modules in imports.items():
        print(compare(framework, modules, args.rounds, quantizer=args.quantizers))


if __name__ == "__main__":
    main()
