"""Time-to-train: the worker drives a backend's epochs and times each one.

Per epoch it records training time and evaluation time apart (the first
seed article's timings mixed test passes and logging into "training
time"), the mean training loss, the test loss and accuracy. It stops early
at a target accuracy, and fails the case when training is broken: a loss
that is not finite, or a first epoch that leaves the network near chance.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.base import Backend, EpochTrainer, Job
from dlbench.errors import CaseError
from dlbench.measure.instruments import Instruments
from dlbench.results.details import Epoch, Training, TrainingData
from dlbench.results.records import STATUS_FAILED, STATUS_OK, Result
from dlbench.spec.case import Case, Settings
from dlbench.spec.record_dict import from_dict
from dlbench.untyped import JSONObject
from dlbench.worker.placement import require_placement
from dlbench.worker.progress import report_progress
from dlbench.worker.result import result_from
from dlbench.workloads.mnist_train import CLASSES, FIRST_EPOCH_MIN_ACCURACY, usable_train_samples

if TYPE_CHECKING:
    from dlbench.data.mnist import MnistData

# Below this many steps an epoch is too short to expect learning from it.
GUARD_MIN_STEPS = 50


def target_accuracy(case: Case) -> float | None:
    """The test accuracy a time-to-train case stops at (--target-accuracy); None: it
    trains every epoch."""
    return case.time_to_train.target_accuracy if case.time_to_train is not None else None


def load_training_data(job: Job) -> MnistData:
    """MNIST from --data-dir, or the learnable synthetic set of the same shape."""
    from dlbench.data.mnist import load_mnist_dir, synthetic_mnist
    from dlbench.errors import MnistFileError

    train, test = job.params["train_samples"], job.params["test_samples"]
    part = job.case.time_to_train
    if part is None or part.data_dir is None:
        return synthetic_mnist(train, test, job.seed)
    try:
        return load_mnist_dir(Path(part.data_dir), train, test)
    except MnistFileError as exc:
        raise CaseError(str(exc)) from None


def run_epochs(backend: Backend, job: Job, settings: Settings) -> Result:
    """Train epoch by epoch; the Result's samples are the per-epoch training times.
    `settings` as every loop kind's runner takes them: the workload's epochs and target
    pace this loop, not the stop rule's --min-time."""
    load_start = time.perf_counter()
    data = load_training_data(job)
    data_load_s = time.perf_counter() - load_start
    used = usable_train_samples(len(data.train_labels), job.batch_size)
    if used == 0:
        raise CaseError(
            f"{len(data.train_labels)} training samples make no batch of {job.batch_size}"
        )
    setup_start = time.perf_counter()
    trainer = backend.prepare_training(job, data)
    setup_s = time.perf_counter() - setup_start
    require_placement(job.device, trainer.details)
    run = _EpochLoop(job, trainer, used)
    run.train()
    train_s = [r["train_s"] for r in run.records]
    elapsed = sum(train_s)
    return result_from(
        job,
        run.reading,
        train_s,
        device=job.device,
        batch=job.batch_size,
        samples_done=used * len(run.records),  # the energy covers evaluation too
        details=replace(trainer.details, training=_training(job, run, data, data_load_s)),
        rate=used * len(run.records) / elapsed if elapsed > 0 else None,
        first_call_ms=trainer.details.first_step_ms,
        status=STATUS_FAILED if run.error else STATUS_OK,
        error=run.error,
        setup_s=setup_s,
    )


def _training(job: Job, run: _EpochLoop, data: MnistData, data_load_s: float) -> Training:
    """The time-to-train record of the epochs that ran (details.training)."""
    train_s = [r["train_s"] for r in run.records]
    elapsed = sum(train_s)
    return Training(
        epochs=[from_dict(Epoch, r) for r in run.records],
        time_to_train_s=elapsed,
        # without epoch 1, which holds compilation (torch.compile, tf.function tracing)
        steady_samples_per_s=run.used * (len(train_s) - 1) / sum(train_s[1:])
        if len(train_s) > 1
        else None,
        wall_to_train_s=elapsed + sum(r["eval_s"] for r in run.records),
        time_to_target_s=run.time_to_target_s,
        target_accuracy=target_accuracy(job.case),
        final_accuracy=run.records[-1]["accuracy"] if run.records else None,
        data=TrainingData(
            source=data.source,
            synthetic=data.synthetic,
            train_samples_used=run.used,
            test_samples=len(data.test_labels),
            load_s=data_load_s,
        ),
    )


class _EpochLoop:
    """The epochs of one case, with the stop rules and the correctness guard."""

    def __init__(self, job: Job, trainer: EpochTrainer, used: int) -> None:
        self.job, self.trainer, self.used = job, trainer, used
        self.records: list[JSONObject] = []
        self.error: str | None = None
        self.time_to_target_s: float | None = None

    def train(self) -> None:
        instruments = Instruments(self.job.device)
        instruments.start()
        epochs, target = self.job.params["epochs"], target_accuracy(self.job.case)
        elapsed = 0.0
        for epoch in range(1, epochs + 1):
            record = self._epoch(epoch)
            elapsed += record["train_s"]
            self.records.append(record)
            line = (
                f"epoch {epoch}/{epochs}: train {record['train_s']:.2f} s, "
                f"loss {record['loss']:.4f}, test accuracy {record['accuracy']:.4f}"
            )
            print(line, flush=True)  # the case log (and its tail in an error)
            report_progress(self.job.outputs, line)  # the parent's progress bar
            self.error = training_error(record, self.used // self.job.batch_size)
            if self.error:
                break
            if target is not None and record["accuracy"] >= target:
                self.time_to_target_s = elapsed
                break
        self.reading = instruments.stop()  # the whole run, evaluation included
        if target is not None and self.time_to_target_s is None and self.error is None:
            best = max(r["accuracy"] for r in self.records)
            self.error = (
                f"did not reach target accuracy {target:g} in {len(self.records)} epoch(s) "
                f"(best {best:.4f}); give more --epochs or a lower --target-accuracy"
            )

    def _epoch(self, epoch: int) -> JSONObject:
        start_epoch_s, start = time.time(), time.perf_counter()
        loss = self.trainer.train_epoch(epoch)
        trained = time.perf_counter()
        test_loss, accuracy = self.trainer.evaluate()
        train_s, eval_s = trained - start, time.perf_counter() - trained
        return {
            "epoch": epoch,
            "train_s": train_s,
            "eval_s": eval_s,
            "samples_per_s": self.used / train_s if train_s > 0 else None,
            "loss": loss,
            "test_loss": test_loss,
            "accuracy": accuracy,
            "start_epoch_s": start_epoch_s,
            "end_epoch_s": start_epoch_s + train_s,
        }


def training_error(record: JSONObject, steps_per_epoch: int) -> str | None:
    """Why this epoch shows broken training, or None."""
    for name in ("loss", "test_loss"):
        if not math.isfinite(record[name]):
            return f"{name.replace('_', ' ')} is {record[name]} in epoch {record['epoch']}"
    guarded = record["epoch"] == 1 and steps_per_epoch >= GUARD_MIN_STEPS
    if guarded and record["accuracy"] < FIRST_EPOCH_MIN_ACCURACY:
        return (
            f"test accuracy after epoch 1 is {record['accuracy']:.3f}, not clearly above "
            f"chance ({1 / CLASSES:.2f}): the training step does not learn"
        )
    return None
