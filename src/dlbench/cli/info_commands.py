"""`dlbench list`, `env`, `show` and `inspect`: what is here, a stored run, a model file."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from rich.table import Table

from dlbench.atomic import check_output_folder
from dlbench.cli.terminal import out, print_json, print_run, print_study, say
from dlbench.errors import UserError
from dlbench.report.table import escape_markup
from dlbench.results.lookup import load_run
from dlbench.spec.registry import FRAMEWORKS, WORKLOADS
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
    """Which framework runs which workload, in which modes ('-': not supported)."""
    table = Table(title="support matrix (modes per workload and framework)")
    table.add_column("workload")
    for name in FRAMEWORKS:
        table.add_column(name)
    for workload in WORKLOADS:
        modes = get_workload(workload).modes
        cells = [
            ", ".join(m for m in modes if info.supports(workload, m)) or "-"
            for info in FRAMEWORKS.values()
        ]
        table.add_row(workload, *cells)
    return table


def frameworks_table() -> Table:
    table = Table(title="frameworks")
    for name in ("name", "installed", "compile modes", "about"):
        table.add_column(name)
    for info in FRAMEWORKS.values():
        version = info.installed_version()
        status = (
            f"[green]{escape_markup(version)}[/green]"  # as the installed package says
            if version
            else f"[red]no[/red] ({info.install_hint})"
        )
        table.add_row(info.name, status, ", ".join(info.compile_modes), info.label)
    return table


def workloads_table() -> Table:
    table = Table(title="workloads")
    for name in ("name", "modes", "default batch (cpu/gpu)", "params (cpu / gpu)", "about"):
        table.add_column(name)
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
    table.add_column("name")
    table.add_column("about")
    for name in builtin_suite_names():
        table.add_row(name, load_suite(name).description)
    return table


def cmd_env(args: argparse.Namespace) -> int:
    from dlbench.results.env import fingerprint

    data = fingerprint()
    if args.json:
        print_json(data)
        return 0
    table = Table(title="environment", show_header=False)
    table.add_column("key")
    table.add_column("value")
    for key, value in data.items():
        table.add_row(escape_markup(key), escape_markup(str(value)))
    out.print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    if args.plots is not None:
        check_output_folder(args.plots, "--plots")
    run = load_run(args.run, args.db, on_wait=say)
    print_run(run)
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
    shown: tuple[list, list] | None = None
    for view in found.views:
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
    for view in found.views:
        table.add_row(
            view.framework,
            escape_markup(view.version or "-"),
            escape_markup(view.verdict),
            escape_markup(view.reason),
        )
    out.print(table)
    # `shown` is None where no framework loads the file: there is no signature to advise on
    inputs = shown[0] if shown else []
    if any(spec.get("dims") and None in spec["dims"][1:] for spec in inputs):
        say("dimensions marked ? beyond the first need --input NAME:SHAPE or --input-data")
    return 0


def signature_table(title: str, specs: list[dict]) -> Table:
    """Names, shapes (? where dynamic; the first ? is filled by --batch-size) and dtypes."""
    table = Table(title=title)
    for name in ("name", "shape", "dtype"):
        table.add_column(name)
    for spec in specs:
        # names and dtypes are read from the model file
        table.add_row(
            escape_markup(spec["name"]),
            escape_markup(_shape_text(spec)),
            escape_markup(str(spec["dtype"])),
        )
    if not specs:
        table.add_row("(not recorded in this format)", "", "")
    return table


def _shape_text(spec: dict) -> str:
    if spec.get("scalar"):
        return "python value"
    dims = spec.get("dims")
    if dims is None:
        return "unknown"
    return "x".join("?" if d is None else str(d) for d in dims) or "scalar"
