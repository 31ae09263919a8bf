"""An LLM server under load, charted: TTFT and TPOT at the SLO's percentile against
the load, the bounds as dashed lines, the peak --find-peak found ringed. Results are
built here, as the endpoint worker records them; no server is started."""

from __future__ import annotations

from dataclasses import replace

import pytest
from factories import make_result, make_run, timed_run

from dlbench.report.charts.svg import curve_chart
from dlbench.report.html import render
from dlbench.report.studies.llm import llm_charts
from dlbench.report.studies.llm_serving import (
    llm_serving_charts,
    llm_serving_tables,
    load_points,
)
from dlbench.report.studies.study_output import curve_charts, write_study_files

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# an endpoint case as plan.endpoint_cases makes it, and the worker fills it in
SERVER = {"workload": "llm-requests", "framework": "endpoint", "compile": "default",
          "device": "remote", "batch_size": 1, "params": {"isl": 128, "osl": 32},
          "endpoint": "http://localhost:8000", "served_model": MODEL}  # fmt: skip
SLOS = {"ttft_ms": 2000.0, "tpot_ms": 100.0}
RINGED = 'r="6" fill="none"'  # svg.py's marked point


def generation(ttft_p99: float, tpot_p99: float) -> dict:
    """Token latencies at p50, p90 and p99: the p90 two thirds and the p50 half of the p99."""
    return {"isl": 128, "osl": 32, "generations": 50,
            "ttft_p50_ms": ttft_p99 / 2, "ttft_p90_ms": ttft_p99 * 2 / 3, "ttft_p99_ms": ttft_p99,
            "tpot_p50_ms": tpot_p99 / 2, "tpot_p90_ms": tpot_p99 * 2 / 3,
            "tpot_p99_ms": tpot_p99}  # fmt: skip


def swept(ttft: float, tpot: float, users: int | None = None, rate: float | None = None,
          answered: float | None = None, status: str = "ok", **case):  # fmt: skip
    """One result of a --sweep: a load of its own, its Generation record's percentiles."""
    values = {**SERVER, **SLOS, **case}
    slo_holds = ttft <= values["ttft_ms"] and tpot <= (values["tpot_ms"] or float("inf"))
    endpoint = {"served_model": values["served_model"], "api": "completions",
                "requests_per_s": answered, "slo_percentile": 99.0,
                "ttft_bound_ms": values["ttft_ms"], "tpot_bound_ms": values["tpot_ms"],
                "slo_holds": slo_holds}  # fmt: skip
    details = {"endpoint": endpoint, "generation": generation(ttft, tpot)}
    return make_result(**values, concurrency=users, request_rate=rate, status=status,
                       details=details)  # fmt: skip


def step(load: float, holds: bool, ttft: float, tpot: float, answered: float | None = None):
    return {"load": load, "holds": holds, "requests_per_s": answered, "ttft_ms": ttft,
            "tpot_ms": tpot, "goodput_per_s": answered if holds else 0.0}  # fmt: skip


# --find-peak --concurrency 4: doubling to a miss at 16, bisecting to 10, 10 confirmed
USERS_TRIED = [step(4, True, 300, 30), step(8, True, 900, 60), step(16, False, 4000, 180),
               step(12, False, 2600, 120), step(10, True, 1500, 85), step(11, False, 2100, 95),
               step(10, True, 1600, 88)]  # fmt: skip


def searched(tries: list[dict], peak: float | None, axis: str = "concurrency",
             status: str = "ok", **case):  # fmt: skip
    """A --find-peak result: every load tried, the peak; its own figures the last try's."""
    values = {**SERVER, **SLOS, "find_peak": True, **case}
    endpoint = {"served_model": values["served_model"], "slo_percentile": 99.0,
                "ttft_bound_ms": values["ttft_ms"], "tpot_bound_ms": values["tpot_ms"],
                "peak_axis": axis, "peak": peak, "peak_confirmed": peak is not None,
                "tries": tries}  # fmt: skip
    details = {"endpoint": endpoint, "generation": generation(1600, 88)}
    return make_result(**values, status=status, details=details)


