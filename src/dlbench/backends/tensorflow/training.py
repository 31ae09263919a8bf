"""TensorFlow's MNIST time-to-train loop: Keras `fit`, or a custom tf.function step.

Same network and initial weights as torch (dlbench.backends.tensorflow.models), same
recipe: Adadelta with torch's rho and epsilon (Keras's defaults differ),
the learning rate set to 1.0 x 0.7^(epoch-1) before each epoch (StepLR),
NLL on the log-softmax output (from_logits cross-entropy of log-probabilities
is the same number, since log_softmax is idempotent).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import keras
import tensorflow as tf

from dlbench.backends.base import EpochTrainer, Job
from dlbench.backends.tensorflow.models import mnist_cnn, to_framework_layout
from dlbench.backends.tensorflow.placement import by_name, tf_placement
from dlbench.results.details import Details
from dlbench.untyped import JSONObject
from dlbench.workloads.mnist_train import (
    ADADELTA_EPS,
    ADADELTA_RHO,
    EVAL_BATCH,
    LR_GAMMA,
    epoch_permutation,
    usable_train_samples,
)

if TYPE_CHECKING:
    from dlbench.data.mnist import MnistData


class TfMnistTrainer(EpochTrainer):
    def __init__(self, job: Job, data: MnistData, tf_device: str) -> None:
        from dlbench.data.mnist import normalised

        keras.utils.set_random_seed(job.seed)  # dropout and fit's shuffling
        self.tf_device, self.batch, self.seed = tf_device, job.batch_size, job.seed
        self.mode = job.case.compile
        self.used = usable_train_samples(len(data.train_labels), job.batch_size)
        self.base_lr = job.workload.learning_rate
        with tf.device(tf_device):
            self.model = mnist_cnn(job.workload.reference_weights(job.params, job.seed))
            images = normalised(data.train_images[: self.used])
            self.x = tf.constant(to_framework_layout("mnist-cnn", images))
            self.y = tf.constant(data.train_labels[: self.used])
            self.test_x = tf.constant(
                to_framework_layout("mnist-cnn", normalised(data.test_images))
            )
            self.test_y = tf.constant(data.test_labels)
            self.loss_sum = tf.Variable(0.0, dtype=tf.float32)
        self.optimizer = keras.optimizers.Adadelta(
            learning_rate=self.base_lr, rho=ADADELTA_RHO, epsilon=ADADELTA_EPS
        )
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        # where TensorFlow really placed the data and the weights, each of them,
        # checked against the case's device
        held = {"train x": self.x, "train y": self.y, "test x": self.test_x,
                "test y": self.test_y, "loss sum": self.loss_sum}  # fmt: skip
        placement = tf_placement({**held, **by_name(self.model.variables)})
        extra: JSONObject = {"keras": keras.__version__}
        if self.mode == "fit":
            # Keras's "auto" turns XLA on wherever a GPU exists; `fit` is the plain
            # Keras loop (like torch eager), and XLA is the "xla" mode's business
            self.model.compile(optimizer=self.optimizer, loss=self.loss_fn, jit_compile=False)
            extra["keras_jit_compile"] = bool(self.model.jit_compile)
            extra["data_pipeline"] = "Model.fit on in-memory tensors, shuffle=True"
        else:
            self.step = tf.function(self._step, jit_compile=self.mode == "xla")
            extra["data_pipeline"] = "in-memory tensors on the device, gathered per batch"
        self.details = Details(placement=placement, extra=extra)
        self.predict = tf.function(lambda x: self.model(x, training=False))

    def _step(self, rows: tf.Tensor) -> tf.Tensor:
        images, labels = tf.gather(self.x, rows), tf.gather(self.y, rows)
        with tf.GradientTape() as tape:
            loss = self.loss_fn(labels, self.model(images, training=True))
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        # summed on the device: the host reads it once per epoch
        self.loss_sum.assign_add(loss)
        return loss

    def train_epoch(self, epoch: int) -> float:
        self.optimizer.learning_rate.assign(self.base_lr * LR_GAMMA ** (epoch - 1))
        with tf.device(self.tf_device):
            if self.mode == "fit":
                history = self.model.fit(
                    self.x, self.y, batch_size=self.batch, epochs=1, shuffle=True, verbose=0
                )
                return float(history.history["loss"][-1])
            order = epoch_permutation(self.used, self.seed, epoch).reshape(-1, self.batch)
            batches = tf.unstack(tf.constant(order))
            self.loss_sum.assign(0.0)
            for index, rows in enumerate(batches):
                if epoch == 1 and index == 0:
                    started = time.perf_counter()
                    self.step(rows).numpy()  # traces and compiles: reported apart
                    first_step_ms = 1000.0 * (time.perf_counter() - started)
                    self.details = replace(self.details, first_step_ms=first_step_ms)
                else:
                    self.step(rows)
            return float(self.loss_sum.numpy()) / len(batches)  # waits for the last step

    def evaluate(self) -> tuple[float, float]:
        loss_sum, correct = 0.0, 0
        with tf.device(self.tf_device):
            for start in range(0, int(self.test_y.shape[0]), EVAL_BATCH):
                images = self.test_x[start : start + EVAL_BATCH]
                labels = self.test_y[start : start + EVAL_BATCH]
                log_probs = self.predict(images)
                picked = tf.gather(log_probs, labels, batch_dims=1)
                loss_sum -= float(tf.reduce_sum(picked).numpy())
                correct += int(tf.reduce_sum(tf.cast(tf.argmax(log_probs, 1) == labels, tf.int32)))
        count = int(self.test_y.shape[0])
        return loss_sum / count, correct / count
