"""`copy` and `h2d`: the memory-bandwidth ceilings, device memory and host-to-device.

`copy` is STREAM's copy (read one tensor, write another, both preallocated):
the most bandwidth an elementwise kernel such as `add` can hope for, so
`add` reports its GB/s as a fraction of it. `h2d` copies a pinned host
tensor to the device, the ceiling of any input transfer.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from dlbench.workloads.base import WeightDict, Workload

FLOAT32_BYTES = 4


class _BandwidthKernel(Workload):
    modes = ("infer",)
    primary_metric = "gbps"
    is_kernel = True
    # 256 MiB on a CPU (far past every cache); 1 GiB on a GPU
    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"size": 8192})
    gpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"size": 16384})

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 0.0  # no arithmetic: only bytes moved

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return 1.0 * FLOAT32_BYTES * params["size"] ** 2  # x

    def kernel_check(self, inputs: WeightDict, output: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(0, 64)
        return inputs["x"][0, rows], output[0, rows]

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        rng = np.random.default_rng(seed)
        shape = (batch_size, params["size"], params["size"])
        return {"x": rng.standard_normal(shape, dtype=np.float32)}


class CopyWorkload(_BandwidthKernel):
    name = "copy"
    description = "copy a float32 NxN tensor into another on the device (memory bandwidth ceiling)"

    def bytes_per_sample(self, params: Mapping[str, int], mode: str, value_bytes: int) -> float:
        return 2.0 * value_bytes * params["size"] ** 2  # read + write


class HostToDeviceWorkload(_BandwidthKernel):
    name = "h2d"
    description = "copy a pinned float32 NxN host tensor to the GPU (transfer bandwidth ceiling)"

    def bytes_per_sample(self, params: Mapping[str, int], mode: str, value_bytes: int) -> float:
        return 1.0 * value_bytes * params["size"] ** 2  # crosses the bus once


COPY, H2D = CopyWorkload(), HostToDeviceWorkload()