def users_sweep(**case) -> list:
    return [swept(100, 20, users=1, **case), swept(400, 40, users=4, **case),
            swept(3000, 150, users=16, **case)]  # fmt: skip


def chart_svg(page: str, heading: str) -> str:
    """The one inline SVG of the page whose title holds `heading`."""
    (svg,) = [part for part in page.split("<svg")[1:] if heading in part]
    return svg


def test_a_find_peak_result_is_a_point_per_load_tried_the_confirming_one_the_peak():
    points = load_points(searched(USERS_TRIED, 10.0, concurrency=4))
    assert [(p.load, p.ttft_ms, p.tpot_ms, p.holds) for p in points] == [
        (t["load"], t["ttft_ms"], t["tpot_ms"], t["holds"]) for t in USERS_TRIED
    ]
    assert [p.is_peak for p in points] == [False] * 6 + [True]
    assert {(p.axis, p.percentile) for p in points} == {("concurrency", 99.0)}


def test_a_sweep_result_is_one_point_at_its_users_from_its_recorded_percentile():
    (point,) = load_points(swept(400, 40, users=4))
    assert (point.axis, point.load, point.ttft_ms, point.tpot_ms) == ("concurrency", 4.0, 400, 40)
    assert point.holds is True and not point.is_peak
    # one request at a time is one user
    assert load_points(swept(50, 10))[0].load == 1.0


def test_the_html_page_draws_ttft_and_tpot_against_users_with_bounds_and_the_peak():
    run = make_run([*users_sweep(), searched(USERS_TRIED, 10.0, concurrency=4)])
    page = render([run])
    ttft = chart_svg(page, "TTFT p99 against concurrent users")
    assert ttft.count("<polyline") == 2  # the sweep's line and the search's
    assert ttft.count("<circle") == 3 + len(USERS_TRIED)
    assert ttft.count(RINGED) == 1 and ">peak</text>" in ttft
    assert "TTFT bound 2000 ms" in ttft and "stroke-dasharray" in ttft
    assert "TTFT p99 ms" in ttft and "concurrent users (0 to 16)" in ttft
    assert "a case per load" in ttft and "find-peak users=4: every load tried" in ttft
    assert "model=meta-llama/Llama-3.1-8B-Instruct" in ttft
    tpot = chart_svg(page, "TPOT p99 against concurrent users")
    assert "TPOT bound 100 ms" in tpot and tpot.count(RINGED) == 1
    # the peak's TPOT, the last try's
    assert "find-peak users=4: every load tried: 10, 88</title>" in tpot


def test_an_open_loops_load_is_the_requests_answered_a_second():
    results = [swept(200, 20, rate=2.0, answered=1.9), swept(500, 35, rate=4.0, answered=3.8),
               swept(900, 60, rate=8.0, answered=5.0)]  # fmt: skip
    rate_tries = [step(2.0, True, 250, 25, answered=1.95), step(4.0, True, 600, 40, answered=3.9),
                  step(8.0, False, 5000, 200, answered=4.4), step(6.0, True, 1800, 90, 5.7),
                  step(7.0, False, 2500, 110, 6.1), step(6.0, True, 1700, 85, 5.8)]  # fmt: skip
    run = make_run([*results, searched(rate_tries, 6.0, axis="rate", request_rate=2.0)])
    (ttft, tpot) = llm_serving_charts(run)
    assert ttft.x_title == "requests/s answered" and "against requests/s answered" in ttft.title
    sweep, search = ttft.curves
    assert [p.x for p in sweep.points] == [1.9, 3.8, 5.0]
    assert [(p.x, p.y) for p in search.points if p.marked] == [(5.8, 1700)]
    svg = curve_chart(tpot)
    assert svg.count(RINGED) == 1 and "TPOT bound 100 ms" in svg


