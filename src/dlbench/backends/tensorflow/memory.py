"""TensorFlow's GPU memory: the measured steps' peak, from its own allocator.

TensorFlow maps nearly all of a GPU's memory when it starts, unless told to grow
(TF_FORCE_GPU_ALLOW_GROWTH): the device's used memory (NVML's per-process figure
in the timeline) would say nothing of the model's. The backend asks it to grow,
before TensorFlow starts, and records that. Its allocator counts a peak that
`reset_memory_stats` resets: reset as the measured loop starts (the step loop's
`before_measure`), read after it, it is the measured steps' peak, not that of
tracing or XLA's compilation. The CPU keeps no such statistics.
"""

from __future__ import annotations

from collections.abc import Callable

from dlbench.untyped import JSONObject

# TensorFlow is imported inside the functions: the backend sets ALLOW_GROWTH from
# here before it imports TensorFlow.
ALLOW_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"
MIB = 1024 * 1024


def peak_reset(device: str) -> Callable[[], None] | None:
    """For the measured loop's start (Prepared.before_measure): reset the GPU's peak."""
    name = _gpu_name(device)
    return None if name is None else lambda: _reset_peak(name)


def peak_reading(device: str) -> Callable[[], JSONObject] | None:
    """After measurement (Prepared.after_measure): the GPU's peak since the reset."""
    name = _gpu_name(device)
    return None if name is None else lambda: _measured_peak(name)


def _gpu_name(device: str) -> str | None:
    """TensorFlow's name of a case's GPU ("GPU:0" for cuda:0); None for the CPU."""
    return None if device == "cpu" else f"GPU:{device.partition(':')[2] or 0}"


def _reset_peak(name: str) -> None:
    import tensorflow as tf

    tf.config.experimental.reset_memory_stats(name)


def _measured_peak(name: str) -> JSONObject:
    """The most TensorFlow's allocator held on the GPU since the last reset."""
    import tensorflow as tf

    return {"tf_peak_memory_mb": tf.config.experimental.get_memory_info(name)["peak"] / MIB}
