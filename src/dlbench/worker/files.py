"""Where a case leaves files that belong beside its run (LoadGen's logs).

The launcher names a folder per case and process in the worker's environment
(next to the run's JSON file, else next to the store); the worker creates it
only when it writes something there.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILES_ENV = "DLBENCH_CASE_FILES"


def case_files_dir() -> Path:
    """The case's folder for files, or a fresh temporary one outside a launched worker."""
    named = os.environ.get(FILES_ENV)
    return Path(named) if named else Path(tempfile.mkdtemp(prefix="dlbench-case-files-"))
