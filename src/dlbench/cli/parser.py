"""The command line's grammar: subcommands, options and their value types."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from dlbench import __version__
from dlbench.errors import UserError
from dlbench.plan.build import TARGET_DEFAULT_EPOCHS
from dlbench.results.metrics import COMPARABLE
from dlbench.spec.case import (
    DEFAULT_LATENCY_BOUND_MS,
    DEFAULT_LATENCY_PERCENTILE,
    LOADGEN_PERCENTILES,
    LOADGEN_PERCENTILES_TEXT,
    MULTI_STREAM_SAMPLES,
    OFFICIAL_MIN_TIME_S,
)

LIST_TOPICS = ("frameworks", "workloads", "support", "suites")
DESCRIPTION = "dlbench: fair, reproducible deep-learning benchmarks"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{self.prog}: {message} (see --help)")


def number_type(
    convert: Callable[[str], Any], accept: Callable[[Any], bool], expected: str
) -> Callable[[str], Any]:
    """An argparse type: `convert` the text, and refuse what `accept` does not,
    saying what was expected (nan is refused by every comparison)."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text}")
        return value

    return parse


positive_int = number_type(int, lambda v: v > 0, "an integer > 0")
non_negative_float = number_type(float, lambda v: v >= 0, "a number >= 0")
positive_float = number_type(float, lambda v: 0 < v < math.inf, "a number > 0")
percentile = number_type(
    float,
    lambda v: v in LOADGEN_PERCENTILES,
    f"one of the percentiles LoadGen reports: {LOADGEN_PERCENTILES_TEXT}",
)
fraction = number_type(float, lambda v: 0 < v <= 1, "a fraction in (0, 1]")


