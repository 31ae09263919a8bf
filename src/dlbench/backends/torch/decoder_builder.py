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
from dlbench.reference.decoder import (
    CHECKPOINT,
    DecoderRequest,
    checkpoint_folder,
    publish_folder,
)
from dlbench.spec.case_inputs import CaseInputs
from dlbench.spec.record_dict import from_dict
from dlbench.workloads.inputs import case_arrays


def build_checkpoint(workload: str, seed: int, folder: Path) -> None:
    from dlbench.backends.torch.decoder import save_checkpoint

    staging = folder.with_name(f"{folder.name}.building-{os.getpid()}")
    save_checkpoint(workload, seed, staging)
    publish_folder(staging, folder)


def build_tokens(prompts: CaseInputs, path: Path) -> None:
    import numpy as np

    from dlbench.backends.torch.decoder import reference_tokens

    arrays = reference_tokens(
        checkpoint_folder(prompts.workload, prompts.seed),
        case_arrays(prompts)["input_ids"],
        dict(prompts.params)["osl"],
    )

    def save(temp: Path) -> None:
        # numpy's annotation reads a ** of arrays as possibly filling savez's allow_pickle
        # (a bool) too; these keys are the ones reference_tokens names
        np.savez(temp, **arrays)  # type: ignore[arg-type]

    write_atomic(path, save)


def main(argv: list[str] | None = None) -> int:
    # a torch process as a torch worker is: the other frameworks, and the libraries
    # transformers imports only because they are installed, hidden
    block_other_frameworks("torch")
    parser = argparse.ArgumentParser(description="build a decoder artifact (internal)")
    parser.add_argument("request", help="JSON: a reference.decoder.DecoderRequest")
    document = json.loads(parser.parse_args(argv).request)
    request = from_dict(DecoderRequest, document, "the builder's request")
    if request.kind == CHECKPOINT:
        build_checkpoint(request.workload, request.seed, request.path)
    elif request.prompts is not None:
        build_tokens(request.prompts, request.path)
    else:
        raise ValueError(f"a {request.kind} request names its prompts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
