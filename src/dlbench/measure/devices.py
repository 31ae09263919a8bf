"""Is there a GPU here? Answered without importing a framework (the parent never does).

Suites list GPU cases "where a GPU exists": on a machine without one they
are skipped at plan time with a note, while an explicit --device cuda is
still an error from the worker (the user asked for it by name).
"""

from __future__ import annotations

import glob
import os


def gpu_visible() -> bool:
    """An NVIDIA GPU (NVML or a device node) or a ROCm one (/dev/kfd) is present."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False  # hidden on purpose: frameworks will not see one either
    if glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd"):
        return True
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver: no NVIDIA GPU to use
        return False
    try:
        return pynvml.nvmlDeviceGetCount() > 0
    except Exception:  # NVML up but unable to count: treat as absent
        return False
    finally:
        pynvml.nvmlShutdown()
