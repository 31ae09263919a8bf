"""`dlbench history`: a metric over stored runs, as a line of blocks per series with
its change points marked, and optionally an HTML page (report.history_html)."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence

from dlbench.cli.terminal import out, say
from dlbench.errors import UserError
from dlbench.report.compare import listed
from dlbench.report.history import (
    Change,
    ChangeMethod,
    History,
    Series,
    build_history,
    case_matcher,
)
from dlbench.report.table import fmt, plain
from dlbench.results.metrics import metric
from dlbench.results.records import Result, Run
from dlbench.results.run_ids import shown
from dlbench.results.store import open_store

BLOCKS = "▁▂▃▄▅▆▇█"
# A longer series is drawn this many blocks wide, each the median of its points.
SPARK_WIDTH = 100


def cmd_history(args: argparse.Namespace) -> int:
    chosen = metric(args.metric)
    method = ChangeMethod(args.window, args.max_pvalue, args.min_change / 100)
    runs, suites, store_name = _stored_runs(args)
    wanted: Callable[[Result], bool]
    if args.target in suites:
        target, wanted = f"suite {shown(args.target)}", _any_result
    else:
        wanted = case_matcher(args.target)
        matched = [r for run in runs for r in run.results if wanted(r)]
        if not matched:
            raise UserError(
                f"no suite or case {shown(args.target)} in store {store_name}; its suites: "
                f"{listed(suites)}; name a case by its label as `dlbench history SUITE` "
                "prints it, or by its key"
            )
        target = f"case {shown(matched[0].case.label())}"
    history = build_history(runs, target, wanted, chosen, args.order, method)
    print_history(history)
    if args.html is not None:
        from dlbench.report.history_html import write_history_html

        write_history_html(history, args.html)
        say(f"wrote {args.html}")
    return 0


def _any_result(result: Result) -> bool:
    return True


def _stored_runs(args: argparse.Namespace) -> tuple[list[Run], list[str], str]:
    """The runs the target may be among (a suite's only, when it names one), the
    store's suites, and the store's name."""
    with open_store(args.db, read_only=True, on_wait=say) as store:
        summaries = store.list_runs()
        if not summaries:
            raise UserError(f"store {store.name} holds no runs; dlbench run stores them")
        suites = sorted({s.suite for s in summaries})
        # a suite's runs are picked by their summary, before any result is read
        picked = [s.id for s in summaries if args.target not in suites or s.suite == args.target]
        return [store.load_run(run_id) for run_id in picked], suites, store.name


def print_history(history: History) -> None:
    order = "in time order" if history.order == "time" else "in label order"
    metric_ = history.metric
    _line(f"history of {history.target}: {metric_.title}, {metric_.unit}, {order}")
    _line(history.method.describe())
    for series in history.series:
        _line("")
        for line in series_lines(history, series):
            _line(line)
    _line("")
    if history.skipped:
        _line(f"skipped {history.skipped} result(s): failed or without {metric_.key}")
    if history.unlabelled:
        _line(f"left out {len(history.unlabelled)} run(s) without a label (--order label): "
              f"{listed(list(history.unlabelled))}")  # fmt: skip


def _line(text: str) -> None:
    """One line of the report as it is: run ids and labels are data, never markup."""
    out.print(plain(text), markup=False, highlight=False, soft_wrap=True)


def series_lines(history: History, series: Series) -> list[str]:
    """A series' name, its values as blocks with each change's start marked under
    them, and one line per change."""
    values = [p.value for p in series.points]
    noun = "point" if history.order == "label" else "run"
    count = f"{len(values)} {noun}" + ("" if len(values) == 1 else "s")
    machines = f"; machines: {', '.join(series.machines)}" if len(series.machines) > 1 else ""
    blocks, marks = sparkline(values, [c.index for c in series.changes])
    unit = history.metric.unit
    order = "by label" if history.order == "label" else "oldest first"
    lines = [
        f"{series.name}  ({count}{machines})",
        # the blocks run in time (or label) order; the first and last values say so,
        # where a min-to-max range beside them read as the same order
        f"  {blocks}  {order}: first {fmt(values[0])}, last {fmt(values[-1])} {unit}; "
        f"lowest {fmt(min(values))}, highest {fmt(max(values))}",
    ]
    if series.changes:
        lines.append(f"  {marks}")
        lines += [f"  {change_line(history, series, c)}" for c in series.changes]
    else:
        lines.append("  no change point")
    return lines


def change_line(history: History, series: Series, change: Change) -> str:
    """Where a change began (run, label, start), the levels either side, its size and p."""
    point = series.points[change.index]
    label = f", label {point.label}" if point.label is not None else ""
    metric_ = history.metric
    worse = (change.mean_after > change.mean_before) != metric_.higher_is_better
    verdict = "worse" if worse else "better"
    return (
        f"^ {100 * change.relative:+.1f}% ({verdict}) from run {point.runs_text()}"
        f"{label}, started {point.started_at}: {fmt(change.mean_before)} -> "
        f"{fmt(change.mean_after)} {metric_.unit}, p {change.p_value:.2g}"
    )


def sparkline(values: Sequence[float], starts: Sequence[int]) -> tuple[str, str]:
    """The values as blocks from lowest to highest, and a line with ^ under each
    change's first point. Past SPARK_WIDTH points, each block is a run of points'
    median, marked if a change begins inside it."""
    cells = min(len(values), SPARK_WIDTH)

    def cell_of(index: int) -> int:
        return index * cells // len(values)

    grouped: list[list[float]] = [[] for _ in range(cells)]
    for index, value in enumerate(values):
        grouped[cell_of(index)].append(value)
    levels = [statistics.median(group) for group in grouped]
    low, high = min(levels), max(levels)
    top = len(BLOCKS) - 1
    blocks = "".join(
        BLOCKS[round((v - low) / (high - low) * top) if high > low else top // 2] for v in levels
    )
    marked = {cell_of(index) for index in starts}
    marks = "".join("^" if cell in marked else " " for cell in range(cells)).rstrip()
    return blocks, marks
