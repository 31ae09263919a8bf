"""An ONNX file's operators, read without onnx: whether the model is already quantized."""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.workloads.onnx_ops import graph_ops, is_quantized_op, quantized_ops

# builds ONNX files (imports onnx): not in the fast tier (tests/conftest.py)
pytestmark = pytest.mark.integration


def save(path, nodes, functions=(), initializers=()) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], list(initializers),
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    model.ir_version = 8
    onnx.save(model, path)


def test_a_float_graph_is_not_quantized_whatever_its_weights_weigh(tmp_path):
    pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")  # seeked past
    save(tmp_path / "f.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"])], (), [weight])
    assert graph_ops(tmp_path / "f.onnx") == {"MatMul"}
    assert quantized_ops(tmp_path / "f.onnx") == []


def test_int8_operators_are_found_in_the_graph_its_subgraphs_and_its_functions(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    branch = helper.make_graph(
        [helper.make_node("QLinearMatMul", ["a"], ["b"])], "then", [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])],
    )  # fmt: skip
    function = helper.make_function(
        "local", "Scale", ["u"], ["v"], [helper.make_node("ConvInteger", ["u"], ["v"])],
        [helper.make_opsetid("", 17)],
    )  # fmt: skip
    nodes = [
        helper.make_node("If", ["x"], ["c"], then_branch=branch, else_branch=branch),
        helper.make_node("Scale", ["c"], ["y"], domain="local"),
    ]
    save(tmp_path / "q.onnx", nodes, [function])
    assert graph_ops(tmp_path / "q.onnx") == {"If", "Scale", "QLinearMatMul", "ConvInteger"}
    assert quantized_ops(tmp_path / "q.onnx") == ["ConvInteger", "QLinearMatMul"]


def test_which_operators_count_as_int8():
    for op in ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
               "ConvInteger", "QLinearConv", "QLinearAdd", "MatMulIntegerToFloat"):  # fmt: skip
        assert is_quantized_op(op), op
    for op in ("MatMul", "Conv", "Quantize", "Cast"):
        assert not is_quantized_op(op), op
