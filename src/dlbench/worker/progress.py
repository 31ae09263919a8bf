"""Progress lines of a long case (an epoch done), for the parent's progress bar.

The launcher names the file in the case's request (spec.worker_request); the
worker appends a line per event, and the parent reads the last line between
its waits.
"""

from __future__ import annotations

from dlbench.spec.worker_request import CaseOutputs


def report_progress(outputs: CaseOutputs, line: str) -> None:
    """Append one progress line for the parent (nothing where no file was named)."""
    if outputs.progress_path is not None:
        with open(outputs.progress_path, "a", encoding="utf-8") as stream:
            stream.write(line.replace("\n", " ") + "\n")
