"""The parts of a case that only some cases have: a user's model file (a Case holds it,
or None), and the loads of the time-to-train and DDP kinds of loop (a case of that kind
holds it as its `load`; the serving kinds' are spec.loads'). Their fields are written
beside the case's own, under the names case files have always used (spec.record_dict:
FLATTENED), so a case's JSON and its key are what they were; planning builds a case
from those flat names (Case.of).

Also the field metadata every part of a case uses: whether a field is part of the
key, and whether a suite entry may set it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlbench.spec import record_dict
from dlbench.spec.cli_options import (
    NumberReader,
    cli,
    fraction,
    integer_in,
    resolved_path,
    shell_words,
)

# Field metadata. "key": False leaves a field out of Case.key() (how it was
# launched, or a path whose content digest is the identity instead); "suite":
# True lets a suite entry set it (plan.suites reads this).
LAUNCH_DETAIL = {"key": False}
SUITE_AXIS = {"suite": True}
# "required": a stored result must carry it: its default would change with
# the reader (threads: the reading machine's CPUs) or silently pick a case.
RECORDED_AXIS = {"suite": True, record_dict.REQUIRED: True}
# A field that changes a built-in workload's inputs: spec.case_inputs carries its value
# to every place that makes them (workloads.inputs.case_arrays) and into the
# reference's cache key, e.g. `metadata=SUITE_AXIS | INPUT_AXIS | cli(...)`.
INPUTS_KEY = "inputs"
INPUT_AXIS = {INPUTS_KEY: True}
# "cli" (spec.cli_options.cli): the `dlbench run` option that sets the field;
# the parser and the plan's RunRequest are built from it.

# Bounds that keep values sane and below what the OS and frameworks accept, each the
# range of its fields' option readers (spec.cli_options), which planning holds every
# value to: the settings' (spec.case.Settings), then a case's and its parts'
MAX_MIN_TIME_S = 86_400.0
MAX_TIMEOUT_S = 7 * 86_400.0
MAX_SEED = 2**32 - 1
MAX_THREADS = 1024
MAX_BATCH = 2**31 - 1
# processes per case: more is a different experiment, not a benchmark run
MAX_REPEAT = 100
MAX_NPROC = 1024
MAX_STREAMS = 1024
MAX_TARGET_QPS = 1e7
MAX_LATENCY_BOUND_MS = MAX_MIN_TIME_S * 1000.0
# the most users, and requests a second, an endpoint's load may ask for
MAX_USERS = 1 << 16
MAX_RATE = float(1 << 20)
# The server scenario's latency bound where none is given: MLPerf's default
# (mlperf.conf: *.Server.target_latency = 10) at its 99th percentile.
DEFAULT_LATENCY_BOUND_MS = 10.0
DEFAULT_LATENCY_PERCENTILE = 99.0
# The percentiles LoadGen's detail log reports (results.cc): a bound held at any
# other percentile could not be shown beside the verdict.
LOADGEN_PERCENTILES = (50.0, 90.0, 95.0, 97.0, 99.0, 99.9)
LOADGEN_PERCENTILES_TEXT = ", ".join(f"{p:g}" for p in LOADGEN_PERCENTILES)
loadgen_percentile = NumberReader(
    float,
    lambda v: v in LOADGEN_PERCENTILES,
    f"one of the percentiles LoadGen reports: {LOADGEN_PERCENTILES_TEXT}",
)
# The percentile an endpoint's SLO bounds hold at, where none is given (MLPerf's LLM
# benchmarks hold TTFT and TPOT at their 99th)
DEFAULT_SLO_PERCENTILE = 99.0


@dataclass(frozen=True)
class UserModel:
    """A user's model file under benchmark (`dlbench run --model`): the file (its
    content digest is the identity), the --input specs (name -> "8x3x32x32:dtype"),
    the trust to unpickle it, and the arrays fed to it (--input-data: an .npz by input
    name, or an .npy, identified by their content digest)."""

    model: str = field(
        metadata=LAUNCH_DETAIL
        | cli(
            "--model",
            group="model",
            help="benchmark a model file on every framework that can run it: ONNX, "
            "TorchScript, torch.export .pt2, Keras .keras/.h5, a SavedModel dir, OpenVINO IR "
            ".xml, TFLite (the format is read from the content, not the extension)",
        ),
    )
    model_digest: str | None = None
    # --input's reader lives with the user-model workload (above this room), so
    # cli.parser declares that option itself
    inputs: tuple[tuple[str, str], ...] = ()
    trust_model: bool = field(
        default=False,
        metadata=LAUNCH_DETAIL
        | cli(
            "--trust-model",
            switch=True,
            group="model",
            help="allow loading a model file that needs unpickling (runs code from the file)",
        ),
    )
    input_data: str | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--input-data",
            metavar="FILE",
            group="model",
            help="the model's input values: an .npz of arrays by input name (a 0-d array for "
            "a scalar), or an .npy for a single-input model; every framework gets the same "
            "values",
        ),
    )
    input_data_digest: str | None = None


@dataclass(frozen=True)
class TimeToTrain:
    """A time-to-train case's (an epoch workload's) stop and data: stop early at this
    test accuracy, and read MNIST's IDX files from this folder (identified by the
    files' digest) instead of the synthetic set (data_digest None)."""

    target_accuracy: float | None = field(
        default=None,
        metadata=cli(
            "--target-accuracy",
            parse=fraction,
            group="training",
            help="stop at this test accuracy (0-1, e.g. 0.98) and report the time",
        ),
    )
    data_dir: str | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--data-dir",
            parse=resolved_path,
            group="training",
            help="folder with MNIST's four IDX files (.gz or not); default: a learnable "
            "synthetic set, labelled as such",
        ),
    )
    data_digest: str | None = None


@dataclass(frozen=True)
class DdpLaunch:
    """DistributedDataParallel training: processes launched by torchrun (one per GPU;
    gloo processes on a CPU), and torchrun options for multi-node runs. `ddp` is True
    for every torchrun case; --nproc 1 makes one with one rank (DDP's own cost, and
    NCCL on a single GPU) beside the plain process, which has no such part."""

    nproc: int = field(
        default=1,
        metadata=cli(
            "--nproc",
            "--gpus",
            parse=integer_in(1, MAX_NPROC),
            metavar="N",
            group="ddp",
            help="train with DistributedDataParallel in N processes launched by torchrun "
            "(one per GPU; gloo on a CPU), beside the same case in 1 process for scaling",
        ),
    )
    ddp: bool = False
    torchrun_args: tuple[str, ...] = field(
        default=(),
        metadata=LAUNCH_DETAIL
        | cli(
            "--torchrun",
            parse=shell_words,
            metavar="ARGS",
            group="ddp",
            help='torchrun options for multi-node runs, e.g. "--nnodes 2 --rdzv-backend c10d '
            '--rdzv-endpoint host:29400" (default: --standalone)',
        ),
    )
