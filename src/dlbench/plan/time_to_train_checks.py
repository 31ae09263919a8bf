"""A time-to-train case's part (`time_to_train`: --target-accuracy, --data-dir): only
on an epoch workload, the target a fraction in (0, 1], the MNIST folder whole; then
the folder's digest, for what the case trained on is its files' content."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from dlbench.errors import UserError
from dlbench.spec.case import Case
from dlbench.spec.case_parts import TimeToTrain
from dlbench.spec.digest import files_digest

# The plan builder's refusal of these options in a request with no such workload
TIME_TO_TRAIN_ONLY = (
    "--target-accuracy and --data-dir are for time-to-train workloads (mnist-train)"
)


def validate_time_to_train(case: Case) -> None:
    """The part's own values: the MNIST folder whole (the target's range is its
    option's reader's, which planning holds every case to)."""
    part = case.load
    if isinstance(part, TimeToTrain) and part.data_dir is not None:
        problem = _mnist_dir_problem(part.data_dir)
        if problem:
            raise UserError(f"--data-dir: {problem}")


def with_data_digest(case: Case) -> Case:
    """The case with its MNIST folder's digest (where it names one)."""
    train = case.load
    if not isinstance(train, TimeToTrain):
        return case
    folder = train.data_dir
    digest = _mnist_digest(folder) if folder is not None else None
    return replace(case, load=replace(train, data_digest=digest))


@functools.lru_cache(maxsize=8)
def _mnist_digest(data_dir: str) -> str:
    """The digest of the four MNIST files in the folder (checked before this is asked)."""
    from dlbench.data.mnist import find_mnist_files

    return files_digest(sorted(find_mnist_files(Path(data_dir)).items()))


@functools.lru_cache(maxsize=8)
def _mnist_dir_problem(data_dir: str) -> str | None:
    """What is wrong with an MNIST folder, read once per folder (every case of a
    suite names the same one, and checking means decompressing all four files)."""
    from dlbench.data.mnist import check_mnist_dir
    from dlbench.errors import MnistFileError

    try:
        check_mnist_dir(Path(data_dir))
    except MnistFileError as exc:
        return str(exc)
    return None
