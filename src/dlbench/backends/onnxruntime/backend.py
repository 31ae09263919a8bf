"""The ONNX Runtime backend: the model exported from the torch reference."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import onnxruntime as ort

from dlbench.backends.base import (
    Backend,
    Job,
    Prepared,
    exported_onnx,
    input_shapes,
    leading_dim,
    load_failure,
    quantized,
    string_inputs,
)
from dlbench.backends.onnxruntime.placement import NodePlacement, probe_placement
from dlbench.backends.onnxruntime.user_model import ort_signature
from dlbench.errors import CaseError
from dlbench.results.details import Details
from dlbench.spec.registry import QUANTIZED_PRECISIONS
from dlbench.untyped import JSONObject
from dlbench.workloads.user_model import model_inputs

if TYPE_CHECKING:
    import numpy as np


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"

    def __init__(self) -> None:
        self._threads = (1, 1)

    def version(self) -> str:
        return ort.__version__

    def configure_threads(self, intra_op: int, inter_op: int) -> JSONObject:
        # Applied to the session's options in prepare(); ORT has no global pool here.
        self._threads = (intra_op, inter_op)
        return {"intra_op": intra_op, "inter_op": inter_op}

    def resolve_device(self, requested: str) -> str:
        has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
        if requested in ("auto", "cpu"):
            return "cuda:0" if requested == "auto" and has_cuda else "cpu"
        if not has_cuda:
            raise CaseError(
                f"device {requested!r} asked for, but this onnxruntime has no CUDA provider "
                f"(available: {', '.join(ort.get_available_providers())}); "
                "install onnxruntime-gpu or use --device cpu"
            )
        return requested if ":" in requested else "cuda:0"

    def prepare(self, job: Job) -> Prepared:
        if job.case.user_model is not None:
            return self._user_model(job)
        path, meta = exported_onnx(job)
        quantization = None
        if job.case.precision in QUANTIZED_PRECISIONS:
            path, quantization = quantized(job)
        arrays = job.inputs()
        nodes, feeds = probe_placement(
            lambda change: self._session(path, job.device, change),
            lambda probe: {spec.name: arrays[spec.name] for spec in probe.get_inputs()},
        )
        session = self._session(path, job.device)
        used = session.get_providers()

        def step() -> list[np.ndarray]:
            return session.run(None, feeds)  # returns NumPy arrays: complete on return

        return Prepared(
            step=step,
            device=job.device,
            details=Details(
                placement=nodes.placement(),
                quantization=quantization,
                extra={
                    "providers": used,
                    **nodes.facts(),
                    "onnx_opset": meta["opset"],
                    "onnx_exporter": meta["exporter"],
                    "graph_optimization": "ORT_ENABLE_ALL",
                },
            ),
            fetch_output=lambda: step()[0],
            infer=lambda inputs: session.run(None, inputs)[0],
        )

    def _user_model(self, job: Job) -> Prepared:
        path, quantization = Path(job.case.given_model.model), None
        if job.case.precision in QUANTIZED_PRECISIONS:
            path, quantization = quantized(job)
        nodes, feeds = self._user_probe(path, job)
        session = self._session(path, job.device)

        def step() -> list[np.ndarray]:
            return session.run(None, feeds)  # every output, as NumPy arrays

        providers = session.get_providers()
        return Prepared(
            step=step,
            device=job.device,
            fetch_output=step,
            batch_size=leading_dim(feeds),
            details=Details(
                placement=nodes.placement(),
                quantization=quantization,
                extra={
                    "providers": providers,
                    **nodes.facts(),
                    "inputs": input_shapes(feeds),
                    **string_inputs(feeds),
                    "outputs": [output.name for output in session.get_outputs()],
                },
            ),
            infer=lambda inputs: session.run(None, inputs),
        )

    def _user_probe(self, path: Path, job: Job) -> tuple[NodePlacement, dict[str, np.ndarray]]:
        """The probe's node placement and the model's feeds; a file ONNX Runtime cannot
        load fails the case with its cause (the probe is the first session made)."""
        try:
            return probe_placement(
                lambda change: self._session(path, job.device, change),
                lambda probe: model_inputs(job.case, ort_signature(probe), job.seed),
            )
        except CaseError:
            raise
        except Exception as exc:
            name = Path(job.case.given_model.model).name
            raise load_failure(f"onnxruntime {ort.__version__} cannot load {name}", exc) from None

    def _session(
        self, path: Path, device: str, change: Callable[[ort.SessionOptions], None] | None = None
    ) -> ort.InferenceSession:
        """A session of the case's options and providers (`change` applied to its options)."""
        options = self._session_options()
        if change is not None:
            change(options)
        return ort.InferenceSession(
            str(path), sess_options=options, providers=self._providers(device)
        )

    def _session_options(self) -> ort.SessionOptions:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = self._threads
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        return options

    def _providers(self, device: str) -> list[str | tuple[str, dict[str, int]]]:
        if device == "cpu":
            return ["CPUExecutionProvider"]
        index = int(device.partition(":")[2] or 0)
        return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
