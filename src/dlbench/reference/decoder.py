"""A decoder workload's shared checkpoint, its reference tokens, and each engine's
conversion of it: built once, each in a process of its own, and cached.

The checkpoint (transformers' folder: config, safetensors weights, tokenizer) and
torch eager fp32's greedy tokens are made by `dlbench.backends.torch.decoder_builder`,
so torch never enters another engine's worker. An engine converts the checkpoint
with its own tool (onnxruntime-genai's model builder, optimum-intel's OpenVINO
export); the command is the engine's, the caching and the timing are here, and a
conversion is keyed by its command and the versions of the packages that make it. A
folder is written under a temporary name and renamed whole, so a reader never
sees half of one, and two processes building the same one both end with it.

Where torch builds its model from the seed on the case's own device (a GPU: no
checkpoint on disk), the weights are not the checkpoint's (a GPU's random numbers
are not the CPU's), so the reference is made in that worker from the same weights,
on the same device, and cached here by `own_reference` (an `OwnReference`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench import __version__
from dlbench.atomic import build_once, write_atomic
from dlbench.errors import CaseError, ReferenceUnavailable
from dlbench.reference.builtin import BUILD_LOCK, cache_dir, lock_beside, package_version
from dlbench.spec.case_inputs import CaseInputs
from dlbench.spec.record_dict import to_dict
from dlbench.spec.registry import framework_info
from dlbench.untyped import JSONObject, JSONValue

if TYPE_CHECKING:
    import numpy as np

# Bump when the checkpoint's construction changes (it is part of the cache key).
CHECKPOINT_REVISION = 3
BUILDER_MODULE = "dlbench.backends.torch.decoder_builder"
BUILD_TIMEOUT_S = 3600
CONVERSION_META = "dlbench-conversion.json"
# Bump when how an engine makes its own reference changes (it is part of the cache key).
OWN_REFERENCE_REVISION = 1
OWN_REFERENCES = "decoder-own-references"
# Where `reference_tokens` come from, as a result records it
SHARED_REFERENCE = "torch eager fp32 on the CPU, from the shared checkpoint"


@dataclass(frozen=True)
class OwnReference:
    """Reference tokens an engine made from its own weights on its own device, where
    they are not the shared checkpoint's: what `reference_tokens` gives (tokens, top1,
    top2), where it was made, and the seconds this case spent making it (None: found
    in the cache)."""

    arrays: Mapping[str, np.ndarray]
    origin: str
    made_s: float | None


# What the decoder's builder process makes (DecoderRequest.kind)
CHECKPOINT, TOKENS = "checkpoint", "tokens"


@dataclass(frozen=True)
class DecoderRequest:
    """What the decoder's builder process is asked, as its one argument: the workload's
    seeded checkpoint, saved into the folder `path` (CHECKPOINT); or torch's reference
    tokens for `prompts`, written to the file `path` (TOKENS)."""

    kind: str
    workload: str
    seed: int
    path: Path
    prompts: CaseInputs | None = None


def checkpoint_folder(workload: str, seed: int) -> Path:
    """The workload's checkpoint folder (built on first need)."""
    folder = _keyed_folder(workload, seed)
    request = DecoderRequest(CHECKPOINT, workload, seed, folder)
    build_once(lock_beside(folder), folder.exists, lambda: _run_builder(request))
    return folder


def reference_tokens(prompts: CaseInputs) -> dict[str, np.ndarray]:
    """torch eager fp32's greedy tokens for these prompts ([batch, osl]) and its top two
    logits at each step."""
    import numpy as np

    folder = checkpoint_folder(prompts.workload, prompts.seed) / "reference"
    path = folder / f"b{prompts.batch_size}-{prompts.digest()}.npz"
    request = DecoderRequest(TOKENS, prompts.workload, prompts.seed, path, prompts)
    build_once(path.parent / BUILD_LOCK, path.exists, lambda: _run_builder(request))
    with np.load(path) as arrays:
        return {name: arrays[name] for name in arrays.files}


