"""`dlbench inspect`'s worker: one framework reads a model file and says what it sees.

Run as `python -m dlbench.worker.inspect_model FRAMEWORK FORMAT PATH [--trust]`
in a process of its own (frameworks never share one, as in measurement). It
prints one JSON object: the inputs and outputs, or why the framework cannot
load the file.
"""

from __future__ import annotations

import importlib
import json
import sys

from dlbench.backends.framework_guard import block_other_frameworks
from dlbench.errors import CaseError, UntrustedModel, cause_summary
from dlbench.spec.record_dict import to_dict


def describe(framework: str, kind: str, path: str, trust: bool) -> dict[str, object]:
    # the others hidden first: TensorFlow's tf.lite imports jax where it is installed
    # (0.7 s of every TensorFlow inspection, and a second framework in this process)
    block_other_frameworks(framework, hide_incidental=False)  # the user's model may need them
    # each backend package has a user_model module with describe(path, kind, trust)
    module = importlib.import_module(f"dlbench.backends.{framework}.user_model")
    try:
        inputs, outputs = module.describe(path, kind, trust)
    except UntrustedModel as exc:  # the user's call, not the framework's failing
        return {"ok": False, "error": str(exc), "untrusted": True}
    except CaseError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:  # a framework bug on this file is still an answer
        return {"ok": False, "error": f"{type(exc).__name__}: {cause_summary(exc)}"}
    return {
        "ok": True,
        "inputs": [to_dict(spec) for spec in inputs],
        "outputs": [to_dict(spec) for spec in outputs],
    }


def main(argv: list[str]) -> int:
    framework, kind, path = argv[:3]
    print(json.dumps(describe(framework, kind, path, "--trust" in argv[3:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
