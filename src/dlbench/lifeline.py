"""A child process tied to its parent's life: `die_with_parent`.

Both sides use it: the launcher applies it to torchrun before exec (a
`preexec_fn`), the worker process and each DDP rank apply it to themselves.
It lives here, below both, so that the parent never imports worker code.
"""

from __future__ import annotations

import os
import sys


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process if its parent dies (even by SIGKILL).

    Workers (and torchrun, and its ranks) leave the terminal's process group,
    so without this a parent killed hard would leave an orphan loading the
    machine with no timeout. Elsewhere the runner's own cleanup is all there is.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
