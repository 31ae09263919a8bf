"""A user ONNX file's inputs as ONNX Runtime reports them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlbench.spec.model_signature import InputSpec
from dlbench.workloads.user_model import STRING, input_dtype

if TYPE_CHECKING:  # ONNX Runtime ships no types
    import onnxruntime as ort

ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
             "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int16)": "int16",
             "tensor(int8)": "int8", "tensor(uint64)": "uint64", "tensor(uint32)": "uint32",
             "tensor(uint16)": "uint16", "tensor(uint8)": "uint8",
             "tensor(bool)": "bool", "tensor(string)": STRING}  # fmt: skip


def ort_signature(session: ort.InferenceSession) -> list[InputSpec]:
    return [
        InputSpec(i.name, tuple(d if isinstance(d, int) and d > 0 else None for d in i.shape),
                  input_dtype(i.name, ORT_TYPES.get(i.type), i.type))
        for i in session.get_inputs()
    ]  # fmt: skip


def describe(path: str, kind: str, trust: bool) -> tuple[list[InputSpec], list[InputSpec]]:
    """(inputs, outputs) as ONNX Runtime reads the file (for `dlbench inspect`)."""
    import onnxruntime as ort

    from dlbench.backends.base import load_failure

    try:
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise load_failure(f"onnxruntime {ort.__version__} cannot load it", exc) from None
    outputs = [
        InputSpec(o.name, tuple(d if isinstance(d, int) and d > 0 else None for d in o.shape)
                  if o.shape is not None else None, ORT_TYPES.get(o.type, o.type))
        for o in session.get_outputs()
    ]  # fmt: skip
    return ort_signature(session), outputs
