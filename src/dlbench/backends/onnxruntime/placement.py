"""Where ONNX Runtime ran each node of a model, read from its own profiler.

ONNX Runtime splits a graph between the providers it was given: a node the CUDA
provider has no kernel for runs on the CPU provider, and the session's provider
list (`get_providers()`) still starts with CUDA. What names each node's provider
is the session profiler: every node it ran is a "Node" event whose `provider`
says which provider ran it, with the shapes of what it read and wrote. One
profiled run of a probe session (its own, made before the measured one and
dropped, so the measured session's first call stays its first and no timed step
is profiled) gives the node placement the worker checks.

ONNX Runtime also moves small shape computations (Shape -> Gather -> Concat ->
Reshape's shape input) to the CPU on purpose (fallback_cpu_capability.cc); those
read and write only tensors of at most SMALL_TENSOR_ELEMENTS, its own bound for
a "small" tensor, and are counted apart: any larger tensor on the CPU provider
is work that fell back, and fails a GPU case.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.placement import placement_of_each
from dlbench.results.details import Placement
from dlbench.untyped import JSONObject

if TYPE_CHECKING:  # ONNX Runtime ships no types
    import numpy as np
    import onnxruntime as ort

CPU_PROVIDER = "CPUExecutionProvider"
# ONNX Runtime's kSmallInitializerThreshold: the size it treats as a shape-like tensor
SMALL_TENSOR_ELEMENTS = 100
BY = "ONNX Runtime nodes"


@dataclass(frozen=True)
class NodeRun:
    """One node as the profiler saw it run."""

    name: str
    op: str
    provider: str
    largest_tensor: int  # elements of the largest tensor it read or wrote

    @property
    def shape_computation(self) -> bool:
        """A small node ONNX Runtime keeps on the CPU on purpose, not fallen-back work."""
        return self.provider == CPU_PROVIDER and self.largest_tensor <= SMALL_TENSOR_ELEMENTS


@dataclass(frozen=True)
class NodePlacement:
    """What the probe found: each node that ran, and how long the probe took."""

    nodes: tuple[NodeRun, ...]
    probe_s: float

    def placement(self) -> Placement:
        """The nodes that did the work, by provider (shape computations left out
        where anything else ran)."""
        work = [n for n in self.nodes if not n.shape_computation] or list(self.nodes)
        return placement_of_each(BY, {n.name: n.provider for n in work}, provider_kind)

    def facts(self) -> JSONObject:
        """For the details' extra: nodes per provider, and the CPU shape nodes among them."""
        return {
            "nodes_by_provider": dict(Counter(n.provider for n in self.nodes)),
            "cpu_shape_nodes": sum(n.shape_computation for n in self.nodes),
            "placement_probe_s": round(self.probe_s, 6),
        }


def provider_kind(provider: str) -> str:
    """The device kind an execution provider runs on."""
    return "cuda" if provider.startswith(("CUDA", "Tensorrt")) else "cpu"


def probe_placement(
    make_session: Callable[[Callable[[ort.SessionOptions], None]], ort.InferenceSession],
    feeds_for: Callable[[ort.InferenceSession], dict[str, np.ndarray]],
) -> tuple[NodePlacement, dict[str, np.ndarray]]:
    """Run a profiled probe session once; (where its nodes ran, the feeds it used).

    `make_session(options_change)` builds a session like the measured one, applying
    `options_change` to its SessionOptions; `feeds_for(session)` makes its inputs.
    """
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dlbench-ort-profile-") as folder:

        def profiled(options: ort.SessionOptions) -> None:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(folder) / "probe")

        session = make_session(profiled)
        feeds = feeds_for(session)
        session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
        del session  # its memory (on a GPU, a second copy of the weights) goes now
    return NodePlacement(node_runs(events), time.perf_counter() - started), feeds


def node_runs(events: list[JSONObject]) -> tuple[NodeRun, ...]:
    """Each node's run in a profile's events (its kernel-time event)."""
    return tuple(
        NodeRun(
            name=event["name"].removesuffix("_kernel_time"),
            op=str(event["args"].get("op_name", "")),
            provider=str(event["args"]["provider"]),
            largest_tensor=_largest(event["args"]),
        )
        for event in events
        if event.get("cat") == "Node"
        and event.get("name", "").endswith("_kernel_time")
        and "provider" in event.get("args", {})
    )


def _largest(args: JSONObject) -> int:
    """Elements of the largest tensor among a node event's inputs and outputs (each
    recorded as {dtype: shape})."""
    shapes = [
        shape
        for key in ("input_type_shape", "output_type_shape")
        for typed in args.get(key, [])
        for shape in typed.values()
    ]
    return max((math.prod(shape) for shape in shapes), default=0)