@pytest.mark.parametrize(("percentile", "shown", "note"), [(90.0, 200.0, ""),
                         (95.0, 300.0, " (p99: the nearest recorded)"),
                         (50.0, 150.0, "")])  # fmt: skip
def test_a_sweep_shows_its_recorded_percentile_nearest_the_slos(percentile, shown, note):
    run = make_run([swept(300, 30, users=1, slo_percentile=percentile),
                    swept(600, 60, users=2, slo_percentile=percentile)])  # fmt: skip
    ttft, _ = llm_serving_charts(run)
    assert ttft.y_title == f"TTFT p{percentile:g} ms"
    (curve,) = ttft.curves
    assert curve.label == f"a case per load{note}" and curve.points[1].y == 2 * shown


def test_a_bound_not_set_draws_no_line():
    run = make_run(users_sweep(tpot_ms=None))
    ttft, tpot = llm_serving_charts(run)
    assert ttft.limit == 2000.0 and tpot.limit is None
    assert "stroke-dasharray" not in curve_chart(tpot)


def test_results_differing_in_more_than_their_load_get_charts_of_their_own():
    other = "Qwen/Qwen2.5-7B"
    run = make_run([*users_sweep(), *users_sweep(served_model=other),
                    *users_sweep(ttft_ms=500.0, tpot_ms=30.0)])  # fmt: skip
    charts = llm_serving_charts(run)
    assert len(charts) == 6 and len({c.name for c in charts}) == 6
    assert sorted(c.limit for c in charts if c.title.split(": ")[-1].startswith("TTFT")) == [
        500.0, 2000.0, 2000.0
    ]  # fmt: skip
    assert sum(f"model={other}" in c.title for c in charts) == 2
    assert all(len(c.curves[0].points) == 3 for c in charts)


def test_one_load_failed_results_and_other_runs_draw_no_such_chart():
    assert llm_serving_charts(make_run([swept(400, 40, users=4)])) == []
    saturated = swept(9000, 300, rate=64.0, answered=3.0, status="failed")
    assert llm_serving_charts(make_run([swept(200, 20, rate=2.0, answered=2.0), saturated])) == []
    plain = timed_run("r1", 1.0, 1)
    assert not [c for c in curve_charts(plain) if c.name.startswith("llm-serving")]
    assert "against concurrent users" not in render([plain])


def test_a_search_where_no_load_held_is_drawn_without_a_peak():
    tries = [step(4, False, 2500, 150), step(2, False, 2200, 120), step(1, False, 2100, 110)]
    (ttft, _) = llm_serving_charts(
        make_run([searched(tries, None, status="failed", concurrency=4)])
    )
    (curve,) = ttft.curves
    assert len(curve.points) == 3 and not any(p.marked for p in curve.points)


def test_a_load_sweep_makes_no_chart_against_the_prompts_length():
    # the isl each result records is the server's mean prompt: a load sweep's vary a little
    results = users_sweep()
    shorter = replace(results[1].details.generation, isl=127)
    results[1] = replace(results[1], details=replace(results[1].details, generation=shorter))
    assert llm_charts(make_run(results)) == []


def test_a_long_title_is_two_lines_that_fit_the_chart():
    (ttft, _) = llm_serving_charts(make_run(users_sweep()))
    assert len(ttft.title) > 90
    svg = curve_chart(ttft)
    assert svg.count('text-anchor="middle" font-size="11"') == 2


