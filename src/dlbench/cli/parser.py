"""The command line's grammar: subcommands, options and their value types."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar  # noqa: TID251  # ArgumentParser's arguments, passed on

from dlbench import __version__
from dlbench.errors import UserError
from dlbench.launch.fleet import STOP_GRACE_S
from dlbench.measure.openai_auth import API_KEY_ENV, API_KEY_OPTION
from dlbench.plan.build import TARGET_DEFAULT_EPOCHS
from dlbench.report.history import (
    DEFAULT_MAX_PVALUE,
    DEFAULT_MIN_CHANGE,
    DEFAULT_WINDOW,
)
from dlbench.report.history import ORDERS as HISTORY_ORDERS
from dlbench.report.table import TERMINAL_LAYOUT, WIDE_LAYOUT, number_header
from dlbench.results.metrics import COMPARABLE
from dlbench.results.store_location import store_location
from dlbench.spec import cli_options as spec_options
from dlbench.spec.case import MULTI_STREAM_SAMPLES, Case, Settings
from dlbench.spec.case_parts import MAX_MIN_TIME_S
from dlbench.spec.cli_options import CliOption, cli_options

LIST_TOPICS = ("frameworks", "workloads", "support", "suites")
DESCRIPTION = "dlbench: fair, reproducible deep-learning benchmarks"
# --wide's help names the columns it adds, from the table's own layouts (argparse
# formats help with %: a column's own % is doubled)
WIDE_HELP = (
    "every column of the results table ("
    + ", ".join(number_header(n) for n in WIDE_LAYOUT if n not in TERMINAL_LAYOUT)
    + "); piped output has them all"
).replace("%", "%%")
T = TypeVar("T")  # what a value reader makes of its text


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2, and an option that takes
    one value refuses a second (StoreOnce: every plain store action is one)."""

    # ArgumentParser's own arguments, passed on as they are (Any: its constructor types them)
    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        if hasattr(parsed, StoreOnce.GIVEN):
            delattr(parsed, StoreOnce.GIVEN)  # the options seen, kept only while parsing
        return parsed, rest

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{self.prog}: {message} (see --help)")


def argument_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """A value reader (spec.cli_options) as an argparse type: its ValueError, which says
    what was expected, becomes the usage error's text."""

    def read(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return read


positive_int = argument_type(spec_options.positive_int)
non_negative_float = argument_type(spec_options.non_negative_float)
positive_float = argument_type(spec_options.positive_float)
fraction = argument_type(spec_options.fraction)
at_least_two = argument_type(spec_options.NumberReader(int, lambda v: v >= 2, "an integer >= 2"))


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
    # read as `dlbench run`'s options of the same fields are
    roofline.add_argument(
        "--threads", "-t", type=run_type(Case, "threads"), help="intra-op threads"
    )
    roofline.add_argument(
        "--min-time",
        type=run_type(Settings, "min_time_s"),
        help="seconds of windows per ceiling figure",
    )
    roofline.add_argument(
        "--sustain",
        type=argument_type(spec_options.number_in(0.0, MAX_MIN_TIME_S)),
        help="seconds of continuous work before the sustained figures of the bf16 GEMM and "
        "copy (default: 10 on a GPU, 0 on a CPU)",
    )
    roofline.add_argument(
        "--timeout", type=run_type(Settings, "timeout_s"), help="seconds per case"
    )
    roofline.add_argument("--json", type=Path, dest="json_path", help="write the run as JSON")
    roofline.add_argument("--csv", type=Path, dest="csv_path", help="write the results as CSV")
    roofline.add_argument("--db", type=store_location, help=DB_HELP)
    roofline.add_argument("--quiet", "-q", action="store_true", help="no progress, table only")
    listing = commands.add_parser("list", help="workloads, frameworks or suites available here")
    listing.add_argument("topic", nargs="?", choices=LIST_TOPICS, default=None)
    env = commands.add_parser("env", help="this machine's fingerprint")
    env.add_argument("--json", action="store_true", help="print as JSON")
    show = commands.add_parser("show", help="print a stored run as a table")
    show.add_argument("run", help="a run JSON file, or a run id in the store")
    show.add_argument("--db", type=store_location, help=DB_HELP)
    show.add_argument(
        "--wide",
        action="store_true",
        help=WIDE_HELP,
    )
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
    add_fleet_parser(commands)
    return parser


DB_HELP = (
    "the store: an SQLite file, or a postgresql:// URL (default: $DLBENCH_DB, else "
    "dlbench.sqlite in the user data dir)"
)
CI_FORMATS = ("github-action-benchmark", "bmf")


def add_results_parsers(commands: argparse._SubParsersAction) -> None:
    runs = commands.add_parser("runs", help="list the runs in the store")
    runs.add_argument("--db", type=store_location, help=DB_HELP)
    export = commands.add_parser(
        "export", help="write a stored run as JSON and/or CSV, or in a CI service's format"
    )
    export.add_argument("run", help="run id (or a run JSON file)")
    export.add_argument("--json", type=Path, dest="json_path")
    export.add_argument("--csv", type=Path, dest="csv_path")
    export.add_argument(
        "--format",
        choices=CI_FORMATS,
        dest="ci_format",
        help="each case's headline metrics for github-action-benchmark (two files, one "
        "per direction: PATH's name with .bigger-is-better / .smaller-is-better) or "
        "Bencher (BMF), into --out PATH",
    )
    export.add_argument("--out", type=Path, dest="ci_out", metavar="PATH")
    export.add_argument("--db", type=store_location, help=DB_HELP)
    imported = commands.add_parser("import", help="add a run JSON file to the store")
    imported.add_argument("file", type=Path)
    imported.add_argument("--db", type=store_location, help=DB_HELP)
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
        help="exit 1 if a case is significantly slower by more than PCT%%; exit 2 if "
        "the runs share no case (nothing to gate)",
    )
    compare.add_argument("--db", type=store_location, help=DB_HELP)
    report = commands.add_parser("report", help="an HTML page and/or PNG charts of runs")
    report.add_argument("runs", nargs="+", help="run ids or run JSON files")
    report.add_argument("--html", type=Path, help="write one self-contained HTML page here")
    report.add_argument("--plots", type=Path, help="write the charts as PNG files here")
    report.add_argument("--db", type=store_location, help=DB_HELP)
    rerun = commands.add_parser("rerun", help="run a stored run's cases again and compare")
    rerun.add_argument("run", help="run id (or a run JSON file)")
    rerun.add_argument("--metric", default="latency", choices=COMPARABLE)
    rerun.add_argument("--db", type=store_location, help=DB_HELP)
    rerun.add_argument(
        "--label",
        type=argument_type(spec_options.run_label),
        metavar="TEXT",
        help="the new run's label (a commit, a version); the original's is not copied, "
        "since the code measured now may differ",
    )
    add_history_parser(commands)


