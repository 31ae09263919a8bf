"""`dlbench history`: a metric over stored runs, its change points (Apache Otava), the
run label it can be ordered by, and its HTML page."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from conftest import cli, installed
from factories import make_result, make_run, with_result

from dlbench.cli.history_commands import sparkline
from dlbench.measure.stats import summarize
from dlbench.report.history import ChangeMethod, build_history, case_matcher, label_order
from dlbench.results.metrics import METRICS
from dlbench.results.records import Run
from dlbench.results.store import open_store

# Otava is installed apart, with --no-deps (.ci/run does; pyproject.toml says why); found,
# not imported (with SciPy) by every test process that collects this module
pytestmark = installed("otava.analysis", reason="pip install --no-deps apache-otava")

SUITE = "nightly"
RUNS = 12
STEP_AT = 6  # the 7th run is the first at the new level
STEP = 1.20  # latency up 20%
STEPPED = {"workload": "mlp"}  # the case whose latency steps up
FLAT = {"workload": "gemm", "params": {"size": 64}}  # the case that stays level


def measured(median_ms: float, **case: object):
    """An ok result whose median latency is `median_ms` (a few samples around it)."""
    ms = [median_ms * f for f in (0.995, 1.0, 1.005)]
    return make_result(latency_ms=summarize([x / 1000 for x in ms]), samples_ms=ms, **case)


def history_runs(labels: list[str | None] | None = None) -> list[Run]:
    """RUNS runs a day apart: the stepped case at 10 ms, then 12 ms from run 7; the flat
    case at 5 ms throughout; 1% noise, seeded."""
    rng = np.random.default_rng(7)
    labels = labels or [None] * RUNS
    runs = []
    for index in range(RUNS):
        level = 10.0 * (STEP if index >= STEP_AT else 1.0)
        noise = 1 + 0.01 * rng.standard_normal(2)
        results = [measured(level * noise[0], **STEPPED), measured(5.0 * noise[1], **FLAT)]
        settings = {} if labels[index] is None else {"label": labels[index]}
        runs.append(
            make_run(results, id=f"r{index + 1:02d}", suite=SUITE, settings=settings,
                     started_at=f"2026-01-{index + 1:02d}T00:00:00+00:00", env={"hostname": "h1"})
        )  # fmt: skip
    return runs


def store_runs(path, runs: list[Run]) -> None:
    with open_store(path) as store:
        for run in runs:
            store.import_run(run)


def stepped_label() -> str:
    return measured(1.0, **STEPPED).case.label()


def lines_of(text: str, name: str) -> list[str]:
    """The lines of one series in the terminal output: its name and what follows it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(name + "  ("))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), None)
    return lines[start:end]


def test_a_step_is_found_at_the_run_where_it_began_with_its_size(isolated_store):
    store_runs(isolated_store, history_runs())
    proc = cli("history", SUITE)
    assert proc.returncode == 0, proc.stderr
    stepped = lines_of(proc.stdout, stepped_label())
    [change] = [line for line in stepped if line.strip().startswith("^ ")]
    size = float(re.search(r"\^ ([+-][\d.]+)% \(worse\) from run r07,", change).group(1))
    assert 17 < size < 23
    assert stepped[2] == "  " + " " * STEP_AT + "^"  # under run 7's block
    # the method and its parameters are stated
    assert "E-divisive means, Apache Otava" in proc.stdout
    assert "window 50, max p-value 0.001, min change 1%" in proc.stdout


def test_the_change_is_run_seven_with_the_levels_either_side_and_a_small_p():
    history = build_history(
        history_runs(), "suite", case_matcher(stepped_label()), METRICS["latency"]
    )
    [series] = history.series
    [change] = series.changes
    assert change.index == STEP_AT and series.points[change.index].run_ids == ("r07",)
    assert change.mean_before == pytest.approx(10.0, rel=0.02)
    assert change.mean_after == pytest.approx(12.0, rel=0.02)
    assert change.relative == pytest.approx(0.2, abs=0.03)
    assert change.p_value < 0.001


def test_a_level_series_has_no_change_point(isolated_store):
    store_runs(isolated_store, history_runs())
    proc = cli("history", SUITE)
    flat = lines_of(proc.stdout, measured(1.0, **FLAT).case.label())
    assert flat[-1] == "  no change point"
    assert f"({RUNS} runs)" in flat[0]
    # the blocks run oldest first: the first and last values say so beside them
    assert "oldest first: first " in flat[1] and ", last " in flat[1] and "; lowest " in flat[1]


def test_a_series_of_one_run_says_one_run():
    from dlbench.cli.history_commands import series_lines

    history = build_history(
        history_runs()[:1], "suite", case_matcher(stepped_label()), METRICS["latency"]
    )
    [series] = history.series
    assert "(1 run)" in series_lines(history, series)[0]


def test_a_higher_bar_for_the_p_value_or_the_size_drops_the_change(isolated_store):
    store_runs(isolated_store, history_runs())
    proc = cli("history", stepped_label(), "--min-change", "25")
    assert proc.returncode == 0, proc.stderr
    assert "no change point" in proc.stdout and "min change 25%" in proc.stdout


