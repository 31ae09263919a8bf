"""`dlbench fleet run` and `fleet report`: a suite on every node of a Ray cluster, and
the nodes side by side with their outliers."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from dlbench.cli.terminal import out, say
from dlbench.launch import fleet
from dlbench.launch.fleet import FleetPlan
from dlbench.plan.build import build_plan, request_from_options
from dlbench.report.fleet_report import fleet_columns, fleet_table, outlier_lines, outliers
from dlbench.results.fleet_marks import fleet_runs, new_fleet_id
from dlbench.results.store import open_store
from dlbench.spec.case import Settings
from dlbench.spec.cli_options import cli_options
from dlbench.workloads.memory import memory_checked_elsewhere


def cmd_fleet(args: argparse.Namespace) -> int:
    return cmd_fleet_run(args) if args.fleet_command == "run" else cmd_fleet_report(args)


def cmd_fleet_run(args: argparse.Namespace) -> int:
    plan = _fleet_plan(args)  # an unknown suite or a bad option ends here, in exit 2
    fleet.import_ray()  # and a missing install, before a store is made
    # the store first: a bad --db must not cost the cluster a suite's worth of work
    with open_store(args.db, on_wait=say) as store:
        ray = fleet.connect(args.ray)
        try:
            nodes = fleet.select_nodes(ray.nodes(), args.resource, args.node_label, on_note=say)
            fleet_id = new_fleet_id()
            names = ", ".join(node.name for node in nodes)
            say(
                f"fleet {fleet_id}: {len(plan.cases)} case(s) of suite {plan.planned_suite!r} "
                f"on {len(nodes)} node(s) ({names}); store {store.name}"
            )
            outcome = fleet.run_fleet(
                ray, nodes, plan, store, fleet_id, args.node_timeout, on_note=say
            )
        finally:
            ray.shutdown()  # this process's connection; the cluster stays
    failed = outcome.failed_nodes
    cases_failed = sum(o.run.failures for o in outcome.outcomes if o.failure is None)
    say(
        f"fleet {fleet_id}: {len(outcome.outcomes) - len(failed)} of {len(nodes)} node(s) "
        f"ran the suite, {len(failed)} failed; {cases_failed} case(s) failed on the others; "
        f"see: dlbench fleet report {fleet_id}"
    )
    if outcome.kept_aside:
        say(f"{len(outcome.kept_aside)} node run(s) could not be stored and were kept as "
            "files (above): import them once the store is back")  # fmt: skip
    return 1 if failed or cases_failed or outcome.kept_aside else 0


def _fleet_plan(args: argparse.Namespace) -> FleetPlan:
    """The suite as the nodes get it, checked here as `dlbench run` would check it."""
    request = replace(request_from_options(vars(args)), suite=args.suite)
    with memory_checked_elsewhere():  # each node's own run checks its memory
        plan = build_plan(request)
    for note in plan.skipped:
        say(f"skipping here (each node plans for itself): {note}")
    suite_file = Path(args.suite)
    text = None
    if args.suite.endswith((".yaml", ".yml")) or suite_file.exists():
        # the nodes do not have this machine's files: the suite goes to them as text
        text = suite_file.read_text(encoding="utf-8")
    return FleetPlan(
        suite=args.suite,
        suite_text=text,
        run_options=tuple(_settings_options(args)),
        planned_suite=plan.suite,
        settings=plan.settings,
        cases=plan.cases,
    )


def _settings_options(args: argparse.Namespace) -> list[str]:
    """The settings given here (--min-time, --repeat, --label, ...), as each node's
    `dlbench run` takes them."""
    words: list[str] = []
    for name, option in cli_options(Settings):
        value = getattr(args, name, None)
        if option.switch:
            words += [option.long_flag] if value else []
        elif value is not None:  # one word: a value starting with "-" stays a value
            words.append(f"{option.long_flag}={value}")
    return words


def cmd_fleet_report(args: argparse.Namespace) -> int:
    from dlbench.report.studies.hardware import hardware_rows, hardware_table

    with open_store(args.db, read_only=True, on_wait=say) as store:
        fleet_id, runs = fleet_runs(store, args.fleet)
    columns = fleet_columns(runs)
    out.print(fleet_table(fleet_id, columns))
    if hardware_rows(runs):  # the seed article's own table, where the suite has its case
        out.print(hardware_table(runs))
    for line in outlier_lines(outliers(columns)):
        out.print(line, markup=False, highlight=False)
    for column in columns:
        if column.mark.failure is not None:
            out.print(
                f"failed: node {column.mark.node}: {column.mark.failure}",
                markup=False,
                highlight=False,
            )
    return 0