def own_reference(
    key: Mapping[str, JSONValue], origin: str, make: Callable[[], dict[str, np.ndarray]]
) -> OwnReference:
    """The reference `make` computes in this process, cached under `key` (workload,
    seed, lengths, batch, the device's name, the versions that compute it), so the
    cases of a run that share them (eager and compiled) make it once."""
    import numpy as np

    whole = {**key, "dlbench": __version__, "revision": OWN_REFERENCE_REVISION}
    digest = hashlib.sha256(json.dumps(whole, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir() / OWN_REFERENCES / f"{key['workload']}-{digest}.npz"
    if path.exists():
        with np.load(path) as arrays:
            return OwnReference({name: arrays[name] for name in arrays.files}, origin, None)
    started = time.perf_counter()
    made = make()
    made_s = time.perf_counter() - started
    # numpy's annotation reads a ** of arrays as possibly filling savez's allow_pickle (a
    # bool) too; these keys are the reference's names (tokens, top1, top2)
    write_atomic(path, lambda temp: np.savez(temp, **made))  # type: ignore[arg-type]
    return OwnReference(made, origin, made_s)


def converted(
    engine: str, workload: str, seed: int, command: Sequence[str], converter: str
) -> tuple[Path, JSONObject]:
    """The checkpoint in `engine`'s format, and how it was made (converter, convert_s;
    made_now: by this call, not found in the cache).

    `command` converts; "{checkpoint}" and "{out}" in it stand for the folders."""
    source = checkpoint_folder(workload, seed)
    folder = source / "engines" / conversion_key(engine, command, converter)
    meta = folder / CONVERSION_META
    made_now = build_once(
        lock_beside(folder),
        meta.exists,
        lambda: _convert(source, folder, command, converter),
    )
    return folder, {**json.loads(meta.read_text(encoding="utf-8")), "made_now": made_now}


def conversion_key(engine: str, command: Sequence[str], converter: str) -> str:
    """The engine's folder name: its conversion is made again when the converter, its
    command, or the version of the engine or of a package its converter needs changes
    (a model builder's new release may write a different graph)."""
    info = framework_info(engine)
    made_by = {name: package_version(name) for name in (*info.distributions, *info.needs)}
    key = json.dumps({"command": [*command[1:]], "converter": converter, **made_by},
                     sort_keys=True)  # fmt: skip
    return f"{engine}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _keyed_folder(workload: str, seed: int) -> Path:
    made_by = {"dlbench": __version__, "transformers": package_version("transformers")}
    key = json.dumps({"workload": workload, "seed": seed, "revision": CHECKPOINT_REVISION,
                      **made_by})  # fmt: skip
    return cache_dir() / f"{workload}-seed{seed}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _convert(source: Path, folder: Path, command: Sequence[str], converter: str) -> None:
    staging = folder.with_name(f"{folder.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    argv = [part.format(checkpoint=source, out=staging) for part in command]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise CaseError(
            f"{converter} could not convert the checkpoint: {_last_line(done)}",
            detail=(done.stderr or done.stdout)[-4000:],
        )
    record = {"converter": converter, "convert_s": time.perf_counter() - started}
    write_atomic(staging / CONVERSION_META, json.dumps(record))
    publish_folder(staging, folder)


def _run_builder(request: DecoderRequest) -> None:
    document = json.dumps(to_dict(request))
    try:
        done = subprocess.run([sys.executable, "-m", BUILDER_MODULE, document],
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ReferenceUnavailable(f"building the decoder's {request.kind} timed out") from None
    if done.returncode != 0:
        raise ReferenceUnavailable(
            f"could not build the {request.workload} {request.kind}: {_last_line(done)}"
        )


def publish_folder(staging: Path, folder: Path) -> None:
    """Rename a finished folder into place; another process's identical one may be there."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(staging, folder)
    except OSError:
        if not folder.exists():
            raise
        shutil.rmtree(staging, ignore_errors=True)  # built at the same time elsewhere


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stderr or done.stdout or "").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"
