"""PyTorch's MNIST time-to-train loop: the pytorch/examples recipe, data in memory.

The dataset sits on the device as one normalised tensor, and each step
gathers its batch by index (what a DataLoader over an in-memory dataset
hands over, without worker processes in the timing). The loss is summed on
the device and read once per epoch, so no step waits for the host.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as functional

from dlbench.backends.base import EpochTrainer, Job, placement
from dlbench.backends.torch.models import reference_module
from dlbench.backends.torch.precision import PrecisionPlan
from dlbench.results.details import Details
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


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class TorchMnistTrainer(EpochTrainer):
    def __init__(
        self, job: Job, data: MnistData, device: torch.device, precision: PrecisionPlan
    ) -> None:
        from dlbench.data.mnist import normalised

        torch.manual_seed(job.seed)  # dropout masks are reproducible too
        self.device, self.batch, self.seed = device, job.batch_size, job.seed
        self.used = usable_train_samples(len(data.train_labels), job.batch_size)
        self.module = reference_module("mnist-cnn", {}, job.seed).to(device)
        self.model = torch.compile(self.module) if job.case.compile == "compile" else self.module
        self.optimizer = torch.optim.Adadelta(
            self.module.parameters(), lr=job.workload.learning_rate, rho=ADADELTA_RHO,
            eps=ADADELTA_EPS,
        )  # fmt: skip
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, 1, gamma=LR_GAMMA)
        self.precision = precision
        self.x = torch.from_numpy(normalised(data.train_images[: self.used])).to(device)
        self.y = torch.from_numpy(data.train_labels[: self.used]).to(device)
        self.test_x = torch.from_numpy(normalised(data.test_images)).to(device)
        self.test_y = torch.from_numpy(data.test_labels).to(device)
        self.details = Details(
            placement=placement("torch tensors", str(self.x.device), self.x.device.type),
            extra={
                **precision.details,
                "data_pipeline": "in-memory tensors on the device, indexed per batch",
            },
        )

    def train_epoch(self, epoch: int) -> float:
        self.module.train()
        order = torch.from_numpy(epoch_permutation(self.used, self.seed, epoch))
        batches = order.to(self.device).view(-1, self.batch)
        total = torch.zeros((), device=self.device)
        autocast, scaler = self.precision.autocast, self.precision.scaler
        with torch.enable_grad():
            for index, rows in enumerate(batches):
                step_start = time.perf_counter()
                images, labels = self.x.index_select(0, rows), self.y.index_select(0, rows)
                self.optimizer.zero_grad(set_to_none=True)
                with autocast():
                    loss = functional.nll_loss(self.model(images), labels)
                if scaler is None:
                    loss.backward()
                    self.optimizer.step()
                else:
                    scaler.scale(loss).backward()
                    scaler.step(self.optimizer)
                    scaler.update()
                total += loss.detach().float()
                if epoch == 1 and index == 0:
                    # The first step compiles (torch.compile) and allocates:
                    # reported apart, like every case's first call.
                    _synchronise(self.device)
                    first_step_ms = 1000.0 * (time.perf_counter() - step_start)
                    self.details = replace(self.details, first_step_ms=first_step_ms)
        mean_loss = float(total) / len(batches)  # the one host sync of the epoch
        self.scheduler.step()
        return mean_loss

    def evaluate(self) -> tuple[float, float]:
        self.module.eval()
        loss_sum = torch.zeros((), device=self.device, dtype=torch.float64)
        correct = torch.zeros((), device=self.device, dtype=torch.int64)
        with torch.inference_mode(), self.precision.autocast():
            for start in range(0, len(self.test_y), EVAL_BATCH):
                images = self.test_x[start : start + EVAL_BATCH]
                labels = self.test_y[start : start + EVAL_BATCH]
                # the eager module: a last short batch must not recompile the graph
                output = self.module(images).float()
                loss_sum += functional.nll_loss(output, labels, reduction="sum")
                correct += (output.argmax(dim=1) == labels).sum()
        count = len(self.test_y)
        return float(loss_sum) / count, int(correct) / count
