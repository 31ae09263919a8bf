"""JAX (pure function) definitions of the ported workloads.

JAX's convolution takes PyTorch's NCHW/OIHW layout directly, so the
reference weights are used as they are and the flatten order matches.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

Params = dict[str, jax.Array]  # the reference weights, on the device


def _dense(params: Params, name: str, x: jax.Array) -> jax.Array:
    return x @ params[f"{name}.weight"].T + params[f"{name}.bias"]


def mlp(params: Params, x: jax.Array) -> jax.Array:
    for index in range(5):
        x = jax.nn.relu(_dense(params, f"fc{index}", x))
    return jax.nn.sigmoid(_dense(params, "fc5", x))


def _conv(params: Params, name: str, x: jax.Array) -> jax.Array:
    y = lax.conv_general_dilated(
        x,
        params[f"{name}.weight"],
        window_strides=(1, 1),
        padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
    )
    return y + params[f"{name}.bias"][None, :, None, None]


def mnist_cnn(params: Params, x: jax.Array) -> jax.Array:
    x = jax.nn.relu(_conv(params, "conv1", x))
    x = jax.nn.relu(_conv(params, "conv2", x))
    x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    x = x.reshape(x.shape[0], -1)  # dropout is the identity at inference
    x = jax.nn.relu(_dense(params, "fc1", x))
    return jax.nn.log_softmax(_dense(params, "fc2", x), axis=1)


FORWARDS: dict[str, Callable[[Params, jax.Array], jax.Array]] = {"mlp": mlp, "mnist-cnn": mnist_cnn}
