"""A user's model case (`--model FILE`, the case's `user_model` part): the file there,
a format its framework runs, in a compile mode it runs that format in, trusted where it
is a pickle, and its input data readable; then the digests of the file and the data,
for what the case measured is their content, not their path."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from dlbench.errors import UserError
from dlbench.spec.case import Case
from dlbench.spec.digest import files_digest, path_digest
from dlbench.spec.registry import FrameworkInfo
from dlbench.workloads.memory import input_data_need, require_room

# The plan builder gives this too, for the same mistake seen in a request
MODEL_OPTIONS = "--input, --input-data and --trust-model go with --model FILE"


def require_model_file(model: str) -> None:
    if not Path(model).exists():
        raise UserError(f"--model {model}: no such file or directory")


def validate_user_model(case: Case, info: FrameworkInfo) -> None:
    """The user-model workload goes with the part, and the part's file and data are
    ones the case's framework runs (raises UserError)."""
    user = case.user_model
    if (case.workload == "user-model") != (user is not None):
        raise UserError("workload user-model goes with --model FILE, and --model only with it")
    if user is None:
        return
    from dlbench.workloads.model_format import FORMATS, model_format, require_trusted
    from dlbench.workloads.user_model import frameworks_for

    require_model_file(user.model)
    path = Path(user.model)
    allowed = frameworks_for(path)
    if case.framework not in allowed:
        raise UserError(
            f"--model {path.name} ({FORMATS[model_format(path)]}) runs on "
            f"{', '.join(allowed) or 'no framework dlbench has'}, not {case.framework!r}"
        )
    kind = model_format(path)
    require_trusted(path, kind, user.trust_model)  # before any worker unpickles it
    compiles = info.format_compiles.get(kind)
    if compiles is not None and case.compile not in compiles:
        raise UserError(
            f"--model {path.name} is a {FORMATS[kind]}; {case.framework} runs it in compile "
            f"modes {', '.join(compiles)}, not {case.compile!r}"
        )
    if user.input_data is not None:
        _check_input_data(user.input_data)


def with_user_model_digests(case: Case) -> Case:
    """The case with its model file's and input data's digests."""
    user = case.user_model
    if user is None:
        return case
    data = user.input_data
    return replace(
        case,
        user_model=replace(
            user,
            model_digest=_digest(user.model),
            input_data_digest=_digest(data) if data is not None else None,
        ),
    )


@functools.lru_cache(maxsize=8)
def _digest(path: str) -> str:
    """A model or data file's digest, read once per file (every framework's case names it).

    An OpenVINO IR's weights live in the .bin beside its .xml: both count.
    """
    weights = Path(path).with_suffix(".bin")
    if Path(path).suffix.lower() == ".xml" and weights.is_file():
        return files_digest([(Path(path).name, Path(path)), (weights.name, weights)])
    return path_digest(Path(path))


@functools.lru_cache(maxsize=8)
def _check_input_data(input_data: str) -> None:
    """A readable .npz/.npy without pickles (raises UserError); the model's own check
    of names, shapes and dtypes happens where the model is loaded."""
    from dlbench.workloads.user_model import load_input_data

    path = Path(input_data)
    if not path.is_file():
        raise UserError(f"--input-data {input_data}: no such file")
    require_room(input_data_need(path))  # its headers may claim more than memory holds
    load_input_data(path)
