"""ResNet-50 v1.5 and MobileNet-V2: architecture tables, FLOPs, and inputs.

The torch modules (dlbench.backends.torch.vision) are built from these same
tables, so the FLOP count and the network cannot drift apart. FLOPs count
convolutions and the classifier (multiply-add = 2), the usual convention.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from dlbench.workloads.base import WeightDict, Workload, training_flops

CLASSES = 1000
# ResNet-50 stages: (blocks, bottleneck width, output channels, first stride)
RESNET50_STAGES = ((3, 64, 256, 1), (4, 128, 512, 2), (6, 256, 1024, 2), (3, 512, 2048, 2))
# MobileNet-V2 inverted residual groups: (expansion t, channels c, repeats n, stride s)
MOBILENET_V2_GROUPS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
MOBILENET_V2_STEM, MOBILENET_V2_HEAD = 32, 1280


def conv_macs(side: int, c_in: int, c_out: int, kernel: int, groups: int = 1) -> float:
    return float(side * side * c_out * (c_in // groups) * kernel * kernel)


def out_side(side: int, stride: int) -> int:
    return (side + stride - 1) // stride  # "same"-style padding as the models use


def resnet50_macs(image: int) -> float:
    side = out_side(image, 2)
    macs = conv_macs(side, 3, 64, 7)
    side = out_side(side, 2)  # max-pool
    c_in = 64
    for blocks, width, c_out, stride in RESNET50_STAGES:
        for block in range(blocks):
            s = stride if block == 0 else 1
            macs += conv_macs(side, c_in, width, 1)
            new_side = out_side(side, s)  # v1.5: the stride sits on the 3x3 convolution
            macs += conv_macs(new_side, width, width, 3) + conv_macs(new_side, width, c_out, 1)
            if block == 0:
                macs += conv_macs(new_side, c_in, c_out, 1)  # projection shortcut
            side, c_in = new_side, c_out
    return macs + 2048 * CLASSES


def mobilenet_v2_macs(image: int) -> float:
    side = out_side(image, 2)
    macs = conv_macs(side, 3, MOBILENET_V2_STEM, 3)
    c_in = MOBILENET_V2_STEM
    for t, c, n, s in MOBILENET_V2_GROUPS:
        for index in range(n):
            hidden = c_in * t
            if t != 1:
                macs += conv_macs(side, c_in, hidden, 1)
            side = out_side(side, s if index == 0 else 1)
            macs += conv_macs(side, hidden, hidden, 3, groups=hidden)
            macs += conv_macs(side, hidden, c, 1)
            c_in = c
    macs += conv_macs(side, c_in, MOBILENET_V2_HEAD, 1)
    return macs + MOBILENET_V2_HEAD * CLASSES


class VisionWorkload(Workload):
    """An ImageNet-shaped classifier: NCHW float32 images, 1000 classes."""

    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"image": 224})
    gpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({"image": 224})
    cpu_batch_size = 16
    gpu_batch_size = 256
    loss = "cross-entropy"
    optimizer = "sgd"
    learning_rate = 0.1

    def macs(self, image: int) -> float:
        raise NotImplementedError

    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        return training_flops(2.0 * self.macs(params["image"]), mode)

    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        # a float32 NCHW image, and an int64 class in training
        return 4.0 * 3 * params["image"] ** 2 + (8.0 if mode == "train" else 0.0)

    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        import numpy as np

        rng = np.random.default_rng(seed + 1)
        side = params["image"]
        inputs = {"x": rng.standard_normal((batch_size, 3, side, side), dtype=np.float32)}
        if mode == "train":
            inputs["target"] = rng.integers(0, CLASSES, size=(batch_size,)).astype(np.int64)
        return inputs


class ResNet50(VisionWorkload):
    name = "resnet50"
    description = "ResNet-50 v1.5 (25.6M params), ImageNet-shaped synthetic images"
    parameter_count = 25_557_032

    def macs(self, image: int) -> float:
        return resnet50_macs(image)


class MobileNetV2(VisionWorkload):
    name = "mobilenet-v2"
    description = "MobileNet-V2 (3.5M params), ImageNet-shaped synthetic images"
    parameter_count = 3_504_872
    cpu_batch_size = 32

    def macs(self, image: int) -> float:
        return mobilenet_v2_macs(image)


RESNET50 = ResNet50()
MOBILENET_V2 = MobileNetV2()