def add_history_parser(commands: argparse._SubParsersAction) -> None:
    history = commands.add_parser(
        "history",
        help="a metric over stored runs, in time or --label order, with its change points "
        "(Apache Otava's E-divisive; pip install --no-deps apache-otava)",
    )
    history.add_argument(
        "target",
        metavar="SUITE-OR-CASE",
        help="a suite: each of its cases over its runs; or one case, by its label as "
        "history prints it or its key, over every run holding it",
    )
    history.add_argument("--metric", default="latency", choices=COMPARABLE)
    history.add_argument(
        "--order",
        choices=HISTORY_ORDERS,
        default="time",
        help="time: each run by its start; label: by run --label (digits as numbers), runs "
        "sharing a label one point (their median), runs without one left out",
    )
    history.add_argument("--html", type=Path, metavar="PATH", help="write a page of charts here")
    history.add_argument(
        "--window",
        type=at_least_two,
        default=DEFAULT_WINDOW,
        metavar="N",
        help=f"points one E-divisive pass sees (default {DEFAULT_WINDOW}, Otava's)",
    )
    history.add_argument(
        "--max-pvalue",
        type=fraction,
        default=DEFAULT_MAX_PVALUE,
        metavar="P",
        help=f"a change is kept below this p-value (default {DEFAULT_MAX_PVALUE:g}, Otava's)",
    )
    history.add_argument(
        "--min-change",
        type=non_negative_float,
        default=100 * DEFAULT_MIN_CHANGE,
        metavar="PCT",
        help=f"smallest change kept, in %% (default {100 * DEFAULT_MIN_CHANGE:g}, compare's)",
    )
    history.add_argument("--db", type=store_location, help=DB_HELP)


# The run command's --help sections, in order: (title, description). A Case or
# Settings field's option (spec.cli_options) names its section in `group`.
RUN_GROUPS: dict[str, tuple[str, str | None]] = {
    "case": (
        "cases",
        "with a suite (default: quick), --workload, --framework, --compile and --mode select "
        "among its cases, --scenario and --precision narrow what an entry declares (or set "
        "it), and the other options override the suite; with --workload and no suite, the "
        "cases are the product of the options given",
    ),
    "training": ("time-to-train (mnist-train)", None),
    "ddp": ("distributed training", None),
    "model": ("user model files", None),
    "serving": ("serving (MLPerf LoadGen; pip install 'dlbench[serving]')", None),
    "endpoint": (
        "LLM servers (pip install 'dlbench[llm-serving]')",
        "--endpoint URL sends llm-requests' synthetic requests (--param isl=, osl=, "
        "range_pct=, prefix_pct=, prefixes=, turns=, unsalted=) to an OpenAI-compatible server; "
        "--find-peak searches the highest load whose SLOs hold (docs/guides/llm-serving.md)",
    ),
    "measurement": (
        "measurement",
        "how every case of the run is measured; a suite's settings may set these too "
        "(min_time for --min-time), and the command line wins",
    ),
    "output": ("output and store", None),
}


