"""Keras definitions of the ported workloads, with the reference weights.

Weights arrive in PyTorch layout and are transposed here. TensorFlow's CPU
convolutions need channels-last, so the MNIST net takes NHWC input and its
first dense layer's rows are permuted from torch's (c, h, w) flatten order
to Keras's (h, w, c): the function computed is exactly the reference's.
"""

from __future__ import annotations

from collections.abc import Mapping

import keras
import numpy as np

from dlbench.workloads.mlp import LAYER_SIZES

FC1_CHANNELS, FC1_SIDE = 64, 12


def mlp(weights: Mapping[str, np.ndarray]) -> keras.Model:
    layers = [keras.Input((LAYER_SIZES[0],))]
    last = len(LAYER_SIZES) - 2
    for index, width in enumerate(LAYER_SIZES[1:]):
        layers.append(keras.layers.Dense(width, activation="sigmoid" if index == last else "relu"))
    model = keras.Sequential(layers)
    for index, layer in enumerate(model.layers):
        layer.set_weights([weights[f"fc{index}.weight"].T, weights[f"fc{index}.bias"]])
    return model


def mnist_cnn(weights: Mapping[str, np.ndarray]) -> keras.Model:
    conv1 = keras.layers.Conv2D(32, 3, activation="relu")
    conv2 = keras.layers.Conv2D(64, 3, activation="relu")
    fc1 = keras.layers.Dense(128, activation="relu")
    fc2 = keras.layers.Dense(10, activation="log_softmax")
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            conv1,
            conv2,
            keras.layers.MaxPooling2D(2),
            keras.layers.Dropout(0.25),
            keras.layers.Flatten(),
            fc1,
            keras.layers.Dropout(0.5),
            fc2,
        ]
    )
    conv1.set_weights([weights["conv1.weight"].transpose(2, 3, 1, 0), weights["conv1.bias"]])
    conv2.set_weights([weights["conv2.weight"].transpose(2, 3, 1, 0), weights["conv2.bias"]])
    fc1_kernel = (
        weights["fc1.weight"]
        .reshape(128, FC1_CHANNELS, FC1_SIDE, FC1_SIDE)
        .transpose(2, 3, 1, 0)
        .reshape(FC1_CHANNELS * FC1_SIDE * FC1_SIDE, 128)
    )
    fc1.set_weights([fc1_kernel, weights["fc1.bias"]])
    fc2.set_weights([weights["fc2.weight"].T, weights["fc2.bias"]])
    return model


BUILDERS = {"mlp": mlp, "mnist-cnn": mnist_cnn}


def to_framework_layout(workload: str, x: np.ndarray) -> np.ndarray:
    """Inputs in the layout the Keras model takes (NHWC images)."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if workload == "mnist-cnn" else x
