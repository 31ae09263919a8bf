"""`copy` and `h2d`: the memory-bandwidth ceilings, device memory and host-to-device.

`copy` is STREAM's copy (read one tensor, write another, both preallocated).
As the memory ceiling (`dlbench roofline`) it is not alone: the memory's mix of
reads and writes changes what it delivers, and on an H100 copy reached 3,010
GB/s, `add` (two reads to a write) 3,045 and a sum (reads only) 3,056, each
timed over windows of calls with every byte read and written counted. So the
ceiling case runs the MEMORY_KERNELS in turn and keeps the best, and no
elementwise workload can beat its ceiling. `h2d`
copies a pinned host tensor to the device, the ceiling of any input transfer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from dlbench.workloads.base import WeightDict, Workload

if TYPE_CHECKING:
    import numpy as np

FLOAT32_BYTES = 4


@dataclass(frozen=True)
class MemoryKernel:
    """A kernel of the memory ceiling: tensors of the copy's shape it reads and writes."""

    name: str
    reads: int
    writes: int

    def bytes_per_sample(self, params: Mapping[str, int], value_bytes: int) -> float:
        return (self.reads + self.writes) * value_bytes * params["size"] ** 2


# The case's own copy first; then add's 2:1 mix and a sum's reads alone (its one
# written value is no traffic)
MEMORY_KERNELS = (
    MemoryKernel("copy", reads=1, writes=1),
    MemoryKernel("add", reads=2, writes=1),
    MemoryKernel("sum", reads=1, writes=0),
)


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
        import numpy as np

        rng = np.random.default_rng(seed)
        shape = (batch_size, params["size"], params["size"])
        return {"x": rng.standard_normal(shape, dtype=np.float32)}


class CopyWorkload(_BandwidthKernel):
    name = "copy"
    description = "copy a float32 NxN tensor into another on the device (memory bandwidth ceiling)"

    def bytes_per_sample(self, params: Mapping[str, int], mode: str, value_bytes: int) -> float:
        return MEMORY_KERNELS[0].bytes_per_sample(params, value_bytes)  # read + write


class HostToDeviceWorkload(_BandwidthKernel):
    name = "h2d"
    description = "copy a pinned float32 NxN host tensor to the GPU (transfer bandwidth ceiling)"

    def bytes_per_sample(self, params: Mapping[str, int], mode: str, value_bytes: int) -> float:
        return 1.0 * value_bytes * params["size"] ** 2  # crosses the bus once


COPY, H2D = CopyWorkload(), HostToDeviceWorkload()
