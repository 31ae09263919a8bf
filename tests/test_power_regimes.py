"""Burst and sustained ceilings: the windows' phases, the ceiling keys, the regime a
case is held to, and the roofline's own cases run for real (on a GPU where there is one)."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import dlbench
from factories import make_case, make_result, make_run

from dlbench.measure.power_regime import (
    BURST_S,
    MIN_WINDOWS_PER_KERNEL,
    PowerRegimes,
    RegimeFigure,
    RegimePlan,
    WindowKernel,
    run_regimes,
)
from dlbench.report.studies.hardware import ceilings_table
from dlbench.results.ceilings import (
    CeilingKey,
    case_regime,
    ceiling_key,
    ceilings_from_results,
    efficiency,
    efficiency_in_run,
    merge,
)
from dlbench.results.details import Details
from dlbench.results.env import Ceilings, Fingerprint
from dlbench.results.files import read_json
from dlbench.spec.case import Settings
from dlbench.spec.record_dict import to_dict

# starts a process or imports a framework: not in the fast tier (tests/conftest.py)
pytestmark = pytest.mark.integration

torch = pytest.importorskip("torch")
FIXTURES = Path(__file__).parent / "fixtures"


class ScriptedWindows:
    """A WindowQueue whose windows take the seconds a script gives per call, so the
    phases' arithmetic is checked exactly (real kernels are timed below)."""

    timed_by = "host-clock"
    gpu_uuid = None

    def __init__(self, seconds_per_call: dict[str, float]) -> None:
        self._per_call = seconds_per_call
        self._done: deque[float] = deque()
        self.launched: list[tuple[str, int]] = []

    def launch(self, kernel: str, calls: int) -> None:
        self.launched.append((kernel, calls))
        self._done.append(self._per_call[kernel] * calls)

    def wait_oldest(self) -> float:
        return self._done.popleft()


def plan(**values: object) -> RegimePlan:
    defaults = {
        "sustain_s": 1.0,
        "measure_s": 0.5,
        "min_windows": 5,
        "warmup_calls": 2,
        "run_sustained": True,
    }
    return RegimePlan(**{**defaults, **values})  # type: ignore[arg-type]


