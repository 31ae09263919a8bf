"""Which kernel reaches the most device-memory bandwidth, and what a burst GEMM does after.

    python bench/gpu_memory_kernels.py [--gib 1.0] [--gemm-seconds 12]

The roofline's copy ceiling (2,872 GB/s on an H100) sat below what `add`
reached (2,922): this times, back to back over windows of CUDA events (no
synchronise per kernel), kernels of different read:write mixes on tensors far
beyond L2 and prints the GB/s of each, counting every byte read and written:
torch's copy_ (a cudaMemcpy for contiguous tensors of one type), an
elementwise copy (x * 1), add (2 reads, 1 write), and a sum (reads only).
Then bf16 GEMMs back to back for --gemm-seconds, printing the rate, SM clock,
power (NVML's instant and averaged readings) and clock-event reasons about
every 0.25 s. Needs a CUDA GPU, torch and nvidia-ml-py.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

import pynvml
import torch

POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT (mW)


def windows(op: Callable[[], object], per_window: int, count: int) -> list[float]:
    """Seconds of each of `count` windows of `per_window` calls, queued back to back."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(count + 1)]
    events[0].record()
    for index in range(count):
        for _ in range(per_window):
            op()
        events[index + 1].record()
    events[-1].synchronize()
    return [a.elapsed_time(b) / 1000.0 for a, b in itertools.pairwise(events)]


def memory(gib: float) -> None:
    n = int(gib * 2**30 / 4)
    x, z = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    total = torch.empty((), device="cuda")
    kernels: dict[str, tuple[Callable[[], object], float]] = {
        "copy_ (memcpy)": (lambda: y.copy_(x), 2.0),
        "x * 1 (elementwise copy)": (lambda: torch.mul(x, 1.0, out=y), 2.0),
        "add (2R 1W)": (lambda: torch.add(x, z, out=y), 3.0),
        "sum (reads only)": (lambda: torch.sum(x, dim=0, out=total), 1.0),
    }
    for name, (op, tensors) in kernels.items():
        for _ in range(3):
            op()
        torch.cuda.synchronize()
        rates = [tensors * 4 * n * 10 / s / 1e9 for s in windows(op, 10, 20)]
        print(f"{name:26s} median {statistics.median(rates):7.0f} GB/s  max {max(rates):7.0f}")
    # add as the step loop timed it: one synchronise per kernel, host clock
    side = 12288
    a, b = torch.randn(side, side, device="cuda"), torch.randn(side, side, device="cuda")
    out = torch.empty_like(a)
    samples = []
    for _ in range(50):
        began = time.perf_counter()
        torch.add(a, b, out=out)
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - began)
    rate = 3 * 4 * side * side / statistics.mean(samples) / 1e9
    print(f"add 12288^2, synchronised per step (the step loop): {rate:.0f} GB/s")


def gemm(seconds: float, handle: object) -> None:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b, out = torch.randn_like(a), torch.empty_like(a)
    flops = 2.0 * n**3 * 10
    for _ in range(3):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    time.sleep(2.0)  # let the clock and power settle after the warm-up
    print(f"idle before: {reading(handle)}")
    began, elapsed, shown, rows = time.perf_counter(), 0.0, -1.0, []
    queue: list[torch.cuda.Event] = [torch.cuda.Event(enable_timing=True)]
    queue[0].record()

    def launch() -> None:
        for _ in range(10):
            torch.matmul(a, b, out=out)
        done = torch.cuda.Event(enable_timing=True)
        done.record()
        queue.append(done)

    launch()
    launch()
    while elapsed < seconds:
        start, end = queue[0], queue[1]
        end.synchronize()
        window_s = start.elapsed_time(end) / 1000.0
        queue.pop(0)
        launch()
        elapsed += window_s
        rows.append((elapsed, flops / window_s / 1e12))
        if elapsed - shown >= 0.25 or len(rows) <= 12:
            shown = elapsed
            print(f"{elapsed:6.3f} s {rows[-1][1]:6.0f} TFLOP/s  {reading(handle)}")
    queue[-1].synchronize()
    burst = [rate for t, rate in rows if t <= 0.15]
    late = [rate for t, rate in rows if t > min(10.0, seconds - 1.0)]
    print(f"host wall {time.perf_counter() - began:.2f} s for {elapsed:.2f} s of device windows")
    print(f"burst (<=0.15 s) median {statistics.median(burst):.0f}, sustained median "
          f"{statistics.median(late):.0f} TFLOP/s")  # fmt: skip


def reading(handle: object) -> str:
    clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
    average = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
    (field,) = pynvml.nvmlDeviceGetFieldValues(handle, [POWER_INSTANT])
    instant = field.value.uiVal / 1000.0 if field.nvmlReturn == 0 else float("nan")
    reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    temperature = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    return (
        f"SM {clock} MHz  power instant {instant:.0f} W avg {average:.0f} W  "
        f"{temperature} C  reasons {reasons:#x}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--gemm-seconds", type=float, default=12.0)
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, torch {torch.__version__}, L2 {props.L2_cache_size / 2**20:.0f} MiB")
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{props.uuid}")
    print(f"NVML by UUID: {pynvml.nvmlDeviceGetName(handle)}; {reading(handle)}")
    memory(args.gib)
    gemm(args.gemm_seconds, handle)
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
