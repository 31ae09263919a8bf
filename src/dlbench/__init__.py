"""dlbench: fair, reproducible deep-learning benchmarks.

Importing this package imports no deep-learning framework: frameworks are
imported only inside the worker process that runs a case, so the harness
itself stays light and each framework's memory and import time are its own.
"""

from typing import TYPE_CHECKING

# records' read-only mappings pickle and copy in every process that has dlbench
import dlbench.read_only  # noqa: F401

if TYPE_CHECKING:  # what __getattr__ gives, as the type checker sees it
    from dlbench.api import load_runs

__version__ = "0.1.0"

__all__ = ["__version__", "load_runs"]


def __getattr__(name: str) -> object:
    """`dlbench.load_runs` is imported on first use, keeping `import dlbench` light."""
    if name == "load_runs":
        from dlbench.api import load_runs

        return load_runs
    raise AttributeError(f"module 'dlbench' has no attribute {name!r}")