def input_spec(text: str) -> tuple[str, str]:
    from dlbench.workloads.user_model import parse_input_option

    try:
        return parse_input_option(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def sweep_spec(text: str) -> tuple[str, tuple[int, ...]]:
    from dlbench.plan.sweeps import parse_sweep

    try:
        return parse_sweep(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def param_pair(text: str) -> tuple[str, int]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=INT, got {text!r}")
    return key, positive_int(value)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="dlbench", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"dlbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    add_run_parser(commands)
    roofline = commands.add_parser(
        "roofline",
        help="measure this machine's ceilings (GEMM FLOP/s per precision, memory and "
        "host-to-device GB/s); later runs report efficiency against them",
    )
    roofline.add_argument("--device", "-d", help="cpu, cuda, cuda:N or auto (default: auto)")
    roofline.add_argument("--threads", "-t", type=positive_int, help="intra-op threads")
    roofline.add_argument("--min-time", type=non_negative_float, help="seconds per ceiling")
    roofline.add_argument("--timeout", type=non_negative_float, help="seconds per case")
    roofline.add_argument("--json", type=Path, dest="json_path", help="write the run as JSON")
    roofline.add_argument("--csv", type=Path, dest="csv_path", help="write the results as CSV")
    roofline.add_argument("--db", type=Path, help=DB_HELP)
    roofline.add_argument("--quiet", "-q", action="store_true", help="no progress, table only")
    listing = commands.add_parser("list", help="workloads, frameworks or suites available here")
    listing.add_argument("topic", nargs="?", choices=LIST_TOPICS, default=None)
    env = commands.add_parser("env", help="this machine's fingerprint")
    env.add_argument("--json", action="store_true", help="print as JSON")
    show = commands.add_parser("show", help="print a stored run as a table")
    show.add_argument("run", help="a run JSON file, or a run id in the store")
    show.add_argument("--db", type=Path, help="store file (default: $DLBENCH_DB or user data dir)")
    add_study_options(show)
    inspect = commands.add_parser(
        "inspect",
        help="what a model file is: its format (read from the content), inputs and outputs, "
        "and which installed frameworks can load it (and why not)",
    )
    inspect.add_argument("model", type=Path, help="a model file or SavedModel directory")
    inspect.add_argument(
        "--trust-model",
        action="store_true",
        help="allow loading a file that needs unpickling (runs code from the file)",
    )
    inspect.add_argument("--json", action="store_true", help="print as JSON")
    add_results_parsers(commands)
    return parser


DB_HELP = "store file (default: $DLBENCH_DB or user data dir)"


def add_results_parsers(commands: argparse._SubParsersAction) -> None:
    runs = commands.add_parser("runs", help="list the runs in the store")
    runs.add_argument("--db", type=Path, help=DB_HELP)
    export = commands.add_parser("export", help="write a stored run as JSON and/or CSV")
    export.add_argument("run", help="run id (or a run JSON file)")
    export.add_argument("--json", type=Path, dest="json_path")
    export.add_argument("--csv", type=Path, dest="csv_path")
    export.add_argument("--db", type=Path, help=DB_HELP)
    imported = commands.add_parser("import", help="add a run JSON file to the store")
    imported.add_argument("file", type=Path)
    imported.add_argument("--db", type=Path, help=DB_HELP)
    compare = commands.add_parser("compare", help="compare runs case by case, or pivot many")
    compare.add_argument("runs", nargs="+", help="run ids or run JSON files")
    compare.add_argument("--metric", default="latency", choices=COMPARABLE)
    compare.add_argument(
        "--by",
        choices=("machine", "framework", "compile", "hardware"),
        help="pivot any number of runs: one row per machine/framework/compile; hardware: "
        "the first seed article's table (add it/s per machine, with GB/s and efficiency)",
    )
    compare.add_argument("--baseline", help="row the relative values divide by (--by)")
    compare.add_argument(
        "--fail-on-regression",
        type=non_negative_float,
        metavar="PCT",
        help="exit 1 if a case is significantly slower by more than PCT%%",
    )
    compare.add_argument("--db", type=Path, help=DB_HELP)
    report = commands.add_parser("report", help="an HTML page and/or PNG charts of runs")
    report.add_argument("runs", nargs="+", help="run ids or run JSON files")
    report.add_argument("--html", type=Path, help="write one self-contained HTML page here")
    report.add_argument("--plots", type=Path, help="write the charts as PNG files here")
    report.add_argument("--db", type=Path, help=DB_HELP)
    rerun = commands.add_parser("rerun", help="run a stored run's cases again and compare")
    rerun.add_argument("run", help="run id (or a run JSON file)")
    rerun.add_argument("--metric", default="latency", choices=COMPARABLE)
    rerun.add_argument("--db", type=Path, help=DB_HELP)


def add_run_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run a suite (default: quick) or an ad-hoc matrix")
    run.add_argument("suite", nargs="?", help="built-in suite name or a suite .yaml file")
    run.add_argument("--workload", "-w", action="append", default=[], help="repeatable")
    run.add_argument("--framework", "-f", action="append", default=[], help="repeatable")
    run.add_argument(
        "--compile",
        "-c",
        action="append",
        default=[],
        dest="compiles",
        help="compile mode, e.g. eager, compile, script (repeatable)",
    )
    run.add_argument("--mode", "-m", action="append", default=[], help="infer or train")
    run.add_argument(
        "--scenario",
        "-s",
        action="append",
        default=[],
        help="single-stream (batch 1, latency), offline (large batches, throughput), or with "
        "MLPerf LoadGen: multi-stream (a query of N samples after the last) or server "
        "(Poisson arrivals at --target-qps, or --find-peak)",
    )
    run.add_argument("--device", "-d", help="cpu, cuda, cuda:N or auto (default: auto)")
    run.add_argument(
        "--precision",
        "-p",
        action="append",
        default=[],
        dest="precisions",
        help="fp32 (strict, default), tf32, amp-fp16, amp-bf16 (torch), int8 or int8-dynamic "
        "(post-training quantization: onnxruntime, openvino, torch) (repeatable)",
    )
    run.add_argument("--batch-size", "-b", action="append", default=[], type=positive_int)
    run.add_argument(
        "--threads", "-t", type=positive_int, help="intra-op threads (default: all CPUs available)"
    )
    run.add_argument(
        "--interop-threads", type=positive_int, help="inter-op threads (default: same as --threads)"
    )
    run.add_argument(
        "--sweep",
        action="append",
        default=[],
        type=sweep_spec,
        metavar="AXIS=V1,V2",
        help="several values of an axis, for latency-throughput curves: batch=1,8,64,512 "
        "or threads=1,all (repeatable, one per axis)",
    )
    run.add_argument(
        "--param",
        action="append",
        default=[],
        type=param_pair,
        help="workload parameter KEY=INT, e.g. size=2048",
    )
    run.add_argument(
        "--transfer",
        choices=("outside", "inside"),
        help="GPU cases: copy the inputs host-to-device before timing (outside, default) "
        "or in every timed step (inside)",
    )
    run.add_argument(
        "--nproc",
        "--gpus",
        type=positive_int,
        help="train with DistributedDataParallel in N processes launched by torchrun "
        "(one per GPU; gloo on a CPU), beside the same case in 1 process for scaling",
    )
    run.add_argument(
        "--torchrun",
        metavar="ARGS",
        help='torchrun options for multi-node runs, e.g. "--nnodes 2 --rdzv-backend c10d '
        '--rdzv-endpoint host:29400" (default: --standalone)',
    )
    run.add_argument(
        "--epochs",
        type=positive_int,
        help="time-to-train workloads (mnist-train): epochs to train, or the most to train "
        f"with --target-accuracy (default 1; {TARGET_DEFAULT_EPOCHS} with a target)",
    )
    run.add_argument(
        "--target-accuracy",
        type=fraction,
        help="time-to-train: stop at this test accuracy (0-1, e.g. 0.98) and report the time",
    )
    run.add_argument(
        "--data-dir",
        type=Path,
        help="time-to-train: folder with MNIST's four IDX files (.gz or not); "
        "default: a learnable synthetic set, labelled as such",
    )
    run.add_argument("--min-time", type=non_negative_float, help="seconds of measured time")
    run.add_argument("--min-iters", type=positive_int, help="measured iterations at least")
    run.add_argument(
        "--repeat",
        type=positive_int,
        help="run each case in N fresh worker processes, round-robin over the cases; "
        "compare needs several per side for a verdict (default 1; suites may set it)",
    )
    run.add_argument("--warmup", type=int, help="warm-up iterations after the first call")
    run.add_argument("--timeout", type=non_negative_float, help="seconds per case (default 600)")
    run.add_argument("--seed", type=int, help="seed for weights and inputs (default 0)")
    run.add_argument("--json", type=Path, dest="json_path", help="write the run as JSON")
    run.add_argument("--csv", type=Path, dest="csv_path", help="write the results as CSV")
    run.add_argument("--db", type=Path, help="store file (default: $DLBENCH_DB or user data dir)")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress, table only")
    run.add_argument(
        "--strict",
        action="store_true",
        help="refuse cases that would only be flagged: more threads than CPUs available",
    )
    add_model_options(run)
    add_serving_options(run)
    run.add_argument(
        "--resume",
        metavar="RUN",
        help="finish an interrupted run: its unfinished cases run, the rest stay",
    )
    add_study_options(run)


def add_serving_options(run: argparse.ArgumentParser) -> None:
    serving = run.add_argument_group("serving (MLPerf LoadGen; pip install 'dlbench[serving]')")
    serving.add_argument(
        "--loadgen",
        action="store_true",
        help="drive single-stream and offline cases with LoadGen instead of dlbench's step "
        "loop (multi-stream and server always use it)",
    )
    serving.add_argument(
        "--target-qps",
        type=positive_float,
        metavar="Q",
        help="server: the Poisson arrival rate, queries per second",
    )
    serving.add_argument(
        "--find-peak",
        action="store_true",
        help="server: search for the highest rate whose latency percentile keeps the bound",
    )
    serving.add_argument(
        "--latency-bound-ms",
        type=positive_float,
        metavar="L",
        help=f"server: the latency bound in ms (default {DEFAULT_LATENCY_BOUND_MS:g}, MLPerf's)",
    )
    serving.add_argument(
        "--latency-percentile",
        type=percentile,
        metavar="P",
        help="server: the percentile held to the bound "
        f"({LOADGEN_PERCENTILES_TEXT}; "
        f"default {DEFAULT_LATENCY_PERCENTILE:g})",
    )
    serving.add_argument(
        "--streams",
        type=positive_int,
        help="server: queries served at once, each with threads/streams threads "
        "(default: one single-threaded stream per CPU thread; 1 on a GPU)",
    )
    serving.add_argument(
        "--samples-per-query",
        type=positive_int,
        metavar="N",
        help=f"multi-stream: samples per query (default {MULTI_STREAM_SAMPLES}, MLPerf's)",
    )
    serving.add_argument(
        "--official",
        action="store_true",
        help=f"LoadGen cases: MLPerf's minimum duration ({OFFICIAL_MIN_TIME_S:g} s) "
        "instead of short runs",
    )


def add_model_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--model",
        help="benchmark a model file on every framework that can run it: ONNX, TorchScript, "
        "torch.export .pt2, Keras .keras/.h5, a SavedModel dir, OpenVINO IR .xml, TFLite "
        "(the format is read from the content, not the extension)",
    )
    run.add_argument(
        "--input",
        action="append",
        default=[],
        type=input_spec,
        dest="inputs",
        metavar="NAME:SHAPE[:DTYPE]",
        help="shape of a model input, e.g. pixels:8x3x32x32:float32; NAME may hold colons "
        "(serving_default_x:0:1x224x224x3). A dynamic first dimension takes --batch-size",
    )
    run.add_argument(
        "--input-data",
        metavar="FILE",
        help="the model's input values: an .npz of arrays by input name (a 0-d array for a "
        "scalar), or an .npy for a single-input model; every framework gets the same values",
    )
    run.add_argument(
        "--trust-model",
        action="store_true",
        help="allow loading a model file that needs unpickling (runs code from the file)",
    )


def add_study_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plots", type=Path, help="write the study's bar charts (PNG) and CSV here"
    )
    parser.add_argument(
        "--baseline",
        default="torch",
        help="framework the relative columns divide by (default: torch)",
    )
    parser.add_argument(
        "--latency-budget-ms",
        type=positive_float,
        metavar="MS",
        help="print, per workload, the configuration with the most samples/s whose p99 "
        "stays within MS (with its accuracy cost where it was quantized)",
    )
