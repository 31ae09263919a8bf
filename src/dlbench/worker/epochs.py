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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.base import Backend, EpochTrainer, Job
from dlbench.errors import CaseError
from dlbench.measure.instruments import Instruments, Reading
from dlbench.results.details import Epoch, Training, TrainingData
from dlbench.results.records import Result
from dlbench.spec.case import Case, Settings
from dlbench.spec.case_parts import TimeToTrain
from dlbench.spec.loop_kinds import case_load
from dlbench.worker.placement import require_placement
from dlbench.worker.progress import report_progress
from dlbench.worker.result import BARE, Measurement, ProcessSetup, Verdict, result_from
from dlbench.workloads.mnist_train import CLASSES, FIRST_EPOCH_MIN_ACCURACY, usable_train_samples

if TYPE_CHECKING:
    from dlbench.data.mnist import MnistData

# Below this many steps an epoch is too short to expect learning from it.
GUARD_MIN_STEPS = 50


def target_accuracy(case: Case) -> float | None:
    """The test accuracy a time-to-train case stops at (--target-accuracy); None: it
    trains every epoch."""
    return case_load(case, TimeToTrain).target_accuracy


def load_training_data(job: Job) -> MnistData:
    """MNIST from --data-dir, or the learnable synthetic set of the same shape."""
    from dlbench.data.mnist import load_mnist_dir, synthetic_mnist
    from dlbench.errors import MnistFileError

    train, test = job.params["train_samples"], job.params["test_samples"]
    part = case_load(job.case, TimeToTrain)
    if part.data_dir is None:
        return synthetic_mnist(train, test, job.seed)
    try:
        return load_mnist_dir(Path(part.data_dir), train, test)
    except MnistFileError as exc:
        raise CaseError(str(exc)) from None


