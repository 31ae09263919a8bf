"""Why a sustained GEMM ceiling sits below a burst figure: rate, SM clock and power over time.

    python bench/gpu_gemm_clocks.py [--size 8192] [--seconds 4]

Runs bf16 GEMMs back to back on cuda:0 and prints, per window of ten
products, the event-timed TFLOP/s beside NVML's SM clock, board power and
clock-event reasons. Then the same products with a synchronise after each
(what dlbench's step does), interleaved with unsynchronised windows, so the
cost of the per-step synchronise is a ratio measured side by side. Needs a
CUDA GPU, torch and nvidia-ml-py.
"""

from __future__ import annotations

import argparse
import statistics
import time

import pynvml
import torch

from dlbench.measure.gpu_telemetry import throttle_names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    n = args.size
    flops = 2.0 * n**3
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b, out = torch.randn_like(a), torch.empty_like(a)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def window(sync_each: bool, count: int = 10) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if sync_each:
            began = time.perf_counter()
            for _ in range(count):
                torch.matmul(a, b, out=out)
                torch.cuda.synchronize()
            return count * flops / (time.perf_counter() - began) / 1e12
        start.record()
        for _ in range(count):
            torch.matmul(a, b, out=out)
        end.record()
        end.synchronize()
        return count * flops / (start.elapsed_time(end) / 1000.0) / 1e12

    for _ in range(3):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    print(f"bf16 GEMM {n}x{n}x{n} on {torch.cuda.get_device_name(0)}")
    print(f"{'t s':>6} {'TFLOP/s':>8} {'SM MHz':>7} {'W':>6}  reasons")
    rows = []
    began = time.perf_counter()
    while time.perf_counter() - began < args.seconds:
        rate = window(False)
        clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        reasons = throttle_names(pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle))
        elapsed = time.perf_counter() - began
        rows.append((elapsed, rate, clock))
        print(f"{elapsed:6.2f} {rate:8.1f} {clock:7d} {power:6.0f}  {','.join(reasons) or '-'}")
    burst = rows[0][1]
    sustained = statistics.median(r for t, r, _ in rows if t > 1.0)
    print(f"burst (first window) {burst:.0f} TFLOP/s; sustained (after 1 s) {sustained:.0f}")

    # per-step synchronise vs none, interleaved rounds
    synced, free = [], []
    for _ in range(10):
        synced.append(window(True))
        free.append(window(False))
    ratio = statistics.median(s / f for s, f in zip(synced, free, strict=True))
    print(f"synchronised every product / events only: {ratio:.3f} (median of 10 rounds)")
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
