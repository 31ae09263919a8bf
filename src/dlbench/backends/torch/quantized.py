"""torch's int8 models in the worker: the cached PT2E program, or torchao's dynamic int8.

int8: the program backends/torch/quantize.py built (in a process of its own,
cached) is loaded and compiled by Inductor with freezing on, which folds the
int8 weights and fuses each quantize/dequantize pair with its convolution or
linear into a oneDNN int8 kernel; without Inductor the pairs would run as
fp32 arithmetic around reference kernels, which is not an int8 number.
int8-dynamic: torchao's Int8DynamicActivationInt8WeightConfig on the
reference model's Linear layers, made here (no calibration; the seconds it
takes are reported, and there is nothing to cache but the weights).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import torch

from dlbench.backends.base import Job, quantized
from dlbench.errors import CaseError
from dlbench.results.details import Quantization


def quantized_model(
    job: Job, device: torch.device
) -> tuple[Callable[..., torch.Tensor], Quantization]:
    """The callable int8 model of the case, and what made it."""
    if device.type != "cpu":
        raise CaseError(f"torch {job.case.precision} is quantized for the CPU, not {device}")
    if job.case.precision == "int8":
        return _pt2e(job)
    return _dynamic(job)


def _pt2e(job: Job) -> tuple[Callable[..., torch.Tensor], Quantization]:
    import torch._inductor.config as inductor
    import torchao.quantization.pt2e  # noqa: F401  # registers the q/dq ops the program calls

    path, meta = quantized(job)
    program = torch.export.load(str(path)).module()
    meta = replace(meta, tool={**meta.tool, "input_check_removed": _drop_input_check(program)})
    inductor.freezing = True  # int8 weights folded as constants: oneDNN's int8 kernels
    return torch.compile(program), meta


INPUT_CHECK = "_check_input_constraints_pre_hook"


def _drop_input_check(program: torch.nn.Module) -> bool:
    """Remove torch.export's per-call input check from the loaded program.

    The module an exported program unlifts to checks every call's inputs
    against the exported shapes in a Python pre-hook, outside the compiled
    region: 40 µs a call on mnist-cnn here, 19% of its int8 step, which a
    PT2E loop that compiles the converted module never pays. The case feeds
    exactly the exported shapes. True if the hook was found and removed.
    """
    hooks = program._forward_pre_hooks
    found = [key for key, hook in hooks.items() if getattr(hook, "__name__", "") == INPUT_CHECK]
    for key in found:
        del hooks[key]
    return bool(found)


def _dynamic(job: Job) -> tuple[Callable[..., torch.Tensor], Quantization]:
    import torchao
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    from dlbench.backends.torch.models import reference_module

    module = reference_module(job.workload.name, job.params, job.seed).eval()
    started = time.perf_counter()
    quantize_(module, Int8DynamicActivationInt8WeightConfig())
    seconds = time.perf_counter() - started
    model = torch.compile(module) if job.case.compile == "compile" else module
    meta = Quantization(
        method="torchao quantize_ with Int8DynamicActivationInt8WeightConfig (Linear layers)",
        seconds=round(seconds, 3),
        cached=False,
        tool={"torchao": torchao.__version__},
    )
    return model, meta
