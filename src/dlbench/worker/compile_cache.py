"""A fresh, private compiler cache for each worker, so compile times are cold and repeatable.

torch.compile keeps what it built in on-disk caches shared by every process
of the user (Inductor's FX graph, AOTAutograd and autotuning caches, and
Triton's kernel cache). A case compiled once before then reports a first
call a fraction of the cold one, and two identical runs disagree on compile
time: an A/A test fails on the cache, not the code. Each worker therefore
points these caches at an empty folder of its own, removed when it ends.

dlbench's own test suite compiles the same small graphs dozens of times; it
names one shared folder (spec.worker_request.SHARED_COMPILE_CACHE_ENV, which the
launcher puts in each worker's request), and the results then say their compile
was warm. One test keeps the variable unset and proves the cold path.

One cache stays global, by Inductor's design: the precompiled headers its C++
kernels include, built by a user's first compile on a machine (and again after a
torch or compiler upgrade, or once the temporary folder is cleared) and kept in the
default cache folder whatever TORCHINDUCTOR_CACHE_DIR says. That first compile takes
longer (an mlp's first call 1.46x, bench/compile_headers.py), so a process that built
them while its case compiled says so (`details.compile_cache`, and the flag
`compile-built-headers`): its first call (a time-to-train case's first epoch, an
export's set-up) is not comparable with a later run's.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dlbench.results.details import HEADERS_BUILT
from dlbench.spec.case import Case

# Read when the compiler first needs its cache, so setting them before the
# framework is imported is enough.
CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
# What the result records: compile times are from empty caches, unless the request
# named a shared folder (for dlbench's test suite only).
COLD = "cold: fresh per process"
SHARED = "warm: shared test cache"


@contextmanager
def private_compile_caches(shared: Path | None = None) -> Iterator[str]:
    """Point the compiler caches at a new empty folder, removed afterwards (or at
    the test suite's `shared` one, kept)."""
    folder = str(shared) if shared else tempfile.mkdtemp(prefix="dlbench-compile-")
    saved = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    for name in CACHE_VARIABLES:
        os.environ[name] = os.path.join(folder, name.split("_")[0].lower())
    try:
        yield folder
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if not shared:
            shutil.rmtree(folder, ignore_errors=True)


def compile_cache_detail(
    case: Case, began: float, compiled_by: float, shared: bool = False
) -> str | None:
    """The result's word on the caches (details.compile_cache), for the cases whose
    first call compiles; `began` and `compiled_by`: when the case's work began and its
    compilation was over (epoch seconds); `shared`: the caches were the test suite's."""
    if case.compile == "eager":
        return None
    detail = SHARED if shared else COLD
    return detail + HEADERS_BUILT if headers_built_between(began, compiled_by) else detail


def headers_built_between(began: float, compiled_by: float) -> bool:
    """Whether Inductor's precompiled headers were written while the case compiled:
    by this process, in its set-up or first call, or by another one meanwhile (which
    it waited for, Inductor building each under a lock, or shared the CPUs with). Read
    from the folder Inductor names, where this process loaded it; never imported here
    (a case that did not compile built none)."""
    codecache = sys.modules.get("torch._inductor.codecache")
    folder = getattr(codecache, "_HEADER_DIR", None)
    if not isinstance(folder, str):
        return False
    # g++ writes .gch, other compilers .pch (torch._inductor.cpp_builder)
    headers = [path for path in Path(folder).glob("*") if path.suffix in (".gch", ".pch")]
    return any(began <= mtime <= compiled_by for mtime in map(_mtime, headers))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed while read: none of this case's
        return float("-inf")