def add_run_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run a suite (default: quick) or an ad-hoc matrix")
    run.add_argument("suite", nargs="?", help="built-in suite name or a suite .yaml file")
    groups = {
        key: run.add_argument_group(title, description)
        for key, (title, description) in RUN_GROUPS.items()
    }
    # every case axis and setting the command line sets, declared on its field;
    # its value lands in args.<field name> (cli.run_commands.request_from_args)
    for name, option in (*cli_options(Case), *cli_options(Settings)):
        add_field_option(groups[option.group], name, option)
    add_plan_options(groups)
    output = groups["output"]
    output.add_argument("--json", type=Path, dest="json_path", help="write the run as JSON")
    output.add_argument("--csv", type=Path, dest="csv_path", help="write the results as CSV")
    output.add_argument("--db", type=store_location, help=DB_HELP)
    output.add_argument("--quiet", "-q", action="store_true", help="no progress, table only")
    output.add_argument(
        "--wide",
        action="store_true",
        help=WIDE_HELP,
    )
    output.add_argument(
        "--resume",
        metavar="RUN",
        help="finish an interrupted run: its unfinished cases run, the rest stay",
    )
    output.add_argument(
        "--dry-run",
        action="store_true",
        help="check the plan (options, suite, model files) and list its cases; run nothing, "
        "store nothing",
    )
    add_study_options(output)


def add_field_option(group: argparse._ArgumentGroup, name: str, option: CliOption) -> None:
    """The option that sets Case or Settings field `name`, as its metadata declares it."""
    text = f"{option.help} (repeatable)" if option.repeat else option.help
    if option.switch:
        group.add_argument(*option.flags, dest=name, action="store_true", help=text)
        return
    group.add_argument(
        *option.flags,
        dest=name,
        action="append" if option.repeat else "store",
        default=[] if option.repeat else None,
        type=field_type(option, option.noun_for(name)),
        # the parser refuses other names; also what --help and shell completion offer
        choices=None if option.vocabulary is None else tuple(option.vocabulary),
        metavar=option.default_metavar(),
        help=text,
    )


class StoreOnce(argparse.Action):
    """A single-valued option given twice is refused, not overridden by its last value
    (`-t 1 -t 2` measured t=2 alone, where -w, -f and -b each build a matrix)."""

    # the namespace attribute naming the options given so far in this parse
    GIVEN = "_dlbench_given_once"

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,  # what the option's type made of its text
        option_string: str | None = None,
    ) -> None:
        given: set[str] = getattr(namespace, self.GIVEN, set())
        earlier = getattr(namespace, self.dest, None)
        if self.dest in given and earlier != values:
            flags = "/".join(self.option_strings)
            parser.error(
                f"{flags} takes one value, given {earlier} and {values}{_sweep_hint(self.dest)}"
            )
        setattr(namespace, self.GIVEN, given | {self.dest})
        setattr(namespace, self.dest, values)


def _sweep_hint(field: str) -> str:
    """Where --sweep builds the matrix a repeated option cannot: how to ask for it."""
    from dlbench.plan.sweeps import SWEEP_AXES

    axes = [axis for axis, (target, _) in SWEEP_AXES.items() if target == field]
    return f": for several, --sweep {axes[0]}=V1,V2" if axes else ""


def run_type(record: type, name: str) -> Callable[[str], object]:
    """The argparse type of `dlbench run`'s option of a Case or Settings field."""
    option = dict(cli_options(record))[name]
    return field_type(option, option.noun_for(name))


def field_type(option: CliOption, noun: str) -> Callable[[str], object]:
    """A field option's argparse type: its reader, then its vocabulary, refusing a name
    outside it as the plan does (`unknown compile mode 'x'; allowed: ...`), not with
    argparse's own wording."""
    read = argument_type(option.parse) if option.parse is not None else str
    vocabulary = option.vocabulary

    def parse(text: str) -> object:
        value = read(text)
        if vocabulary is not None and value not in vocabulary:
            allowed = ", ".join(vocabulary)
            raise argparse.ArgumentTypeError(f"unknown {noun} {value!r}; allowed: {allowed}")
        return value

    return parse


