"""PyTorch definitions of the built-in workloads, loaded with reference weights."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as functional
from torch import nn

from dlbench.workloads.mlp import LAYER_SIZES


class Mlp(nn.Module):
    """200-128-64-32-16-8-1, ReLU between layers, sigmoid output.

    Layers are named fc0..fc5 like the reference weights, and forward is
    written out so TorchScript can compile it.
    """

    def __init__(self) -> None:
        super().__init__()
        sizes = LAYER_SIZES
        self.fc0 = nn.Linear(sizes[0], sizes[1])
        self.fc1 = nn.Linear(sizes[1], sizes[2])
        self.fc2 = nn.Linear(sizes[2], sizes[3])
        self.fc3 = nn.Linear(sizes[3], sizes[4])
        self.fc4 = nn.Linear(sizes[4], sizes[5])
        self.fc5 = nn.Linear(sizes[5], sizes[6])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc0(x))
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = torch.relu(self.fc3(x))
        x = torch.relu(self.fc4(x))
        return torch.sigmoid(self.fc5(x))


class MnistCnn(nn.Module):
    """The pytorch/examples MNIST network, layer for layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = functional.relu(self.conv1(x))
        x = functional.relu(self.conv2(x))
        x = functional.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = functional.relu(self.fc1(x))
        x = self.dropout2(x)
        return functional.log_softmax(self.fc2(x), dim=1)


def _state(weights: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {key: torch.from_numpy(value) for key, value in weights.items()}


def build_module(workload: str, weights: Mapping[str, np.ndarray]) -> nn.Module:
    """The workload's network with the reference weights loaded (strictly)."""
    modules: dict[str, type[nn.Module]] = {"mlp": Mlp, "mnist-cnn": MnistCnn}
    module = modules[workload]()
    module.load_state_dict(_state(weights), strict=True)
    return module


def add_kernel(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return torch.add(x, y, out=out)


def gemm_kernel(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a, b, out=out)


def copy_kernel(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return out.copy_(x)


# name -> (kernel, number of inputs); the output is the kernel's last argument
KERNELS: dict[str, Callable[..., torch.Tensor]] = {
    "add": add_kernel,
    "gemm": gemm_kernel,
    "copy": copy_kernel,
    "h2d": copy_kernel,
}


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the masked positions only (labels -100 elsewhere), as BERT trains."""
    return functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


# name -> loss(output, target)
LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "bce": functional.binary_cross_entropy,
    "nll": functional.nll_loss,
    "cross-entropy": functional.cross_entropy,
    "mlm": masked_lm_loss,
}
OPTIMIZERS = {
    "sgd": torch.optim.SGD,
    "adadelta": torch.optim.Adadelta,
    "adamw": torch.optim.AdamW,
}


def training_module(workload: str, params: Mapping[str, int], seed: int) -> nn.Module:
    """The network a training case updates: encoders get their masked-LM head."""
    from dlbench.backends.torch.text import masked_lm
    from dlbench.workloads.bert import SHAPES

    if workload in SHAPES:
        torch.manual_seed(seed)
        return masked_lm(workload)
    return reference_module(workload, params, seed)


def reference_module(workload: str, params: Mapping[str, int], seed: int) -> nn.Module:
    """The reference model of a workload (CPU, fp32) with its seeded weights.

    The small models load the workload's NumPy weights (shared with the
    TensorFlow and JAX ports); the large ones take torch's initialiser under
    the seed, and reach other frameworks through the ONNX export.
    """
    from dlbench.backends.torch.text import encoder
    from dlbench.backends.torch.vision import (
        VISION_MODELS,
        calibrate_batchnorm,
        init_like_torchvision,
    )
    from dlbench.workloads import get_workload
    from dlbench.workloads.bert import SHAPES

    if workload in VISION_MODELS:
        torch.manual_seed(seed)
        model = init_like_torchvision(VISION_MODELS[workload]())
        return calibrate_batchnorm(model, params["image"], seed)
    if workload in SHAPES:
        torch.manual_seed(seed)
        return encoder(workload)
    return build_module(workload, get_workload(workload).reference_weights(params, seed))
