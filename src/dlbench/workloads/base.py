"""The Workload base class shared by all built-in workloads."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from dlbench.errors import UserError
from dlbench.spec.registry import ENDPOINT_WORKLOAD, EPOCH_WORKLOADS, LLM_WORKLOADS

if TYPE_CHECKING:
    import numpy as np

WeightDict = dict[str, "np.ndarray"]
# Compile modes that are a whole training loop (Keras Model.fit), not a step.
EPOCH_LOOP_MODES = ("fit",)
# Compile modes that are a whole generation loop (torch's device-loop), not a step.
GENERATION_LOOP_MODES = ("device-loop",)


class Workload(ABC):
    """A model or kernel, its cost model and its data, independent of framework.

    Weight arrays use PyTorch's layout (Linear weight is [out, in], Conv2d
    weight is [out, in, kh, kw]); backends of other layouts transpose.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    modes: ClassVar[tuple[str, ...]] = ("infer", "train")
    # Workload parameters (ints) and their defaults per device kind.
    cpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({})
    gpu_params: ClassVar[Mapping[str, int]] = MappingProxyType({})
    cpu_batch_size: ClassVar[int] = 1
    gpu_batch_size: ClassVar[int] = 1
    # The rate reports lead with: "gflops" (compute-bound) or "gbps" (memory-bound).
    primary_metric: ClassVar[str] = "gflops"
    # Training recipe, named so every framework builds the same one.
    loss: ClassVar[str] = "none"
    optimizer: ClassVar[str] = "sgd"
    learning_rate: ClassVar[float] = 0.01

    def default_batch_size(self, device: str, params: Mapping[str, int] | None = None) -> int:
        """The batch a case gets where none is given, on a device kind ("cpu" or a
        GPU's) at its resolved parameters (a workload may size it by them)."""
        return self.cpu_batch_size if device == "cpu" else self.gpu_batch_size

    def resolve_params(self, device: str, given: Mapping[str, int]) -> dict[str, int]:
        """Defaults for the device the case landed on, overridden by `given`."""
        defaults = self.cpu_params if device == "cpu" else self.gpu_params
        return {**defaults, **given}

    def validate_params(self, given: Mapping[str, int]) -> None:
        allowed = set(self.cpu_params)
        for key, value in given.items():
            if key not in allowed:
                names = ", ".join(sorted(allowed)) or "none"
                raise UserError(
                    f"workload {self.name!r} has no parameter {key!r}; allowed: {names}"
                )
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise UserError(
                    f"workload {self.name!r} parameter {key}={value!r}; expected an integer > 0"
                )

    @abstractmethod
    def flops_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        """Floating-point operations for one sample (multiply-add = 2 FLOPs).

        Training counts forward + backward as 3x the forward pass, the usual
        approximation (backward computes gradients for inputs and weights).
        """

    def bytes_per_sample(
        self, params: Mapping[str, int], mode: str, value_bytes: int
    ) -> float | None:
        """Bytes moved to and from memory per sample, for memory-bound workloads, with
        each value stored in `value_bytes` (the case's precision: spec.registry.Precision)."""
        return None

    # The model's weights (counted from the torch reference); 0 for a kernel.
    parameter_count: ClassVar[int] = 0

    @abstractmethod
    def input_bytes_per_sample(self, params: Mapping[str, int], mode: str) -> float:
        """Bytes of one sample's inputs (and targets, in training) as `make_inputs`
        makes them: every framework's worker holds them in NumPy first."""

    def memory_bytes(
        self,
        batch_size: int,
        params: Mapping[str, int],
        mode: str,
        value_bytes: int,
        data_files: bool = False,
    ) -> float:
        """A lower bound on the memory a case holds at once (plan.memory checks it
        before a run): the weights as float32 (autocast keeps them so, whatever
        `value_bytes` its precision stores operands in) and one batch of inputs.

        Activations, gradients, optimizer state, the framework's own copies and the
        framework itself come on top: a case within it may still run out of memory
        (and fails as a case), one beyond it cannot run anywhere. `data_files`: the
        case reads its data set from files (--data-dir), not from its parameters.
        """
        return 4.0 * self.parameter_count + batch_size * self.input_bytes_per_sample(params, mode)

    def reference_weights(self, params: Mapping[str, int], seed: int) -> WeightDict:
        """Seeded weights every backend loads, so all compute the same function."""
        return {}

    def kernel_check(self, inputs: WeightDict, output: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(expected, actual) for a spot check of a kernel, computed in NumPy.

        Model workloads are checked against the torch reference instead
        (dlbench.reference.builtin); only kernels (add, gemm) implement this.
        """
        raise NotImplementedError

    is_kernel: ClassVar[bool] = False

    # Which kind of loop runs the workload is the registry's fact (spec.loop_kinds
    # decides a case's kind from it), read here by name.
    @property
    def epoch_based(self) -> bool:
        """Time-to-train: epochs over a data set (with evaluation), not one step timed."""
        return self.name in EPOCH_WORKLOADS

    @property
    def generative(self) -> bool:
        """Text generation: whole generations timed token by token (worker.generation)."""
        return self.name in LLM_WORKLOADS

    @property
    def served(self) -> bool:
        """Requests to a server (--endpoint): nothing runs in the worker but the client."""
        return self.name == ENDPOINT_WORKLOAD

    # framework -> the compile modes this workload runs in there (default: all of
    # the framework's modes except the epoch-loop-only ones).
    compile_modes: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType({})

    def compile_modes_on(self, framework: str, framework_modes: tuple[str, ...]) -> tuple[str, ...]:
        if framework in self.compile_modes:
            return self.compile_modes[framework]
        loops = (*EPOCH_LOOP_MODES, *GENERATION_LOOP_MODES)
        return tuple(m for m in framework_modes if m not in loops)

    # torch "script" mode: torch.jit.script if True, else torch.jit.trace
    torch_scriptable: ClassVar[bool] = True
    # How an int8 result is held to fp32's (worker.quantized_check): "top1" (a
    # classifier's argmax), "threshold" (a probability at 0.5), "cosine" (features)
    int8_agreement: ClassVar[str] = "top1"
    # quantizers treat transformers apart (NNCF's TRANSFORMER model type)
    transformer: ClassVar[bool] = False

    @abstractmethod
    def make_inputs(
        self, batch_size: int, params: Mapping[str, int], mode: str, seed: int
    ) -> WeightDict:
        """Deterministic synthetic inputs (and targets, in train mode)."""


def training_flops(forward_flops: float, mode: str) -> float:
    return 3.0 * forward_flops if mode == "train" else forward_flops


def linear_init(rng: np.random.Generator, fan_in: int, shape: tuple[int, ...]) -> np.ndarray:
    """PyTorch's default uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) init, in float32."""
    import numpy as np

    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)
