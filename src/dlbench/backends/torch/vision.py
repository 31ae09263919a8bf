"""ResNet-50 v1.5 and MobileNet-V2 in PyTorch, built from the workload tables.

Defined here because there is no CPU build of torchvision. Initialisation
follows torchvision's (Kaiming-normal convolutions, unit BatchNorm), under
the case's seed, so every run and every export sees the same weights.
"""

from __future__ import annotations

import torch
from torch import nn

from dlbench.workloads.vision import (
    CLASSES,
    MOBILENET_V2_GROUPS,
    MOBILENET_V2_HEAD,
    MOBILENET_V2_STEM,
    RESNET50_STAGES,
)


def conv_bn(
    c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1
) -> list[nn.Module]:
    return [
        nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out),
    ]


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: the stride is on the 3x3 convolution."""

    def __init__(self, c_in: int, width: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            *conv_bn(c_in, width, 1),
            nn.ReLU(inplace=True),
            *conv_bn(width, width, 3, stride),
            nn.ReLU(inplace=True),
            *conv_bn(width, c_out, 1),
        )
        self.shortcut = (
            nn.Sequential(*conv_bn(c_in, c_out, 1, stride))
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            *conv_bn(3, 64, 7, 2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        ]
        c_in = 64
        for blocks, width, c_out, stride in RESNET50_STAGES:
            for block in range(blocks):
                layers.append(Bottleneck(c_in, width, c_out, stride if block == 0 else 1))
                c_in = c_out
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c_in, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = c_in * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers += [*conv_bn(c_in, hidden, 1), nn.ReLU6(inplace=True)]
        layers += [
            *conv_bn(hidden, hidden, 3, stride, groups=hidden),
            nn.ReLU6(inplace=True),
            *conv_bn(hidden, c_out, 1),
        ]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [*conv_bn(3, MOBILENET_V2_STEM, 3, 2), nn.ReLU6(inplace=True)]
        c_in = MOBILENET_V2_STEM
        for t, c, n, s in MOBILENET_V2_GROUPS:
            for index in range(n):
                layers.append(InvertedResidual(c_in, c, s if index == 0 else 1, t))
                c_in = c
        layers += [*conv_bn(c_in, MOBILENET_V2_HEAD, 1), nn.ReLU6(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(MOBILENET_V2_HEAD, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def init_like_torchvision(module: nn.Module) -> nn.Module:
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(layer, nn.BatchNorm2d):
            nn.init.ones_(layer.weight)
            nn.init.zeros_(layer.bias)
        elif isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight, 0, 0.01)
            nn.init.zeros_(layer.bias)
    return module


def calibrate_batchnorm(module: nn.Module, image: int, seed: int) -> nn.Module:
    """Set BatchNorm running statistics from one seeded batch of random images.

    Freshly initialised running statistics (mean 0, var 1) let activations
    decay through the network: MobileNet-V2's logits came out near 1e-9, so
    every framework "matched" the reference trivially. Calibrated, outputs
    are of order 1 and the output check means something.
    """
    batchnorms = [m for m in module.modules() if isinstance(m, nn.BatchNorm2d)]
    for layer in batchnorms:
        layer.reset_running_stats()
        layer.momentum = None  # cumulative average: one batch sets the statistics
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(CALIBRATION_BATCH, 3, image, image, generator=generator)
    module.train()
    with torch.no_grad():
        module(images)
    for layer in batchnorms:
        layer.momentum = 0.1  # back to the default for training
    return module.eval()


CALIBRATION_BATCH = 8
VISION_MODELS = {"resnet50": ResNet50, "mobilenet-v2": MobileNetV2}
