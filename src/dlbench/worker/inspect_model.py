"""`dlbench inspect`'s worker: one framework reads a model file and says what it sees.

Run as `python -m dlbench.worker.inspect_model REQUEST`, REQUEST a JSON
`spec.model_signature.LoaderRequest`, in a process of its own (frameworks never share
one, as in measurement). It prints one JSON `LoaderAnswer`: the inputs and outputs, or
why the framework cannot load the file.
"""

from __future__ import annotations

import importlib
import json
import sys

from dlbench.backends.framework_guard import block_other_frameworks
from dlbench.errors import CaseError, UntrustedModel, cause_summary
from dlbench.spec.model_signature import LoaderAnswer, LoaderRequest
from dlbench.spec.record_dict import from_dict, to_dict


def describe(request: LoaderRequest) -> LoaderAnswer:
    # the others hidden first: TensorFlow's tf.lite imports jax where it is installed
    # (0.7 s of every TensorFlow inspection, and a second framework in this process)
    block_other_frameworks(request.framework, hide_incidental=False)  # the model may need them
    # each backend package has a user_model module with describe(path, kind, trust)
    module = importlib.import_module(f"dlbench.backends.{request.framework}.user_model")
    try:
        inputs, outputs = module.describe(str(request.path), request.kind, request.trust)
    except UntrustedModel as exc:  # the user's call, not the framework's failing
        return LoaderAnswer(ok=False, error=str(exc), untrusted=True)
    except CaseError as exc:
        return LoaderAnswer(ok=False, error=str(exc))
    except Exception as exc:  # a framework bug on this file is still an answer
        return LoaderAnswer(ok=False, error=f"{type(exc).__name__}: {cause_summary(exc)}")
    return LoaderAnswer(ok=True, inputs=tuple(inputs), outputs=tuple(outputs))


def main(argv: list[str]) -> int:
    request = from_dict(LoaderRequest, json.loads(argv[0]), "the loader's request")
    print(json.dumps(to_dict(describe(request))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