def run_epochs(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
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
    run = _EpochLoop(job, trainer, used).train()
    elapsed = sum(run.train_s)
    training = _training(job, run, used, data, data_load_s)
    measured = Measurement(
        run.reading,
        run.train_s,
        device=job.device,
        batch=job.batch_size,
        samples_done=used * len(run.epochs),  # the energy covers evaluation too
        details=replace(trainer.details, training=training),
        rate=used * len(run.epochs) / elapsed if elapsed > 0 else None,
        first_call_ms=trainer.details.first_step_ms,
    )
    # broken training, or a target not reached, fails the case
    verdict = Verdict(error=run.error)
    return result_from(job, measured, setup_s=setup_s, verdict=verdict, process=process)


@dataclass(frozen=True)
class EpochsRun:
    """What the epoch loop measured, built once as it ends: the Result and its
    details.training are made from this, never from the loop's working state."""

    epochs: tuple[Epoch, ...]
    # each epoch's training time (the Result's samples), and all epochs' evaluation time
    train_s: tuple[float, ...]
    eval_s: float
    time_to_target_s: float | None  # None: no target, or it was not reached
    final_accuracy: float | None  # the last epoch's; None: no epoch ran
    error: str | None  # why the case failed: broken training, or a target not reached
    reading: Reading  # every epoch, evaluation included


def _training(job: Job, run: EpochsRun, used: int, data: MnistData, data_load_s: float) -> Training:
    """The time-to-train record of the epochs that ran (details.training)."""
    elapsed = sum(run.train_s)
    return Training(
        epochs=tuple(run.epochs),
        time_to_train_s=elapsed,
        # without epoch 1, which holds compilation (torch.compile, tf.function tracing)
        steady_samples_per_s=used * (len(run.train_s) - 1) / sum(run.train_s[1:])
        if len(run.train_s) > 1
        else None,
        wall_to_train_s=elapsed + run.eval_s,
        time_to_target_s=run.time_to_target_s,
        target_accuracy=target_accuracy(job.case),
        final_accuracy=run.final_accuracy,
        data=TrainingData(
            source=data.source,
            synthetic=data.synthetic,
            train_samples_used=used,
            test_samples=len(data.test_labels),
            load_s=data_load_s,
        ),
    )


class _EpochLoop:
    """The epochs of one case, with the stop rules and the correctness guard."""

    def __init__(self, job: Job, trainer: EpochTrainer, used: int) -> None:
        self.job, self.trainer, self.used = job, trainer, used

    def train(self) -> EpochsRun:
        """Run the epochs until the last, a target reached or broken training."""
        instruments = Instruments(self.job.device)
        instruments.start()
        epochs, target = self.job.params["epochs"], target_accuracy(self.job.case)
        done: list[Epoch] = []
        error: str | None = None
        time_to_target_s: float | None = None
        elapsed = 0.0
        for number in range(1, epochs + 1):
            epoch = self._epoch(number)
            elapsed += _measured(epoch.train_s)
            done.append(epoch)
            _report(self.job, epoch, epochs)
            error = training_error(epoch, self.used // self.job.batch_size)
            if error:
                break
            if target is not None and _measured(epoch.accuracy) >= target:
                time_to_target_s = elapsed
                break
        reading = instruments.stop()  # the whole run, evaluation included
        if target is not None and time_to_target_s is None and error is None:
            error = _target_missed(done, target)
        return _measurement(done, reading, error, time_to_target_s)

    def _epoch(self, epoch: int) -> Epoch:
        start_epoch_s, start = time.time(), time.perf_counter()
        loss = self.trainer.train_epoch(epoch)
        trained = time.perf_counter()
        test_loss, accuracy = self.trainer.evaluate()
        train_s, eval_s = trained - start, time.perf_counter() - trained
        return Epoch(
            epoch=epoch,
            train_s=train_s,
            eval_s=eval_s,
            samples_per_s=self.used / train_s if train_s > 0 else None,
            loss=loss,
            test_loss=test_loss,
            accuracy=accuracy,
            start_epoch_s=start_epoch_s,
            end_epoch_s=start_epoch_s + train_s,
        )


def _report(job: Job, epoch: Epoch, epochs: int) -> None:
    """One epoch's line, in the case log (and its tail in an error) and the parent's
    progress bar."""
    line = (
        f"epoch {epoch.epoch}/{epochs}: train {epoch.train_s:.2f} s, "
        f"loss {epoch.loss:.4f}, test accuracy {epoch.accuracy:.4f}"
    )
    print(line, flush=True)
    report_progress(job.outputs, line)


def _target_missed(epochs: list[Epoch], target: float) -> str:
    """The error of a case that trained every epoch without reaching its target."""
    best = max(_measured(e.accuracy) for e in epochs)
    return (
        f"did not reach target accuracy {target:g} in {len(epochs)} epoch(s) "
        f"(best {best:.4f}); give more --epochs or a lower --target-accuracy"
    )


def _measurement(
    epochs: list[Epoch], reading: Reading, error: str | None, time_to_target_s: float | None
) -> EpochsRun:
    """The loop's result, made once its epochs are done."""
    return EpochsRun(
        epochs=tuple(epochs),
        train_s=tuple(_measured(e.train_s) for e in epochs),
        eval_s=sum(_measured(e.eval_s) for e in epochs),
        time_to_target_s=time_to_target_s,
        final_accuracy=epochs[-1].accuracy if epochs else None,
        error=error,
        reading=reading,
    )


def _measured(value: float | None) -> float:
    """A number of an epoch this loop ran, which sets every one (Epoch's fields are
    optional because a result read from a file may lack one)."""
    assert value is not None, "the epoch loop fills every field of its epochs"
    return value


def training_error(epoch: Epoch, steps_per_epoch: int) -> str | None:
    """Why this epoch shows broken training, or None."""
    for name, value in (("loss", epoch.loss), ("test loss", epoch.test_loss)):
        if not math.isfinite(_measured(value)):
            return f"{name} is {value} in epoch {epoch.epoch}"
    guarded = epoch.epoch == 1 and steps_per_epoch >= GUARD_MIN_STEPS
    if guarded and _measured(epoch.accuracy) < FIRST_EPOCH_MIN_ACCURACY:
        return (
            f"test accuracy after epoch 1 is {epoch.accuracy:.3f}, not clearly above "
            f"chance ({1 / CLASSES:.2f}): the training step does not learn"
        )
    return None
