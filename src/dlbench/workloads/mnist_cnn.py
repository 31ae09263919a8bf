"""`mnist-cnn`: the pytorch/examples MNIST network (1,199,882 parameters).

conv 1->32 3x3, ReLU, conv 32->64 3x3, ReLU, max-pool 2, dropout 0.25,
flatten, fc 9216->128, ReLU, dropout 0.5, fc 128->10, log-softmax; trained
with NLL loss and Adadelta (lr 1.0) as in the example.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from dlbench.workloads.base import WeightDict, Workload, linear_init, training_flops

PARAMETER_COUNT = 1_199_882
IMAGE = (1, 28, 28)
CLASSES = 10


def _conv_flops(out_hw: int, out_channels: int, in_channels: int, kernel: int) -> float:
    return 2.0 * out_hw * out_hw * out_channels * in_channels * kernel * kernel


class MnistCnnWorkload(Workload):
    name = "mnist-cnn"
    description = "pytorch/examples MNIST CNN (conv32, conv64, fc128, fc10; 1,199,882 params)"
    cpu_batch_size = 64
    gpu_batch_size = 64
    loss = "nll"
    optimizer = "adadelta"
    learning_rate = 1.0
    parameter_count = PARAMETER_COUNT

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        # a float32 image, and an int64 label in training
        return 4.0 * math.prod(IMAGE) + (8.0 if mode == "train" else 0.0)

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        forward = (
            _conv_flops(26, 32, 1, 3)
            + _conv_flops(24, 64, 32, 3)
            + 2.0 * 9216 * 128
            + 2.0 * 128 * CLASSES
        )
        return training_flops(forward, mode)

    def reference_weights(self, params: Mapping[str, int], seed: int) -> WeightDict:
        import numpy as np

        rng = np.random.default_rng(seed)
        return {
            "conv1.weight": linear_init(rng, 1 * 9, (32, 1, 3, 3)),
            "conv1.bias": linear_init(rng, 1 * 9, (32,)),
            "conv2.weight": linear_init(rng, 32 * 9, (64, 32, 3, 3)),
            "conv2.bias": linear_init(rng, 32 * 9, (64,)),
            "fc1.weight": linear_init(rng, 9216, (128, 9216)),
            "fc1.bias": linear_init(rng, 9216, (128,)),
            "fc2.weight": linear_init(rng, 128, (CLASSES, 128)),
            "fc2.bias": linear_init(rng, 128, (CLASSES,)),
        }

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        import numpy as np

        rng = np.random.default_rng(seed + 1)
        # MNIST-normalised pixel statistics (mean 0.1307, std 0.3081 undone).
        images = rng.random((batch_size, *IMAGE), dtype=np.float32)
        inputs = {"x": ((images - 0.1307) / 0.3081).astype(np.float32)}
        if mode == "train":
            inputs["target"] = rng.integers(0, CLASSES, size=(batch_size,)).astype(np.int64)
        return inputs


MNIST_CNN = MnistCnnWorkload()
