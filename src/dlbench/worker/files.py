"""Where a case leaves files that belong beside its run (LoadGen's logs).

The launcher names a folder per case and process in the case's request
(spec.worker_request: next to the run's JSON file, else next to the store);
the worker creates it only when it writes something there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from dlbench.spec.worker_request import CaseOutputs


def case_files_dir(outputs: CaseOutputs) -> Path:
    """The case's folder for files, or a fresh temporary one where none was named."""
    if outputs.files_dir is not None:
        return outputs.files_dir
    return Path(tempfile.mkdtemp(prefix="dlbench-case-files-"))