def test_plots_write_the_charts_as_png(tmp_path):
    pytest.importorskip("matplotlib")
    run = make_run([*users_sweep(), searched(USERS_TRIED, 10.0, concurrency=4)])
    written = [p for p in write_study_files(run, [], tmp_path) if "llm-serving" in p.name]
    assert sorted(p.name.split("-")[2] for p in written) == ["tpot", "ttft"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


def loadgen_try(qps: float, holds: bool, ttft: float, tpot: float) -> dict:
    """One --find-peak try of a generation engine under LoadGen (worker.token_serving)."""
    return {"target_qps": qps, "samples_per_s": qps * 0.98, "keeps_bound": holds,
            "ttft_percentiles_ms": {"50": ttft / 2, "99": ttft},
            "tpot_percentiles_ms": {"50": tpot / 2, "99": tpot}}  # fmt: skip


def test_an_engine_under_loadgen_is_drawn_from_loadgens_own_token_percentiles():
    """A generation engine's --find-peak: a point per rate tried at the rate answered,
    LoadGen's p99 TTFT and TPOT, the confirming try at the peak ringed."""
    tries = [loadgen_try(8, True, 120, 12), loadgen_try(16, False, 900, 45),
             loadgen_try(12, True, 300, 25), loadgen_try(14, False, 650, 33),
             loadgen_try(12, True, 310, 26)]  # fmt: skip
    loadgen = {"scenario": "server", "tries": tries, "peak_qps": 12, "peak_confirmed": True,
               "ttft_percentiles_ms": {"99": 310}, "tpot_percentiles_ms": {"99": 26}}  # fmt: skip
    details = {"loadgen": loadgen, "generation": generation(310, 26)}
    result = make_result(workload="llm-135m", framework="openvino-genai", compile="default",
                         scenario="server", find_peak=True, ttft_ms=500.0, tpot_ms=30.0,
                         details=details)  # fmt: skip
    points = load_points(result)
    assert [p.load for p in points] == pytest.approx([q * 0.98 for q in (8, 16, 12, 14, 12)])
    assert [p.ttft_ms for p in points] == [120, 900, 300, 650, 310]
    assert [p.is_peak for p in points] == [False, False, False, False, True]
    page = render([make_run([result])])
    ttft = chart_svg(page, "TTFT p99 against requests/s answered")
    assert ttft.count(RINGED) == 1 and "TTFT bound 500 ms" in ttft
    assert "TPOT bound 30 ms" in chart_svg(page, "TPOT p99 against requests/s answered")


def test_the_llm_serving_study_ranks_each_engines_confirmed_peak():
    def engine(framework: str, peak: float | None, batching: str):
        loadgen = {"scenario": "server", "peak_qps": peak, "peak_confirmed": peak is not None,
                   "peak_note": None if peak else "no load tried (down to 2) held",
                   "ttft_percentiles_ms": {"99": 310}, "tpot_percentiles_ms": {"99": 26},
                   "tries": [loadgen_try(peak or 2, peak is not None, 310, 26)],
                   "batching": batching}  # fmt: skip
        return make_result(workload="llm-135m", framework=framework, compile="default",
                           scenario="server", loadgen=True, find_peak=True, ttft_ms=500.0,
                           tpot_ms=30.0, details={"loadgen": loadgen,
                                                  "generation": generation(310, 26)})  # fmt: skip

    run = make_run([engine("torch", 4.0, "2 streams"),
                    engine("openvino-genai", 10.0, "continuous batching: up to 32"),
                    engine("llama-cpp", None, "2 streams")])  # fmt: skip
    table, pick = llm_serving_tables(run)
    assert "ttft<=500ms,tpot<=30ms" in table.title and "LoadGen" in table.title
    assert "openvino-genai" in pick.rows[0].label and pick.rows[0].value == 10
    assert pick.rows[1].label.startswith("no rate held: llama-cpp")
    rows = {row.label.split()[0]: row for row in table.rows}
    assert rows["openvino-genai"].value == 10.0 and rows["openvino-genai"].relative == 2.5
    assert "confirmed; continuous batching" in rows["openvino-genai"].note
    assert rows["llama-cpp"].value is None and rows["llama-cpp"].note.startswith("none: no load")
    assert rows["torch"].extra[0] == 310  # dlbench's own TTFT p99 beside the peak
