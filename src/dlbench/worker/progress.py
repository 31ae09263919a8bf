"""Progress lines of a long case (an epoch done), for the parent's progress bar.

The launcher names the file in the worker's environment; the worker appends
a line per event, and the parent reads the last line between its waits.
"""

from __future__ import annotations

import os

PROGRESS_ENV = "DLBENCH_PROGRESS_FILE"


def report_progress(line: str) -> None:
    """Append one progress line for the parent (a no-op outside a worker)."""
    path = os.environ.get(PROGRESS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(line.replace("\n", " ") + "\n")
