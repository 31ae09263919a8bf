"""The HTML report: self-contained, escaped, and rendered by a real browser."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import assert_page_fits, chromium, dlbench
from factories import timed_run, with_result

from dlbench.measure.stats import summarize
from dlbench.measure.timeline import TimelinePoint
from dlbench.report.html import render
from dlbench.results.details import Details, Timeline
from dlbench.results.files import write_json

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def hostile_run():
    run = timed_run("r1", 1.0, 1, host=HOSTILE)
    # training cases get their timelines drawn
    timeline = Timeline(
        points=[
            TimelinePoint(t=0.0, cpu_percent=50, cpu_cores=(), rss_mb=100),
            TimelinePoint(t=1.0, cpu_percent=150, cpu_cores=(), rss_mb=120),
        ],
        throttle="thermal",
    )
    run = with_result(
        run,
        0,
        replace(
            run.results[0],
            case=replace(run.results[0].case, workload=HOSTILE, mode="train"),
            details=Details(timeline=timeline),
            flags=["throttled:thermal"],  # as results.flags decides from the verdict
        ),
    )
    return run


def test_every_string_from_results_is_escaped():
    page = render([hostile_run()])
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # only the page's own chart counter


def test_page_is_self_contained():
    page = render([timed_run("r1", 1.0, 1)])
    for marker in ("http://", "https://", "src=", "<link"):
        assert marker not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_flags_and_timelines_are_shown():
    page = render([hostile_run()])
    assert "throttled:thermal" in page
    assert "CPU over time" in page and "memory over time" in page
    # one scale with the PNG timeline's: 100 is every core busy
    assert "CPU busy, % of all cores" in page and "% of one core" not in page


def test_short_inference_timelines_are_left_out_long_ones_drawn():
    run = hostile_run()
    run = with_result(
        run, 0, replace(run.results[0], case=replace(run.results[0].case, mode="infer"))
    )
    assert "CPU over time" not in render([run])
    points = [
        TimelinePoint(t=float(i), cpu_percent=90, cpu_cores=(), rss_mb=100) for i in range(40)
    ]
    timeline = replace(run.results[0].details.timeline, points=points)
    run = with_result(
        run, 0, replace(run.results[0], details=replace(run.results[0].details, timeline=timeline))
    )
    assert "CPU over time" in render([run])


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path):
    write_json(hostile_run(), tmp_path / "a.json")
    write_json(timed_run("r2", 1.3, 2), tmp_path / "b.json")
    html = tmp_path / "report.html"
    proc = dlbench(
        "report", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--html", str(html)
    )
    assert proc.returncode == 0, proc.stderr
    expected = render_count = html.read_text().count('class="chart"')
    assert render_count >= 6
    dom = chromium("--dump-dom", html.as_uri())
    assert f'data-charts="{expected}"' in dom.stdout  # the page's script ran and saw every chart
    assert "alert" not in dom.stdout.replace("&lt;script&gt;alert", "").split("<body")[0]
    logged = chromium(
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=2000",
        "--window-size=1400,2600",
        f"--screenshot={tmp_path / 'shot.png'}",
        html.as_uri(),
    )
    console = [
        line for line in logged.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line
    ]
    assert not console, console
    shot = (tmp_path / "shot.png").read_bytes()
    assert shot.startswith(b"\x89PNG") and len(shot) > 20_000


def test_environment_values_read_as_text_not_python():
    run = timed_run("a", 1.0, 1)
    env = replace(run.env, frameworks={"torch": "2.13.0", "openvino-genai": None}, thread_env={},
                  gpus=[], smt=False, ram_gb=23.456)  # fmt: skip
    run = replace(run, env=env)
    page = render([run])
    environment = page[page.index("<h3>Environment</h3>") :]
    for python in ("{'", "None", "[]", "False"):
        assert python not in environment, python
    assert "torch: 2.13.0<br>openvino-genai: none" in environment
    assert "<td>no</td>" in environment and "<td>23.5</td>" in environment


def test_chart_ticks_are_written_as_the_tables_write_numbers():
    from dlbench.report.charts.png import plain_numbers, pyplot

    plt = pyplot()
    figure, axis = plt.subplots()
    axis.plot([0, 1], [0, 28_800])
    plain_numbers(axis.yaxis)
    figure.canvas.draw()
    labels = [tick.get_text() for tick in axis.get_yticklabels()]
    plt.close(figure)
    assert any("," in label for label in labels), labels
    assert not any("e+" in label for label in labels), labels


def llm_run():
    """A run of text generation across engines, as the llm suite's study reads it."""
    from factories import make_result, make_run

    def generated(framework: str, batch: int, ttft: float, decode: float):
        record = {"isl": 128, "osl": 32, "ttft_p50_ms": ttft, "tpot_p50_ms": 1000 / decode,
                  "decode_tokens_per_s": decode, "output_tokens_per_s": decode * 0.9,
                  "e2e_p50_ms": ttft + 31000 / decode, "generations": 5}  # fmt: skip
        return make_result(workload="llm-135m", framework=framework, batch_size=batch,
                           params={"isl": 128, "osl": 32}, details={"generation": record},
                           throughput=decode, latency_ms=summarize([0.5] * 5))  # fmt: skip

    engines = ("torch", "onnxruntime-genai", "openvino-genai", "llama-cpp")
    results = [generated(e, b, 40.0 * b + i, 30.0 * b + 5 * i)
               for i, e in enumerate(engines) for b in (1, 4)]  # fmt: skip
    return make_run(results, id="20261127-190000-abcdef", suite="llm", env={"hostname": "h"})


@pytest.mark.slow
@pytest.mark.parametrize("width", [390, 1400], ids=["phone", "desktop"])
def test_a_report_fits_a_phone_and_a_desktop_with_no_label_clipped(tmp_path, width):
    page = render([hostile_run(), timed_run("r2", 1.3, 2), llm_run()])
    assert "Text generation: llm-135m" in page and "Which to pick" in page
    assert_page_fits(page, width, tmp_path)
