"""A user ONNX file's inputs as OpenVINO reads them."""

from __future__ import annotations

from typing import Any

from dlbench.workloads.user_model import InputSpec

OV_TYPES = {"f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64", "i32": "int32",
            "i8": "int8", "u8": "uint8", "boolean": "bool"}  # fmt: skip


def ov_signature(model: Any) -> list[InputSpec]:
    specs = []
    for port in model.inputs:
        shape = port.get_partial_shape()
        dims = None if shape.rank.is_dynamic else tuple(
            d.get_length() if d.is_static else None for d in shape)  # fmt: skip
        dtype = OV_TYPES.get(port.get_element_type().get_type_name(), "float32")
        specs.append(InputSpec(port.get_any_name(), dims, dtype))
    return specs
