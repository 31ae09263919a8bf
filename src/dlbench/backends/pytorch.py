"""The PyTorch backend: eager, torch.compile and TorchScript; inference and training."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dlbench.backends.base import Backend, CaseError, Job, Prepared
from dlbench.backends.torch_models import KERNELS, LOSSES, OPTIMIZERS, build_module


class TorchBackend(Backend):
    name = "torch"

    def version(self) -> str:
        return torch.__version__

    def configure_threads(self, intra_op: int, inter_op: int) -> dict[str, Any]:
        torch.set_num_threads(intra_op)
        # Settable once per process, before any inter-op work: the worker is fresh.
        torch.set_num_interop_threads(inter_op)
        return {
            "intra_op": torch.get_num_threads(),
            "inter_op": torch.get_num_interop_threads(),
        }

    def resolve_device(self, requested: str) -> str:
        if requested == "auto":
            return "cuda:0" if torch.cuda.is_available() else "cpu"
        if requested == "cpu":
            return "cpu"
        if not torch.cuda.is_available():
            raise CaseError(
                f"device {requested!r} asked for, but torch {torch.__version__} sees no CUDA "
                "device (CPU-only build or no GPU); use --device cpu or auto"
            )
        index = int(requested.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise CaseError(
                f"device {requested!r} asked for, but only {torch.cuda.device_count()} "
                "CUDA device(s) exist"
            )
        return f"cuda:{index}"

    def prepare(self, job: Job) -> Prepared:
        torch.manual_seed(job.seed)  # dropout masks in training are reproducible too
        device = torch.device(job.device)
        inputs = {
            name: torch.from_numpy(array).to(device)
            for name, array in job.workload.make_inputs(
                job.batch_size, job.params, job.case.mode, job.seed
            ).items()
        }
        if job.workload.name in KERNELS:
            step = self._kernel_step(job, inputs)
        elif job.case.mode == "train":
            step = self._train_step(job, inputs, device)
        else:
            step = self._infer_step(job, inputs, device)
        synced = _synchronised(step, device)
        inference = job.case.mode == "infer"
        return Prepared(
            step=synced,
            device=job.device,
            context=torch.inference_mode if inference else torch.enable_grad,
            details={"torch_device": str(device), "dtype": "float32"},
            fetch_output=(lambda: synced().detach().cpu().numpy()) if inference else None,
        )

    def _kernel_step(self, job: Job, inputs: dict[str, torch.Tensor]) -> Callable[[], object]:
        kernel = _compiled(KERNELS[job.workload.name], job.case.compile)
        a, b = inputs.values()
        # The output is allocated once here, so the step times the kernel alone.
        out = torch.empty(torch.broadcast_shapes(a.shape, b.shape), device=a.device)
        return lambda: kernel(a, b, out)

    def _infer_step(
        self, job: Job, inputs: dict[str, torch.Tensor], device: torch.device
    ) -> Callable[[], object]:
        module = self._module(job, device).eval()
        model = _compiled(module, job.case.compile)
        x = inputs["x"]
        return lambda: model(x)

    def _train_step(
        self, job: Job, inputs: dict[str, torch.Tensor], device: torch.device
    ) -> Callable[[], object]:
        module = self._module(job, device).train()
        model = _compiled(module, job.case.compile)
        loss_fn = LOSSES[job.workload.loss]
        optimizer = OPTIMIZERS[job.workload.optimizer](
            module.parameters(), lr=job.workload.learning_rate
        )
        x, target = inputs["x"], inputs["target"]

        def step() -> torch.Tensor:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), target)
            loss.backward()
            optimizer.step()
            return loss

        return step

    def _module(self, job: Job, device: torch.device) -> torch.nn.Module:
        weights = job.workload.reference_weights(job.params, job.seed)
        return build_module(job.workload.name, weights).to(device)


def _compiled(fn: Any, mode: str) -> Any:
    """Wrap a module or function for the compile mode; compilation itself is lazy."""
    if mode == "eager":
        return fn
    if mode == "compile":
        return torch.compile(fn)
    if mode == "script":
        return torch.jit.script(fn)
    raise CaseError(f"torch has no compile mode {mode!r}")


def _synchronised(step: Callable[[], object], device: torch.device) -> Callable[[], object]:
    """On CUDA, wait for the kernels the step queued; on CPU, torch is synchronous."""
    if device.type != "cuda":
        return step

    def synced() -> object:
        out = step()
        torch.cuda.synchronize(device)
        return out

    return synced
