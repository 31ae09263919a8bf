"""Builds a decoder workload's checkpoint or reference tokens: `python -m` this module.

dlbench.reference.decoder asks for them; this process imports torch and
transformers, builds, and publishes the result whole (a folder renamed into
place, a file written atomically), so torch never enters another engine's worker.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from dlbench.atomic import write_atomic
from dlbench.backends.framework_guard import block_other_frameworks
from dlbench.reference.decoder import checkpoint_folder, publish_folder
from dlbench.spec.case_inputs import CaseInputs
from dlbench.spec.record_dict import from_dict
from dlbench.untyped import JSONObject
from dlbench.workloads.inputs import case_arrays


def build_checkpoint(workload: str, seed: int, folder: Path) -> None:
    from dlbench.backends.torch.decoder import save_checkpoint

    staging = folder.with_name(f"{folder.name}.building-{os.getpid()}")
    save_checkpoint(workload, seed, staging)
    publish_folder(staging, folder)


def build_tokens(request: JSONObject) -> None:
    import numpy as np

    from dlbench.backends.torch.decoder import reference_tokens

    prompts = from_dict(CaseInputs, request["prompts"], "prompts")
    arrays = reference_tokens(
        checkpoint_folder(prompts.workload, prompts.seed),
        case_arrays(prompts)["input_ids"],
        dict(prompts.params)["osl"],
    )

    def save(temp: Path) -> None:
        # numpy's annotation reads a ** of arrays as possibly filling savez's allow_pickle
        # (a bool) too; these keys are the ones reference_tokens names
        np.savez(temp, **arrays)  # type: ignore[arg-type]

    write_atomic(Path(request["path"]), save)


def main(argv: list[str] | None = None) -> int:
    # a torch process as a torch worker is: the other frameworks, and the libraries
    # transformers imports only because they are installed, hidden
    block_other_frameworks("torch")
    parser = argparse.ArgumentParser(description="build a decoder artifact (internal)")
    parser.add_argument("request", help="JSON: kind (checkpoint or tokens) and its fields")
    request = json.loads(parser.parse_args(argv).request)
    if request["kind"] == "checkpoint":
        build_checkpoint(request["workload"], request["seed"], Path(request["folder"]))
    else:
        build_tokens(request)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
