"""`gemm`: a batch of square float32 matrix products (compute bound, TFLOP/s)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from dlbench.workloads.base import WeightDict, Workload

if TYPE_CHECKING:
    import numpy as np


class GemmWorkload(Workload):
    name = "gemm"
    description = "square float32 matrix multiply C = A @ B, NxN (compute, TFLOP/s)"
    modes = ("infer",)
    is_kernel = True
    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"size": 1024})
    gpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"size": 8192})
    # Eight products per step on a GPU: the per-step synchronise cost 4.3% of a
    # single 8192^3 bf16 product (1.4 ms) on an H100 (bench/gpu_gemm_clocks.py),
    # which the ceiling would carry into every efficiency; over eight, ~0.5%.
    gpu_batch_size = 8

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        n = params["size"]
        return 2.0 * n**3

    def bytes_per_sample(self, params: Mapping[str, int], mode: str, value_bytes: int) -> float:
        # A and B read once, C written once: the minimum traffic.
        return 3.0 * value_bytes * params["size"] ** 2

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 2.0 * 4 * params["size"] ** 2  # A and B, float32

    def kernel_check(self, inputs: WeightDict, output: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(0, 16)  # 16 full rows of C: every column and the whole reduction
        return inputs["a"][0, rows] @ inputs["b"][0], output[0, rows]

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        import numpy as np

        rng = np.random.default_rng(seed)
        shape = (batch_size, params["size"], params["size"])
        return {
            "a": rng.standard_normal(shape, dtype=np.float32),
            "b": rng.standard_normal(shape, dtype=np.float32),
        }


GEMM = GemmWorkload()
