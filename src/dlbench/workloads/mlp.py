"""`mlp`: the 200-128-64-32-16-8-1 binary classifier of the CPU inference study."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from dlbench.workloads.base import WeightDict, Workload, linear_init, training_flops

LAYER_SIZES = (200, 128, 64, 32, 16, 8, 1)


class MlpWorkload(Workload):
    name = "mlp"
    description = "MLP 200-128-64-32-16-8-1, ReLU, sigmoid output (BCE loss in training)"
    cpu_batch_size = 1000
    gpu_batch_size = 1000
    loss = "bce"
    optimizer = "sgd"
    learning_rate = 0.01
    int8_agreement = "threshold"  # a probability: the class is output > 0.5
    parameter_count = 36_737

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        # float32 features, and a float32 label in training
        return 4.0 * LAYER_SIZES[0] + (4.0 if mode == "train" else 0.0)

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        forward = sum(2.0 * a * b for a, b in itertools.pairwise(LAYER_SIZES))
        return training_flops(forward, mode)

    def reference_weights(self, params: Mapping[str, int], seed: int) -> WeightDict:
        import numpy as np

        rng = np.random.default_rng(seed)
        weights: WeightDict = {}
        for index, (fan_in, fan_out) in enumerate(itertools.pairwise(LAYER_SIZES)):
            weights[f"fc{index}.weight"] = linear_init(rng, fan_in, (fan_out, fan_in))
            weights[f"fc{index}.bias"] = linear_init(rng, fan_in, (fan_out,))
        return weights

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        import numpy as np

        rng = np.random.default_rng(seed + 1)
        inputs = {"x": rng.standard_normal((batch_size, LAYER_SIZES[0]), dtype=np.float32)}
        if mode == "train":
            inputs["target"] = rng.integers(0, 2, size=(batch_size, 1)).astype(np.float32)
        return inputs


MLP = MlpWorkload()
