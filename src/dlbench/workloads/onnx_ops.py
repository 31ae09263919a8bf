"""Which operators an ONNX file's graph uses, read from its protobuf without `onnx`.

A user's ONNX file may already be quantized (by ONNX Runtime's quantizer,
NNCF, or a QDQ exporter): its int8 steps round activations, and two runtimes
may round them differently, so its outputs are held to int8's rule across
frameworks, not fp32's tolerance (worker.check). Whether it is quantized is
read from its operators.

The walk reads each node's bytes and seeks past everything else (the
initializers: the weights), so a large file costs little. It covers the
main graph, subgraphs held in node attributes (If, Loop, Scan bodies) and
the model's local functions.
"""

from __future__ import annotations

from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import BinaryIO

from dlbench.workloads.model_format import read_varint

# The operators that hold or compute int8 values: ONNX's own and ONNX Runtime's
# com.microsoft ones that its quantizer writes. Any "QLinear..." op counts too.
QUANTIZED_OPS = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "ConvInteger",
        "MatMulInteger",
        "MatMulIntegerToFloat",
        "DynamicQuantizeMatMul",
        "QGemm",
        "QAttention",
    }
)
QUANTIZED_PREFIX = "QLinear"
# protobuf field numbers (onnx.proto)
MODEL_GRAPH, MODEL_FUNCTIONS = 7, 25
GRAPH_NODE, FUNCTION_NODE = 1, 7
NODE_OP_TYPE, NODE_ATTRIBUTE = 4, 5
ATTRIBUTE_GRAPH, ATTRIBUTE_GRAPHS = 6, 11
LENGTH_DELIMITED = 2


def quantized_ops(path: Path) -> list[str]:
    """The int8 operators the ONNX file's graph uses, sorted ([]: not quantized)."""
    return sorted(op for op in graph_ops(path) if is_quantized_op(op))


def is_quantized_op(op: str) -> bool:
    return op in QUANTIZED_OPS or op.startswith(QUANTIZED_PREFIX)


def graph_ops(path: Path) -> set[str]:
    """Every operator type in the file's graph, its subgraphs and its local functions."""
    ops: set[str] = set()
    with path.open("rb") as file:
        for number, wire, length in _fields(file, path.stat().st_size):
            if wire != LENGTH_DELIMITED:
                continue
            if number == MODEL_GRAPH:
                ops |= _nodes_ops(file, file.tell() + length, GRAPH_NODE)
            elif number == MODEL_FUNCTIONS:
                ops |= _nodes_ops(file, file.tell() + length, FUNCTION_NODE)
    return ops


def _nodes_ops(stream: BinaryIO, end: int, node_field: int) -> set[str]:
    """The op types of a GraphProto's (or FunctionProto's) nodes, reading only the nodes."""
    ops: set[str] = set()
    for number, wire, length in _fields(stream, end):
        if number == node_field and wire == LENGTH_DELIMITED:
            ops |= _node_ops(stream.read(length))
    return ops


def _node_ops(node: bytes) -> set[str]:
    """A NodeProto's op type, and those of the subgraphs in its attributes."""
    ops: set[str] = set()
    stream = BytesIO(node)
    for number, wire, length in _fields(stream, len(node)):
        if wire != LENGTH_DELIMITED:
            continue
        if number == NODE_OP_TYPE:
            ops.add(stream.read(length).decode("utf-8", "replace"))
        elif number == NODE_ATTRIBUTE:
            attribute = stream.read(length)
            inner = BytesIO(attribute)
            for field, kind, size in _fields(inner, len(attribute)):
                if field in (ATTRIBUTE_GRAPH, ATTRIBUTE_GRAPHS) and kind == LENGTH_DELIMITED:
                    ops |= _nodes_ops(inner, inner.tell() + size, GRAPH_NODE)
    return ops


def _fields(stream: BinaryIO, end: int) -> Iterator[tuple[int, int, int]]:
    """(field number, wire type, value or length) of each field up to `end`.

    A length-delimited field's bytes start at the stream's position when it is
    yielded; the walk goes on from their end whatever the caller read of them.
    It stops at the first thing that is not a field (a file cut short, a group).
    """
    while stream.tell() < end:
        tag = read_varint(stream)
        if tag is None:
            return
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value = read_varint(stream)
            if value is None:
                return
            yield number, wire, value
        elif wire == LENGTH_DELIMITED:
            length = read_varint(stream)
            if length is None or stream.tell() + length > end:
                return
            start = stream.tell()
            yield number, wire, length
            stream.seek(start + length)
        elif wire in (1, 5):  # fixed 64 and 32 bits
            stream.seek(8 if wire == 1 else 4, 1)
        else:
            return
