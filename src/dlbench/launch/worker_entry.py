"""The first thing a spawned worker runs: NumPy's BLAS pool sized before NumPy loads.

The worker loads NumPy first thing (worker.process.CaseProcess), before it sets its
case's thread variables. NumPy's OpenBLAS sizes its thread pool when it loads
(to every CPU where OPENBLAS_NUM_THREADS is unset), and those threads spin on
a core for a while after they start, then after every limit threadpoolctl
sets: beside a short timed loop they were the null case's second core (its
one Python loop read 170-206% CPU). No case times NumPy's BLAS, so it loads
with one thread; the worker then sets the case's count for the libraries that
load after it (worker.process.CaseProcess). This module imports nothing
else, so that it runs before NumPy loads.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

# The worker's entry point (module, function), imported only in the spawned process.
WORKER_ENTRY = ("dlbench.worker.process", "worker_main")
# What a worker's environment holds until it sets its case's threads (torchrun's ranks
# are started with it too)
NUMPY_AT_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1"}


def import_in_worker(module: str) -> ModuleType:
    """`module`, imported with NumPy's BLAS pool at one thread (the case's count is
    set later, for the libraries that load after NumPy)."""
    os.environ.update(NUMPY_AT_ONE_THREAD)
    return importlib.import_module(module)
