"""`dlbench list`, `env`, `show` and `inspect`: what is here, a stored run, a model file."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from rich.table import Table

from dlbench.atomic import check_output_folder
from dlbench.cli.terminal import out, print_json, print_run, print_study, say
from dlbench.errors import UserError
from dlbench.report.server_side import server_table
from dlbench.report.table import escape_markup, readable
from dlbench.results.lookup import load_run
from dlbench.spec.case import MODES
from dlbench.spec.model_signature import InputSpec
from dlbench.spec.registry import FRAMEWORKS, WORKLOADS, FrameworkInfo
from dlbench.workloads import get_workload


def cmd_list(args: argparse.Namespace) -> int:
    tables = {
        "frameworks": frameworks_table,
        "workloads": workloads_table,
        "support": support_table,
        "suites": suites_table,
    }
    for topic in [args.topic] if args.topic else list(tables):
        out.print(tables[topic]())
    return 0


def support_table() -> Table:
    """Which frameworks run each workload, by mode ('-': none). A row a workload and the
    frameworks listed in its cells, which wrap between names: a framework a column
    made eleven columns that a terminal cut to `onnxrun…`."""
    table = Table(title="support (frameworks per workload and mode)")
    table.add_column("workload", no_wrap=True)
    for mode in MODES:
        table.add_column(mode, overflow="fold")
    for workload in WORKLOADS:
        own = get_workload(workload).modes
        cells = [
            ", ".join(name for name, info in FRAMEWORKS.items() if info.supports(workload, mode))
            if mode in own
            else ""
            for mode in MODES
        ]
        cells = [cell or "-" for cell in cells]
        table.add_row(workload, *cells)
    return table


def frameworks_table() -> Table:
    table = Table(title="frameworks")
    table.add_column("name", no_wrap=True)
    for name in ("installed", "compile modes", "options (--option)", "about"):
        table.add_column(name, overflow="fold")
    for info in FRAMEWORKS.values():
        version = info.installed_version()
        missing = info.missing()
        if version:
            status = f"[green]{escape_markup(version)}[/green]"  # as the package says
        elif missing and missing[0] not in info.distributions:  # itself here, a piece not
            status = (
                f"[yellow]not ready[/yellow]: {escape_markup(', '.join(missing))} missing "
                f"({escape_markup(info.install_hint)})"
            )
        else:
            status = f"[red]no[/red] ({escape_markup(info.install_hint)})"
        table.add_row(
            info.name, status, ", ".join(info.compile_modes), framework_options(info), info.label
        )
    return table


def framework_options(info: FrameworkInfo) -> str:
    """A framework's own options as `--option` takes them: KEY=a|b for a choice, KEY=N
    for a number (plan.validate reads the same entry), '-' where it has none."""
    return (
        ", ".join(
            f"{key}={'|'.join(values) if isinstance(values, tuple) else 'N'}"
            for key, values in info.options.items()
        )
        or "-"
    )


def workloads_table() -> Table:
    table = Table(title="workloads")
    table.add_column("name", no_wrap=True)
    for name in ("modes", "default batch (cpu/gpu)", "params (cpu / gpu)", "about"):
        table.add_column(name, overflow="fold")
    for name in WORKLOADS:
        w = get_workload(name)
        params = f"{_pairs(w.cpu_params)} / {_pairs(w.gpu_params)}"
        table.add_row(
            name,
            ", ".join(w.modes),
            f"{w.cpu_batch_size}/{w.gpu_batch_size}",
            escape_markup(params),
            w.description,
        )
    return table


def _pairs(params: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "-"


def suites_table() -> Table:
    from dlbench.plan.suites import builtin_suite_names, load_suite

    table = Table(title="suites")
    table.add_column("name", no_wrap=True)
    table.add_column("about", overflow="fold")
    for name in builtin_suite_names():
        table.add_row(name, load_suite(name).description)
    return table


def cmd_env(args: argparse.Namespace) -> int:
    from dlbench.results.env import fingerprint

    data = fingerprint().to_dict()
    if args.json:
        print_json(data)
        return 0
    table = Table(title="environment", show_header=False)
    table.add_column("key")
    table.add_column("value")
    for key, value in data.items():
        table.add_row(escape_markup(key), escape_markup(readable(value)))
    out.print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    if args.plots is not None:
        check_output_folder(args.plots, "--plots")
    run = load_run(args.run, args.db, on_wait=say)
    print_run(run, args.wide)
    server = server_table(run)  # an endpoint's server's own counters, beside the client's
    if server is not None:
        out.print(server)
    print_study(run, args.baseline, args.plots, args.latency_budget_ms)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from dlbench.launch.inspect import inspect_model

    found = inspect_model(args.model, args.trust_model, progress=say)
    if not found.loads():  # nothing to show but why: a user error, --json or not
        raise UserError(found.why_nothing_loads())
    if args.json:
        print_json(found.to_dict())
        return 0
    size = f"{found.size_bytes / 1e6:.1f} MB" if found.size_bytes >= 1e5 else (
        f"{found.size_bytes:,} bytes")  # fmt: skip
    # the path and what the file says of itself are the user's, not markup
    about = escape_markup(f"{found.path}: {found.description} ({size})")
    out.print(about, highlight=False)
    shown: tuple[tuple[InputSpec, ...], tuple[InputSpec, ...]] | None = None
    for view in found.frameworks:
        if view.verdict != "loads":
            continue
        if shown == (view.inputs, view.outputs):
            out.print(
                f"{view.framework} sees the same inputs and outputs", markup=False, highlight=False
            )
            continue
        shown = (view.inputs, view.outputs)
        out.print(signature_table(f"inputs, as {view.framework} reads them", view.inputs))
        out.print(signature_table(f"outputs, as {view.framework} reads them", view.outputs))
    table = Table(title="frameworks")
    for name in ("framework", "version", "can run it", "why not"):
        table.add_column(name)
    for view in found.frameworks:
        table.add_row(
            view.framework,
            escape_markup(view.version or "-"),
            escape_markup(view.verdict),
            escape_markup(view.reason),
        )
    out.print(table)
    # `shown` is None where no framework loads the file: there is no signature to advise on
    inputs = shown[0] if shown else ()
    if any(spec.dims and None in spec.dims[1:] for spec in inputs):
        say("dimensions marked ? beyond the first need --input NAME:SHAPE or --input-data")
    return 0


def signature_table(title: str, specs: Sequence[InputSpec]) -> Table:
    """Names, shapes (? where dynamic; the first ? is filled by --batch-size) and dtypes."""
    table = Table(title=title)
    for name in ("name", "shape", "dtype"):
        table.add_column(name)
    for spec in specs:
        # names and dtypes are read from the model file
        table.add_row(
            escape_markup(spec.name), escape_markup(_shape_text(spec)), escape_markup(spec.dtype)
        )
    if not specs:
        table.add_row("(not recorded in this format)", "", "")
    return table


def _shape_text(spec: InputSpec) -> str:
    """The shape column's text (the dtype has a column of its own)."""
    if spec.scalar:
        return "python value"
    return "unknown" if spec.dims is None else spec.shape_text()