def test_label_order_sorts_by_label_with_digits_as_numbers_and_shared_labels_as_one():
    # the high runs 7-11 labelled v1..v5, run 12 none, the low runs 1-6 v6 (runs 1 and
    # 2 share it), v7..v10: in label order the latency steps down at v6
    labels = ["v6", "v6", "v7", "v8", "v9", "v10", "v1", "v2", "v3", "v4", "v5", None]
    history = build_history(
        history_runs(labels), "suite", case_matcher(stepped_label()), METRICS["latency"], "label"
    )
    [series] = history.series
    assert [p.label for p in series.points] == [f"v{i}" for i in range(1, 11)]
    assert series.points[5].run_ids == ("r01", "r02")  # one point, their median
    assert history.unlabelled == ("r12",)
    [change] = series.changes
    assert change.index == 5 and change.relative == pytest.approx(1 / STEP - 1, abs=0.03)


def test_label_order_on_the_command_line_says_where_and_what_it_left_out(isolated_store):
    labels = [f"v{7 + i}" for i in range(6)] + [f"v{i}" for i in range(1, 6)] + [None]
    store_runs(isolated_store, history_runs(labels))
    proc = cli("history", stepped_label(), "--order", "label")
    assert proc.returncode == 0, proc.stderr
    assert "(better) from run r01, label v7," in proc.stdout
    assert "left out 1 run(s) without a label (--order label): r12" in proc.stdout


def test_label_order_with_no_label_anywhere_is_refused_in_one_line(isolated_store):
    store_runs(isolated_store, history_runs())
    proc = cli("history", SUITE, "--order", "label")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--label" in proc.stderr


def test_natural_label_order():
    assert sorted(["v1.10", "v1.9", "v1.9a", "build-100", "build-20"], key=label_order) == [
        "build-20", "build-100", "v1.9", "v1.9a", "v1.10"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("no-such-suite",), "no suite or case 'no-such-suite' in store"),
        ((SUITE, "--metric", "energy"), "has a value of energy"),
        ((SUITE, "--window", "1"), "expected an integer >= 2"),
    ],
)
def test_an_unknown_target_or_a_missing_metric_is_one_line_exit_2(isolated_store, args, message):
    store_runs(isolated_store, history_runs())
    proc = cli("history", *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    if args[0] == "no-such-suite":
        assert f"its suites: {SUITE};" in proc.stderr


def test_a_store_without_runs_is_one_line_exit_2(isolated_store):
    store_runs(isolated_store, [])  # made, and empty
    proc = cli("history", SUITE)
    assert proc.returncode == 2 and "holds no runs" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_failed_results_are_skipped_and_counted(isolated_store):
    runs = history_runs()
    runs[3] = with_result(
        runs[3],
        len(runs[3].results),
        make_result(workload="mlp", threads=1, status="failed", error="x"),
    )
    runs[4] = with_result(runs[4], 1, make_result(**FLAT, status="failed", error="boom"))
    store_runs(isolated_store, runs)
    proc = cli("history", SUITE)
    assert proc.returncode == 0, proc.stderr
    assert "skipped 2 result(s): failed or without latency" in proc.stdout
    assert f"({RUNS - 1} runs)" in lines_of(proc.stdout, measured(1.0, **FLAT).case.label())[0]


def test_without_otava_the_command_names_the_extra(isolated_store, monkeypatch):
    store_runs(isolated_store, history_runs())
    monkeypatch.setitem(sys.modules, "otava.analysis", None)  # import fails
    proc = cli("history", SUITE)
    assert proc.returncode == 2 and "pip install --no-deps 'apache-otava" in proc.stderr


def test_the_html_page_has_a_chart_per_series_with_the_change_ringed(isolated_store, tmp_path):
    store_runs(isolated_store, history_runs())
    page = tmp_path / "history.html"
    proc = cli("history", SUITE, "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert html.count('<svg class="chart"') == 2
    assert html.count('r="6" fill="none"') == 1  # one ringed point: the stepped case's run 7
    assert re.search(r">\+(1[7-9]|2[0-2])\.\d%</text>", html)  # its size beside it
    assert "<td>r07</td>" in html and "E-divisive means, Apache Otava" in html
    assert "http" not in html.replace("http://www.w3.org/2000/svg", "")  # no request


def test_a_hostile_label_is_escaped_in_the_page(tmp_path):
    labels = ["<script>alert(1)</script>"] * RUNS
    history = build_history(
        history_runs(labels), "suite", case_matcher(stepped_label()), METRICS["latency"], "label"
    )
    from dlbench.report.history_html import render

    assert "<script>alert" not in render(history)


def test_sparkline_marks_the_first_point_of_each_change_and_bins_long_series():
    blocks, marks = sparkline([1.0, 1.0, 2.0, 2.0, 1.5], [2])
    assert (blocks, marks) == ("▁▁██▅", "  ^")
    blocks, marks = sparkline([1.0] * 150 + [2.0] * 150, [150])
    assert len(blocks) == 100 and marks.index("^") == 50 and blocks[49:51] == "▁█"


def test_otava_parameters_reach_it():
    # a window of 4 points still finds the step; a p bar below its p drops it
    history = build_history(
        history_runs(), "s", case_matcher(stepped_label()), METRICS["latency"],
        method=ChangeMethod(window=4),
    )  # fmt: skip
    assert [c.index for c in history.series[0].changes] == [STEP_AT]
    p = history.series[0].changes[0].p_value
    strict = build_history(
        history_runs(), "s", case_matcher(stepped_label()), METRICS["latency"],
        method=ChangeMethod(max_pvalue=p / 10),
    )  # fmt: skip
    assert strict.series[0].changes == ()
