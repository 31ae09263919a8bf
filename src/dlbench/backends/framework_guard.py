"""One framework to a process: the others are made unimportable before it loads.

The worker and each DDP rank (worker.process.CaseProcess), the inspection of a
user's model file (worker.inspect_model) and the torch reference builders each load
one framework; these hide the rest from the import system, and the libraries
frameworks import only because they are installed, and say which frameworks did load.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING

from dlbench.spec.registry import FRAMEWORKS, framework_info

if TYPE_CHECKING:
    from _typeshed.importlib import MetaPathFinderProtocol  # what sys.meta_path holds

# Every framework's top-level module, from the registry: a new backend is blocked too.
FRAMEWORK_MODULES = tuple(info.import_name for info in FRAMEWORKS.values() if info.import_name)
# Libraries a framework imports only because they are installed, for features no
# built-in case uses: Keras's scikit-learn wrappers, plots and notebook editor, and its
# pandas input adapter; transformers' scikit-learn for assisted generation. Each import
# is guarded (ImportError switches the feature off). Visible, they would count their
# import time and memory against the framework on a machine where they happen to be
# installed (docs/methodology.md gives the figures, bench/incidental_imports.py
# measures them). A user's own model may use them: its processes leave them visible.
# A framework's quantizer package (FrameworkInfo.quantizer_package: torchao for torch)
# is hidden the same way from a case that does not quantize: transformers imports
# torchao wherever it is installed (its quantizers, for a model loaded quantized), 0.3 s
# of CPU in every BERT or decoder process, which no fp32 case of dlbench's uses.
INCIDENTAL_LIBRARIES = ("sklearn", "pandas", "matplotlib", "IPython")


class _Hiding(importlib.abc.MetaPathFinder):
    """Wraps an import finder so that it does not see some top-level packages."""

    def __init__(self, finder: MetaPathFinderProtocol, names: frozenset[str]) -> None:
        self._finder, self._names = finder, names

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] in self._names:
            return None
        return self._finder.find_spec(fullname, path, target)

    def __getattr__(self, name: str) -> object:
        return getattr(self._finder, name)  # invalidate_caches() and the rest


def block_other_frameworks(
    framework: str, hide_incidental: bool = True, quantizes: bool = False
) -> list[str]:
    """Make the other frameworks unimportable here, and the incidental libraries
    unless `hide_incidental` is false (a user's model, which may import them), and the
    framework's quantizer package too unless the case `quantizes` (or is a user's
    model, which may need its ops); returns the frameworks blocked.

    Some frameworks import others when they happen to be installed
    (TensorFlow's tf.lite imports jax), which would put a second framework's
    memory and import time into this case. They all guard such imports, so
    an ImportError just switches the optional feature off. The import
    finders are wrapped so that they do not see the other frameworks: an
    import raises ModuleNotFoundError, importlib.util.find_spec answers None
    (torch.compile and nncf ask it which frameworks exist), and sys.modules
    holds nothing for them (a None there, the older way, made scipy, imported
    by scikit-learn, imported by Keras, fail on sys.modules["torch"].Tensor).
    """
    info = framework_info(framework)
    allowed = {info.import_name, *info.companions}
    blocked = [
        name for name in FRAMEWORK_MODULES if name not in allowed and name not in sys.modules
    ]
    incidental = list(INCIDENTAL_LIBRARIES) if hide_incidental else []
    if hide_incidental and not quantizes and info.quantizer_package is not None:
        incidental.append(info.quantizer_package)
    hide_packages(blocked + [name for name in incidental if name not in sys.modules])
    return blocked


def hide_packages(names: Sequence[str]) -> None:
    """Make these top-level packages unimportable in this process (see above)."""
    hidden = frozenset(names)
    sys.meta_path[:] = [_Hiding(finder, hidden) for finder in sys.meta_path]


def frameworks_in_process() -> tuple[str, ...]:
    """Which frameworks this worker imported: fairness rule 6 says exactly one."""
    return tuple(name for name in FRAMEWORK_MODULES if sys.modules.get(name) is not None)
