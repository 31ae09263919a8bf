"""A user ONNX file's inputs as OpenVINO reads them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlbench.spec.model_signature import InputSpec
from dlbench.workloads.user_model import STRING, input_dtype

if TYPE_CHECKING:  # OpenVINO ships no types
    import openvino as ov

OV_TYPES = {"f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64", "i32": "int32",
            "i16": "int16", "i8": "int8", "u64": "uint64", "u32": "uint32", "u16": "uint16",
            "u8": "uint8", "boolean": "bool", "string": STRING}  # fmt: skip


def ov_signature(model: ov.Model | ov.CompiledModel, ports: str = "inputs") -> list[InputSpec]:
    specs = []
    for index, port in enumerate(getattr(model, ports)):
        shape = port.get_partial_shape()
        dims = None if shape.rank.is_dynamic else tuple(
            d.get_length() if d.is_static else None for d in shape)  # fmt: skip
        names = port.get_names()  # a port may have none; get_any_name() would raise
        name = sorted(names)[0] if names else f"{ports}[{index}]"
        kind = port.get_element_type().get_type_name()
        # an output of a type dlbench cannot feed is still described, by its own name
        dtype = input_dtype(name, OV_TYPES.get(kind), kind) if ports == "inputs" else (
            OV_TYPES.get(kind, kind))  # fmt: skip
        specs.append(InputSpec(name, dims, dtype))
    return specs


def describe(path: str, kind: str, trust: bool) -> tuple[list[InputSpec], list[InputSpec]]:
    """(inputs, outputs) as OpenVINO reads the file (for `dlbench inspect`)."""
    import openvino as ov

    from dlbench.backends.base import load_failure

    try:
        model = ov.Core().read_model(path)
    except Exception as exc:
        raise load_failure(f"openvino {ov.__version__} cannot read it", exc) from None
    return ov_signature(model), ov_signature(model, "outputs")
