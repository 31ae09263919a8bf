"""`mnist-train`: time to train the mnist-cnn network, epoch by epoch.

The first seed article timed PyTorch's and Keras's MNIST examples, which
differ in more than the framework (batch size, epochs, data pipeline,
evaluation inside the timing). Here both frameworks train the same network
from the same initial weights with the same recipe: Adadelta (lr 1.0, rho
0.9, eps 1e-6), the learning rate times 0.7 after each epoch (StepLR), NLL
loss, batch 64, the same data already in memory. Training time and
evaluation time are measured apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from dlbench.workloads.mnist_cnn import MnistCnnWorkload

if TYPE_CHECKING:
    import numpy as np

LR_GAMMA = 0.7  # StepLR(step_size=1, gamma=0.7), as in pytorch/examples
ADADELTA_RHO = 0.9  # torch's default; Keras's is 0.95, so it is set explicitly
ADADELTA_EPS = 1e-6
EVAL_BATCH = 1000
CLASSES = 10
IMAGE_PIXELS = 28 * 28
# Accuracy after the first epoch must reach this (chance is 0.1): a network
# that has not learned that much has a broken training step, whatever its speed.
FIRST_EPOCH_MIN_ACCURACY = 0.3


class MnistTrainWorkload(MnistCnnWorkload):
    name = "mnist-train"
    description = (
        "time to train the mnist-cnn network for N epochs (MNIST IDX files or a "
        "learnable synthetic set), per-epoch time, loss and test accuracy"
    )
    modes = ("train",)
    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType(
        {"epochs": 1, "train_samples": 60_000, "test_samples": 10_000}
    )
    gpu_params = cpu_params
    compile_modes: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType(
        {"torch": ("eager", "compile"), "tensorflow": ("fit", "function", "xla")}
    )

    def memory_bytes(
        self,
        batch_size: int,
        params: Mapping[str, int],
        mode: str,
        value_bytes: int,
        data_files: bool = False,
    ) -> float:
        """The network and a batch, and the synthetic data set: every sample as made
        (uint8 image, int64 label) and normalised to float32 for the trainer. Read
        from --data-dir, the set is the files' (at most their samples are kept)."""
        held = super().memory_bytes(batch_size, params, mode, value_bytes)
        if data_files:
            return held
        samples = params["train_samples"] + params["test_samples"]
        return held + samples * (IMAGE_PIXELS * (1 + 4) + 8)


MNIST_TRAIN = MnistTrainWorkload()


def usable_train_samples(available: int, batch_size: int) -> int:
    """Whole batches only, the same count for every framework.

    A ragged last batch would make torch.compile and tf.function compile a
    second graph for its shape mid-epoch (on one framework and not another).
    """
    return (available // batch_size) * batch_size


def epoch_permutation(samples: int, seed: int, epoch: int) -> np.ndarray:
    """The order of the training samples in an epoch, identical across frameworks."""
    import numpy as np

    return np.random.default_rng((seed, epoch)).permutation(samples).astype(np.int64)
