"""dlbench: fair, reproducible deep-learning benchmarks.

Importing this package imports no deep-learning framework: frameworks are
imported only inside the worker process that runs a case, so the harness
itself stays light and each framework's memory and import time are its own.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
