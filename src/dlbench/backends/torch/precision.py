"""Numeric precision for torch cases: strict fp32, TF32, autocast (AMP), or a generating
model held whole in bf16 or fp16 (backends.torch.decoder).

Every switch is set explicitly, because torch's defaults are mixed (TF32 is
off for matmuls but on for cuDNN convolutions): an "fp32" number measured
with the defaults is partly TF32 on an Ampere or newer GPU. What was set is
recorded with the result. A precision the device has no hardware for is a
skip, not an emulated (and misleadingly slow) number.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import torch

from dlbench.errors import CaseSkipped
from dlbench.untyped import JSONObject

AUTOCAST_DTYPES = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}
# The half-precision type each precision computes in: autocast's, or (bf16, fp16) that
# of a generating model held whole in it. The hardware it needs is the same.
HALF_DTYPES = {**AUTOCAST_DTYPES, "fp16": torch.float16, "bf16": torch.bfloat16}


def dtype_name(dtype: torch.dtype) -> str:
    """ "bfloat16" for torch.bfloat16: how results name a dtype."""
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class PrecisionPlan:
    """How a step runs at the case's precision."""

    autocast: Callable[[], AbstractContextManager[object]]
    # fp16 gradients underflow without loss scaling; bf16 and fp32 need none
    scaler: torch.amp.GradScaler | None
    details: JSONObject = field(default_factory=dict)


def precision_plan(precision: str, device: torch.device, training: bool) -> PrecisionPlan:
    """Set the global math switches for `precision`; CaseSkipped where impossible."""
    _require_hardware(precision, device)
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    # "highest" also keeps oneDNN from using bf16 for fp32 matmuls on CPU
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    details: JSONObject = {
        "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    dtype = AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        return PrecisionPlan(nullcontext, None, details)
    details["autocast_dtype"] = dtype_name(dtype)
    scaler = None
    if training and dtype is torch.float16:
        scaler = torch.amp.GradScaler(device.type)
        details["grad_scaler"] = True
    return PrecisionPlan(lambda: torch.autocast(device.type, dtype=dtype), scaler, details)


def _require_hardware(precision: str, device: torch.device) -> None:
    if precision == "fp32":
        return
    if device.type == "cuda":
        _require_cuda(precision, device)
    elif device.type == "cpu":
        _require_cpu(precision)
    else:
        raise CaseSkipped(f"precision {precision} is not measured on {device.type} devices")


def _require_cuda(precision: str, device: torch.device) -> None:
    major, minor = torch.cuda.get_device_capability(device)
    name = torch.cuda.get_device_name(device)
    if precision == "tf32" and major < 8:
        raise CaseSkipped(
            f"tf32 needs an Ampere or newer GPU (compute capability 8.0+); "
            f"{name} is {major}.{minor}"
        )
    # is_bf16_supported() also says yes where bf16 is emulated (pre-Ampere), and
    # asks about the current device, not this one: the capability is the answer
    if HALF_DTYPES.get(precision) is torch.bfloat16 and major < 8:
        raise CaseSkipped(
            f"{precision} needs bf16 tensor cores (compute capability 8.0+); {name} is "
            f"{major}.{minor}, where bf16 would be emulated"
        )


def _require_cpu(precision: str) -> None:
    if precision == "tf32":
        raise CaseSkipped("tf32 is a CUDA tensor-core format; CPUs have no TF32 mode")
    # oneDNN's own "bf16 supported" is true on any AVX-512 CPU (it emulates);
    # native bf16 means the AVX512-BF16 or AMX instructions
    cpu = torch.cpu
    native_bf16 = cpu._is_avx512_bf16_supported() or cpu._is_amx_tile_supported()
    half = HALF_DTYPES.get(precision)
    if half is torch.bfloat16 and not native_bf16:
        raise CaseSkipped(
            f"{precision} on this CPU would be emulated: it has no native bf16 "
            "(needs AVX512-BF16 or AMX); an emulated number would mislead"
        )
    # oneDNN reports fp16 only where it is native (AVX512-FP16 or AMX-FP16)
    if half is torch.float16 and not torch.ops.mkldnn._is_mkldnn_fp16_supported():
        raise CaseSkipped(
            f"{precision} on this CPU would be emulated: it has no native fp16 "
            "arithmetic (needs AVX512-FP16 or AMX-FP16); an emulated number would mislead"
        )