def add_plan_options(groups: dict[str, argparse._ArgumentGroup]) -> None:
    """The run's options that are no Case or Settings field: the plan builder reads them."""
    groups["case"].add_argument(
        "--sweep",
        action="append",
        default=[],
        type=sweep_spec,
        metavar="AXIS=V1,V2",
        help="several values of an axis, for latency-throughput curves: batch=1,8,64,512, "
        "threads=1,all, or an endpoint's users or requests/s (docs/guides/llm-serving.md) "
        "(repeatable, one per axis)",
    )
    groups["case"].add_argument(
        "--strict",
        action="store_true",
        help="refuse cases that would only be flagged: more threads than CPUs available",
    )
    groups["training"].add_argument(
        "--epochs",
        type=positive_int,
        help="epochs to train, or the most to train with --target-accuracy "
        f"(default 1; {TARGET_DEFAULT_EPOCHS} with a target)",
    )
    groups["model"].add_argument(
        "--input",
        action="append",
        default=[],
        type=input_spec,
        dest="inputs",
        metavar="NAME:SHAPE[:DTYPE]",
        help="shape of a model input, e.g. pixels:8x3x32x32:float32; NAME may hold colons "
        "(serving_default_x:0:1x224x224x3). A dynamic first dimension takes --batch-size",
    )
    groups["endpoint"].add_argument(
        API_KEY_OPTION,
        dest="api_key",
        metavar="KEY",
        help=f"sent as Authorization: Bearer KEY to a server started with an API key "
        f"(default: ${API_KEY_ENV}); never printed or stored",
    )
    groups["serving"].add_argument(
        "--samples-per-query",
        type=positive_int,
        metavar="N",
        help=f"multi-stream: samples per query (default {MULTI_STREAM_SAMPLES}, MLPerf's)",
    )


def add_study_options(parser: argparse._ActionsContainer) -> None:
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


def add_fleet_parser(commands: argparse._SubParsersAction) -> None:
    fleet = commands.add_parser(
        "fleet",
        help="a suite on every node of a Ray cluster, and the nodes side by side with "
        "their outliers (pip install 'dlbench[fleet]'; docs/guides/fleet.md)",
    )
    actions = fleet.add_subparsers(dest="fleet_command", required=True, parser_class=OneLineParser)
    run = actions.add_parser(
        "run",
        help="run SUITE on each alive node (one Ray task per node, pinned to it and holding "
        "all its CPUs and GPUs) and store each node's run; exit 1 if a node failed",
    )
    run.add_argument("suite", help="built-in suite name or a suite .yaml file (sent to the nodes)")
    run.add_argument(
        "--ray", required=True, metavar="ADDRESS", help="the Ray cluster: HOST:PORT of its "
        "head (as `ray start --head` prints it), or auto (the cluster on this machine)",
    )  # fmt: skip
    run.add_argument(
        "--resource", metavar="NAME", help="only the nodes with this custom Ray resource"
    )
    run.add_argument(
        "--node-label",
        type=argument_type(node_label),
        metavar="KEY=VALUE",
        help="only the nodes with this Ray node label (`ray start --labels`)",
    )
    run.add_argument(
        "--node-timeout",
        type=positive_float,
        metavar="S",
        help="seconds each node's run may take: the node stops it there, keeps the cases "
        "that finished, and is recorded as failed; one whose task has not answered "
        f"{STOP_GRACE_S:g} s later (counted from when it began), or has not begun by "
        "then (queued behind other work, unreachable), is given up (default: no limit)",
    )
    # every setting of `dlbench run` (how it measures, its --label), passed to each node's
    # run, in the sections `dlbench run --help` lists them in
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, option in cli_options(Settings):
        if option.group not in groups:
            groups[option.group] = run.add_argument_group(*RUN_GROUPS[option.group])
        add_field_option(groups[option.group], name, option)
    output = groups.get("output") or run.add_argument_group(*RUN_GROUPS["output"])
    output.add_argument("--db", type=store_location, help=DB_HELP)
    report = actions.add_parser(
        "report",
        help="the nodes of a fleet run side by side: ceilings, throughput per case, throttle "
        "flags, and outliers among nodes of the same hardware (median and MAD)",
    )
    report.add_argument("fleet", nargs="?", help="a fleet id (default: the newest fleet run)")
    report.add_argument("--db", type=store_location, help=DB_HELP)


def node_label(text: str) -> tuple[str, str]:
    """KEY=VALUE, a Ray node label (`ray start --labels`)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key, value
