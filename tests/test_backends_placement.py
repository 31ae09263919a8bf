"""Placement over every piece of the work: inputs, variables, outputs, and ONNX
Runtime's nodes as its own profiler reports where each ran."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dlbench.backends.placement import MIXED, placement_of_each, require_outputs_with
from dlbench.errors import CaseError
from dlbench.results.details import Details
from dlbench.worker.placement import placement_error

GPU = "/job:localhost/replica:0/task:0/device:GPU:0"
HOST = "/job:localhost/replica:0/task:0/device:CPU:0"


def tf_like_kind(device: str) -> str:
    return "cuda" if "GPU" in device else "cpu"


def test_one_piece_left_on_the_host_makes_the_placement_mixed_and_names_it():
    placed = {"input x": GPU, "dense/kernel": GPU, "dense/bias": HOST}
    record = placement_of_each("TensorFlow", placed, tf_like_kind)
    assert record.kind == MIXED
    assert record.reported == f"2 on {GPU}; 1 on {HOST}: dense/bias"
    problem = placement_error("cuda:0", Details(placement=record)) or ""
    assert "asked for cuda:0" in problem and "dense/bias" in problem
    assert placement_error("cpu", Details(placement=record))  # wrong for either device


def test_every_piece_on_one_device_is_that_device_counted():
    placed = {f"w{i}": GPU for i in range(5)}
    record = placement_of_each("TensorFlow", placed, tf_like_kind)
    assert (record.kind, record.reported) == ("cuda", f"5 on {GPU}")
    assert placement_error("cuda:0", Details(placement=record)) is None
    assert "ran on cuda" in (placement_error("cpu", Details(placement=record)) or "")


def test_the_pieces_off_the_main_device_are_named_up_to_three_and_counted():
    placed = {"x": HOST, **{f"w{i}": GPU for i in range(9)}, **{f"b{i}": HOST for i in range(4)}}
    reported = placement_of_each("TensorFlow", placed, tf_like_kind).reported
    assert reported == f"9 on {GPU}; 5 on {HOST}: x, b0, b1 and 2 more"


def test_outputs_must_be_where_the_inputs_and_variables_were():
    record = placement_of_each("TensorFlow", {"x": GPU, "w": GPU}, tf_like_kind)
    require_outputs_with(record, {"output 0": GPU}, tf_like_kind)
    with pytest.raises(CaseError, match=r"outputs elsewhere \(1 on .*CPU:0\)"):
        require_outputs_with(record, {"output 0": GPU, "output 1": HOST}, tf_like_kind)


# ONNX Runtime


def shape_subgraph_model(path: Path) -> Path:
    """x[N, 64] @ w -> h; h reshaped to [N / 2, -1] by a shape computed from h at
    run time (Shape -> Gather -> Div -> Unsqueeze -> Concat: tensors of 1 or 2
    elements); the batch is symbolic and halved, so no optimisation folds or fuses
    the shape away."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    weights = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
        helper.make_node("Shape", ["h"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="gather", axis=0),
        helper.make_node("Div", ["batch", "two"], ["half"], name="div"),
        helper.make_node("Unsqueeze", ["half", "axes"], ["batch1"], name="unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["h", "target"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "shape-subgraph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 128])],
        [
            helper.make_tensor("w", TensorProto.FLOAT, [64, 64], weights.ravel()),
            helper.make_tensor("zero", TensorProto.INT64, [], [0]),
            helper.make_tensor("two", TensorProto.INT64, [], [2]),
            helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
            helper.make_tensor("minus_one", TensorProto.INT64, [1], [-1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def ort_session_maker(path: Path):
    ort = pytest.importorskip("onnxruntime")

    def make(change=None):
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if change is not None:
            change(options)
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    return make


@pytest.mark.integration
def test_the_profiler_names_each_node_its_provider_and_its_tensors(tmp_path):
    from dlbench.backends.onnxruntime.placement import probe_placement

    make = ort_session_maker(shape_subgraph_model(tmp_path / "model.onnx"))
    x = np.ones((8, 64), np.float32)
    nodes, feeds = probe_placement(make, lambda session: {"x": x})
    assert feeds["x"] is x
    runs = {n.op: n for n in nodes.nodes}
    assert {"MatMul", "Shape", "Gather", "Div", "Concat", "Reshape", "Relu"} <= set(runs)
    assert {n.provider for n in nodes.nodes} == {"CPUExecutionProvider"}
    assert runs["MatMul"].largest_tensor == 8 * 64  # x and h (the profiler lists no weight)
    assert runs["Gather"].largest_tensor <= 2 and runs["Gather"].shape_computation
    assert not runs["Reshape"].shape_computation  # it moves h: work, wherever it runs
    record = nodes.placement()
    assert record.kind == "cpu" and record.by == "ONNX Runtime nodes"
    work = sum(not n.shape_computation for n in nodes.nodes)
    assert record.reported == f"{work} on CPUExecutionProvider"
    facts = nodes.facts()
    assert facts["nodes_by_provider"] == {"CPUExecutionProvider": len(nodes.nodes)}
    assert facts["cpu_shape_nodes"] == len(nodes.nodes) - work > 0
    assert facts["placement_probe_s"] > 0


@pytest.mark.integration
def test_the_measured_session_is_not_profiled_and_the_probe_leaves_no_file(tmp_path):
    import tempfile

    from dlbench.backends.onnxruntime.placement import probe_placement

    make = ort_session_maker(shape_subgraph_model(tmp_path / "model.onnx"))
    before = set(Path(tempfile.gettempdir()).glob("dlbench-ort-profile-*"))
    probe_placement(make, lambda session: {"x": np.ones((2, 64), np.float32)})
    assert set(Path(tempfile.gettempdir()).glob("dlbench-ort-profile-*")) == before
    measured = make()
    measured.run(None, {"x": np.ones((2, 64), np.float32)})
    assert measured.end_profiling() == ""  # no profiler ran in the measured session


def test_a_node_that_fell_back_to_the_cpu_fails_a_gpu_case_but_shape_nodes_do_not():
    from dlbench.backends.onnxruntime.placement import NodePlacement, NodeRun

    cuda, cpu = "CUDAExecutionProvider", "CPUExecutionProvider"
    shapes = (NodeRun("gather", "Gather", cpu, 2), NodeRun("concat", "Concat", cpu, 4))
    on_gpu = NodePlacement((NodeRun("mm", "MatMul", cuda, 4096), *shapes), probe_s=0.1)
    assert on_gpu.placement().kind == "cuda"  # ONNX Runtime's own shape nodes on the CPU
    fell_back = NodePlacement(
        (*on_gpu.nodes, NodeRun("conv", "QLinearConv", cpu, 50176)), probe_s=0.1
    )
    record = fell_back.placement()
    assert record.kind == MIXED
    problem = placement_error("cuda:0", Details(placement=record)) or ""
    assert "1 on CPUExecutionProvider: conv" in problem