def test_windows_are_sized_in_calls_and_phases_split_at_the_burst_and_the_sustain():
    queue = ScriptedWindows({"gemm": 0.004})
    run = run_regimes(queue, [WindowKernel("gemm", 8e9)], plan(), "GFLOP/s")
    record = run.record
    assert record.calls_per_window == {"gemm": 5}  # 20 ms of 4 ms calls
    # first call, 2 warm-ups and the sizing call are single calls, each waited for
    assert queue.launched[:4] == [("gemm", 1)] * 4
    assert record.burst.rate == pytest.approx(2000.0)  # 8 GFLOP in 4 ms
    assert record.burst.windows == int(BURST_S // 0.02)  # the windows ended by 150 ms
    assert record.sustained is not None and record.sustained.after_s == 1.0
    assert record.sustained.seconds >= 0.5 and record.sustained.windows >= 5
    assert record.cool_start is None and record.gpu_readings is None  # no probe given
    # the samples are the sustained windows, as seconds per call
    assert run.samples_s == [pytest.approx(0.004)] * record.sustained.windows


def test_a_burst_only_run_stops_after_its_windows_and_has_no_sustained_figure():
    queue = ScriptedWindows({"gemm": 0.004})
    run = run_regimes(queue, [WindowKernel("gemm", 1e9)], plan(run_sustained=False), "GFLOP/s")
    assert run.record.sustained is None  # it never ran for sustain_s
    assert len(run.samples_s) * 0.02 == pytest.approx(0.5)  # its --min-time of windows
    # with no sustain (a CPU's default) every window is after it: one figure
    again = run_regimes(
        ScriptedWindows({"gemm": 0.004}),
        [WindowKernel("gemm", 1e9)],
        plan(sustain_s=0.0, run_sustained=False),
        "GFLOP/s",
    )
    assert again.record.sustained is not None and again.record.sustained.after_s == 0.0


def test_several_kernels_run_in_turn_and_the_figure_is_the_best_ones():
    # copy moves 2 bytes a call in 1 s, add 3 in 1 s: add's is the higher bandwidth
    queue = ScriptedWindows({"copy": 0.010, "add": 0.010, "sum": 0.010})
    kernels = [WindowKernel("copy", 2e9), WindowKernel("add", 3e9), WindowKernel("sum", 1e9)]
    run = run_regimes(queue, kernels, plan(sustain_s=0.2, measure_s=0.3), "GB/s")
    sustained = run.record.sustained
    assert sustained is not None
    assert sustained.kernel == "add" and sustained.rate == pytest.approx(300.0)
    assert sustained.by_kernel == pytest.approx({"copy": 200.0, "add": 300.0, "sum": 100.0})
    assert run.record.burst.kernel == "add"  # each kernel's first window is in the burst
    timed = [name for name, calls in queue.launched if calls > 1]
    assert timed[:6] == ["copy", "add", "sum"] * 2
    assert all(timed.count(k) >= MIN_WINDOWS_PER_KERNEL for k in ("copy", "add", "sum"))
    # the result's samples are the case's own kernel's (copy's) windows only
    assert run.samples_s == [pytest.approx(0.010)] * len(run.samples_s)


def test_real_torch_kernels_timed_by_the_host_clock_give_rates_the_work_bounds():
    from dlbench.backends.torch.windows import HostClockWindows

    a, b = torch.randn(256, 256), torch.randn(256, 256)
    out = torch.empty(256, 256)
    queue = HostClockWindows({"gemm": lambda: torch.mm(a, b, out=out)}, lambda: None)
    run = run_regimes(
        queue,
        [WindowKernel("gemm", 2.0 * 256**3)],
        plan(sustain_s=0.05, measure_s=0.1, warmup_calls=1),
        "GFLOP/s",
    )
    record = run.record
    assert record.timed_by == "host-clock" and record.calls_per_window["gemm"] >= 2
    assert record.burst.rate > 0 and record.sustained is not None
    # no window is faster than its calls: the sustained rate is one of the windows'
    assert min(run.samples_s) * 1e9 * record.sustained.rate <= 2.0 * 256**3 * 1.0001


def test_the_ceiling_path_runs_a_real_copy_case_with_the_memory_kernels_and_checks_it():
    from dlbench.backends.torch.backend import TorchBackend
    from dlbench.worker.ceiling_windows import run_ceiling
    from dlbench.worker.steps import make_job

    case = make_case(
        workload="copy", framework="torch", params={"size": 256}, options={"ceiling": "sustained"}
    )
    settings = Settings(min_time_s=0.05, min_iters=6, warmup_iters=1, sustain_s=0.05)
    result = run_ceiling(TorchBackend(), make_job(case, settings, "cpu"), settings)
    assert result.status == "ok", result.error
    regimes = result.details.power_regimes
    assert regimes is not None and regimes.sustained is not None
    assert set(regimes.sustained.by_kernel) == {"copy", "add", "sum"}
    assert regimes.sustained.after_s == 0.05
    assert regimes.gpu_readings == "no GPU readings: cpu is not an NVIDIA GPU"
    assert result.details.check is not None and result.max_abs_diff == 0.0  # a copy is exact
    # the headline is copy's own bandwidth, over the same windows the figure took
    assert result.gbps == pytest.approx(regimes.sustained.by_kernel["copy"], rel=0.5)
    assert result.details.measured_wall is not None and result.details.loop_wall_s > 0


def test_the_option_is_refused_for_a_workload_without_windows():
    from dlbench.backends.torch.backend import TorchBackend
    from dlbench.errors import CaseError
    from dlbench.worker.ceiling_windows import run_ceiling
    from dlbench.worker.steps import make_job

    case = make_case(workload="mlp", framework="torch", options={"ceiling": "burst"})
    with pytest.raises(CaseError, match="option ceiling is for the gemm, copy, add"):
        run_ceiling(TorchBackend(), make_job(case, Settings(), "cpu"), Settings())


@pytest.mark.parametrize(
    ("key", "parsed"),
    [
        ("cpu|gflops|fp32", CeilingKey("cpu", "gflops", "fp32")),
        ("cuda:0|gflops|amp-bf16|burst", CeilingKey("cuda:0", "gflops", "amp-bf16", "burst")),
        ("cuda:0|memory|sustained", CeilingKey("cuda:0", "memory", None, "sustained")),
        ("cuda:1|host-to-device", CeilingKey("cuda:1", "host-to-device")),
        ("odd", CeilingKey("odd", "")),  # an imported run's env: read, never a crash
    ],
)
def test_ceiling_keys_read_back(key, parsed):
    assert CeilingKey.parse(key) == parsed
    if parsed.kind:
        regime_free = ceiling_key(parsed.device, parsed.kind, parsed.precision)
        assert parsed.stem == regime_free and key.startswith(regime_free)


@pytest.mark.parametrize(
    ("seconds", "clock", "burst_clock", "sustained_clock", "regime"),
    [
        (0.4, 1350.0, 1605.0, 1350.0, "burst"),  # short: the cap has not pulled it down
        (12.0, 1350.0, 1605.0, 1350.0, "sustained"),
        (12.0, 1560.0, 1605.0, 1350.0, "burst"),  # nearer the burst clock
        (12.0, 1980.0, 1980.0, 1980.0, "burst"),  # no power regime: at the burst clock
        (12.0, 1900.0, 1980.0, 1980.0, "sustained"),  # below it by more than the margin
        (12.0, None, 1605.0, 1350.0, "sustained"),  # long, clock unknown
        (None, None, None, None, "sustained"),
    ],
)
def test_a_case_is_held_to_the_regime_of_its_length_and_clock(
    seconds, clock, burst_clock, sustained_clock, regime
):
    chosen, why = case_regime(seconds, clock, burst_clock, sustained_clock)
    assert chosen == regime
    if seconds is not None:
        assert f"{seconds:.2g}" in why or f"{seconds:.1f}" in why


def figure(rate: float, clock: float, power: float, after_s: float = 0.0) -> RegimeFigure:
    return RegimeFigure(rate, "gemm", 8, 0.16, after_s, clock, power)


def gpu_ceiling_result(workload: str = "gemm", sustained: bool = True) -> object:
    regimes = PowerRegimes(
        unit="GFLOP/s",
        timed_by="cuda-events",
        calls_per_window={workload: 10},
        burst=figure(730_000.0, 1605.0, 850.0),
        sustained=figure(670_000.0, 1350.0, 700.0, after_s=10.0) if sustained else None,
        cool_start=True,
    )
    return make_result(
        workload=workload, device="cuda:0", precision="amp-bf16", gflops=670_000.0,
        primary_metric="gflops", details=Details(power_regimes=regimes),
    )  # fmt: skip


def held(seconds: float, clock: float | None, precision: str = "amp-bf16") -> object:
    summary = {"sm_clock_mhz_mean": clock} if clock is not None else {}
    return make_result(
        workload="mlp", device="cuda:0", precision=precision, gflops=335_000.0,
        primary_metric="gflops",
        details={"measured_wall": [100.0, 100.0 + seconds], "timeline": {"summary": summary}},
    )  # fmt: skip


def test_a_gpu_roofline_stores_burst_and_sustained_keys_with_clock_and_power():
    ceilings = ceilings_from_results([gpu_ceiling_result()], "roof")
    assert ceilings.values == {
        "cuda:0|gflops|amp-bf16|burst": 730_000.0,
        "cuda:0|gflops|amp-bf16|sustained": 670_000.0,
    }
    burst = ceilings.conditions["cuda:0|gflops|amp-bf16|burst"]
    assert to_dict(burst) == {
        "sm_clock_mhz": 1605.0, "power_w": 850.0, "after_s": 0.0, "kernel": "gemm",
        "cool_start": True,
    }  # fmt: skip
    sustained = to_dict(ceilings.conditions["cuda:0|gflops|amp-bf16|sustained"])
    assert sustained["after_s"] == 10.0 and "cool_start" not in sustained
    # a CPU's ceiling case keeps one figure under the key without a regime
    cpu = make_result(
        workload="gemm", gflops=25.0, primary_metric="gflops",
        details=Details(power_regimes=PowerRegimes(
            unit="GFLOP/s", timed_by="host-clock", calls_per_window={"gemm": 2},
            burst=figure(20.0, 0, 0), sustained=figure(26.0, 0, 0),
        )),
    )  # fmt: skip
    assert ceilings_from_results([cpu], "roof").values == {"cpu|gflops|fp32": 26.0}


def test_efficiency_is_against_the_ceiling_of_the_cases_own_regime_and_says_which():
    ceilings = ceilings_from_results([gpu_ceiling_result()], "roof")
    short = efficiency(held(0.5, 1350.0), ceilings)
    assert short["regime"] == "burst" and short["ceiling"] == 730_000.0
    assert "burst" in short["basis"] and "under 1 s" in short["basis"]
    long = efficiency(held(20.0, 1340.0), ceilings)
    assert long["regime"] == "sustained" and long["fraction"] == pytest.approx(0.5)
    assert long["basis"].startswith("gemm amp-bf16, sustained (20.0 s of continuous work")
    cool = efficiency(held(20.0, 1600.0), ceilings)  # a long case whose clock never fell
    assert cool["regime"] == "burst"


def test_a_regime_not_measured_is_replaced_by_the_other_and_said():
    ceilings = ceilings_from_results([gpu_ceiling_result(sustained=False)], "roof")
    found = efficiency(held(20.0, None), ceilings)
    assert found["regime"] == "burst" and found["ceiling"] == 730_000.0
    assert "no sustained ceiling of gemm amp-bf16" in found["basis"]


def test_newer_figures_replace_an_older_runs_one_figure_of_the_same_ceiling():
    older = Ceilings("old", {"cuda:0|gflops|amp-bf16": 651_000.0, "cuda:0|host-to-device": 50.0})
    newer = ceilings_from_results([gpu_ceiling_result()], "new")
    merged = merge(older, newer)
    assert set(merged.values) == {
        "cuda:0|gflops|amp-bf16|burst",
        "cuda:0|gflops|amp-bf16|sustained",
        "cuda:0|host-to-device",  # not measured again: kept
    }
    assert set(merged.conditions) == set(newer.conditions)
    assert merge(newer, older).values["cuda:0|gflops|amp-bf16"] == 651_000.0


def test_an_older_runs_ceilings_read_as_they_always_did():
    run = read_json(FIXTURES / "schema-2-runs" / "crafted-run.json")
    for result in run.results:
        found = efficiency_in_run(result, run)
        assert found is None or "regime" not in found  # one figure: no regime to choose
    gpu = run.results[-1]  # a timed transfer: held to the bus, which that run lacks
    assert efficiency(gpu, run.env.ceilings_or_none) is None
    # its GEMM alone: the one figure of old
    gpu = replace(gpu, details=replace(gpu.details, transfer_bytes_per_step=None))
    found = efficiency(gpu, run.env.ceilings_or_none)
    assert found is not None and found["basis"] == "gemm fp32" and found["ceiling"] == 2000.0
    rows = ceilings_table(run).columns[2]._cells  # the regime column
    assert rows == ["one figure", "one figure"]


def test_the_ceilings_table_shows_each_regime_with_its_clock_and_power():
    run = make_run(env=Fingerprint(ceilings=ceilings_from_results([gpu_ceiling_result()], "roof")))
    columns = {column.header: column._cells for column in ceilings_table(run).columns}
    assert columns["regime"] == ["burst", "sustained"]
    assert columns["SM clock"] == ["1605 MHz", "1350 MHz"]
    assert columns["power"] == ["850 W", "700 W"]
    assert columns["measured"] == ["first 150 ms, cool start", "median window after 10 s"]


# ---- on a CUDA GPU (skipped elsewhere) ------------------------------------


def run_json(tmp_path: Path, *args: str, name: str) -> dict:
    out = tmp_path / name
    done = dlbench(*args, "--json", str(out), "-q", "--db", str(tmp_path / "s.sqlite"), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_burst_beats_sustained_with_clocks_and_power_and_no_add_beats_memory(tmp_path):
    roof = run_json(
        tmp_path, "roofline", "-d", "cuda", "--sustain", "4", "--min-time", "0.5", name="roof.json"
    )
    by = {(r["case"]["workload"], r["case"]["precision"]): r for r in roof["results"]}
    for key in (("gemm", "amp-bf16"), ("copy", "fp32")):
        assert by[key]["status"] == "ok", by[key]["error"]
        regimes = by[key]["details"]["power_regimes"]
        burst, sustained = regimes["burst"], regimes["sustained"]
        assert regimes["timed_by"] == "cuda-events" and sustained["after_s"] == 4.0
        assert burst["rate"] >= 0.98 * sustained["rate"], (burst, sustained)
        for each in (burst, sustained):
            assert each["sm_clock_mhz"] > 0 and each["power_w"] > 0, each
        assert regimes["cool_start"] in (True, False) and regimes["start"]["power_w"] > 0
    values = roof["env"]["ceilings"]["values"]
    assert {"cuda:0|memory|burst", "cuda:0|memory|sustained"} <= set(values)
    assert "cuda:0|gflops|fp32|burst" in values and "cuda:0|gflops|fp32" not in values
    add = run_json(tmp_path, "run", "-w", "add", "-d", "cuda", "--min-time", "2", name="add.json")
    (result,) = add["results"]
    assert result["status"] == "ok", result["error"]
    share = result["derived"]["efficiency"]
    # the memory ceiling is the best of copy, add and sum over windows: add within noise
    assert result["gbps"] <= 1.01 * values["cuda:0|memory|sustained"], (result["gbps"], values)
    assert result["gbps"] <= 1.01 * values["cuda:0|memory|burst"]
    assert share["regime"] in ("burst", "sustained") and share["fraction"] <= 1.01
