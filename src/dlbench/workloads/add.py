"""`add`: the elementwise float32 add of the first seed article, done right.

The article timed allocation and a host-to-device copy together with the add;
here the inputs and the output are allocated once, outside the clock, and the
timed step is only `z = x + y` into the preallocated output, so the number is
memory bandwidth (GB/s), which is what an elementwise add can measure.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from dlbench.workloads.base import WeightDict, Workload

if TYPE_CHECKING:
    import numpy as np

FLOAT32_BYTES = 4


class AddWorkload(Workload):
    name = "add"
    description = "elementwise add of two float32 NxN tensors (memory bandwidth, GB/s)"
    modes = ("infer",)
    primary_metric = "gbps"
    is_kernel = True
    # 12288x12288 is the article's size; on a CPU a 4096x4096 tensor (64 MiB)
    # is still far beyond the caches, so it measures DRAM bandwidth, in a
    # fraction of the time and memory.
    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"size": 4096})
    gpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"size": 12288})

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return float(params["size"] ** 2)

    def bytes_per_sample(self, params: Mapping[str, int], mode: str, value_bytes: int) -> float:
        # read x, read y, write z
        return 3.0 * value_bytes * params["size"] ** 2

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 2.0 * FLOAT32_BYTES * params["size"] ** 2  # x and y

    def kernel_check(self, inputs: WeightDict, output: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(0, 64)  # a slice is enough to catch a skipped or wrong kernel
        return inputs["x"][0, rows] + inputs["y"][0, rows], output[0, rows]

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        import numpy as np

        rng = np.random.default_rng(seed)
        shape = (batch_size, params["size"], params["size"])
        return {
            "x": rng.standard_normal(shape, dtype=np.float32),
            "y": rng.standard_normal(shape, dtype=np.float32),
        }


ADD = AddWorkload()
