"""JAX's device memory: what a measured step holds, and what its allocator peaked at.

XLA takes 75% of a GPU's memory when its client starts (XLA_PYTHON_CLIENT_PREALLOCATE),
so the device's used memory (NVML's per-process figure in the timeline) would
read 75% whatever the model: the backend turns preallocation off before JAX
starts its client, and records it, so the allocator grows to what the work needs.

The allocator's own peak (`memory_stats()["peak_bytes_in_use"]`) counts from the
client's start, compilation and autotuning included, and XLA has no call that
resets it, so it cannot be the measured steps' peak; it is kept, named for what
it is. The measured steps' own figure is exact without a reading: XLA assigns
every buffer of a jitted step when it compiles it, and its CompiledMemoryStats
give the peak of that assignment (arguments, outputs and temporaries live at
once), which is what each step holds on the device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # jax is imported after PREALLOCATE is set (backends.jax.backend)
    import jax

PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"
MIB = 1024 * 1024


def step_memory(jitted: jax.stages.Wrapped, *args: object) -> dict[str, float]:
    """The device memory one call of `jitted` on `args` holds, as XLA assigned it
    when it compiled the call (read after measurement: the compiled call is cached,
    so this lowers and compiles nothing new)."""
    stats = jitted.lower(*args).compile().memory_analysis()
    if stats is None:  # a backend that does not report its buffer assignment
        return {}
    peak = getattr(stats, "peak_memory_in_bytes", None) or (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )
    return {
        "xla_step_peak_mb": peak / MIB,
        "xla_step_temp_mb": stats.temp_size_in_bytes / MIB,
    }


def allocator_peak(device: jax.Device) -> dict[str, float]:
    """The allocator's peak since the client started (a GPU's; the CPU client keeps
    no statistics): compilation and autotuning included, which is why its name says so."""
    stats = device.memory_stats()
    if not stats or "peak_bytes_in_use" not in stats:
        return {}
    return {"xla_allocator_peak_since_start_mb": stats["peak_bytes_in_use"] / MIB}
