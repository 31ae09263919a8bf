"""A loop's Result is made once (worker.result.result_from): from its frozen measurement,
its set-up time, its checks' verdict and what the worker set up around the loop."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from factories import make_case

from dlbench.backends.base import Backend, Job, Prepared
from dlbench.measure.energy import EnergyReading
from dlbench.measure.instruments import Reading
from dlbench.measure.monitor import ResourceUse
from dlbench.results.details import Details, OutputCheck
from dlbench.results.records import STATUS_FAILED, STATUS_OK
from dlbench.spec.case import Settings
from dlbench.worker.result import Measurement, ProcessSetup, Verdict, result_from
from dlbench.worker.steps import _checks, make_job, run_steps
from dlbench.workloads import get_workload

USAGE = ResourceUse(150.0, 512.0, 0.5, 0.75, wall_start_epoch_s=100.0, wall_end_epoch_s=102.0)


def measurement(**values: object) -> Measurement:
    given: dict[str, object] = {
        "reading": Reading(USAGE, EnergyReading("rapl", joules=8.0, seconds=2.0)),
        "samples_s": (0.002, 0.004),
        "device": "cpu",
        "batch": 4,
        "samples_done": 8.0,
        "details": Details(extra={"backend": "its own"}),
        **values,
    }
    return Measurement(**given)  # type: ignore[arg-type]


def job(**case: object) -> Job:
    return make_job(make_case(**{"batch_size": 4, "threads": 1, **case}), Settings(), "cpu")


def test_a_failed_check_fails_the_case_with_its_reason_and_the_check_in_its_details():
    check = OutputCheck(note="torch eager fp32 reference", tolerance=1e-4)
    verdict = Verdict(error="output differs", max_abs_diff=0.5, check=check)
    result = result_from(job(), measurement(), setup_s=1.25, verdict=verdict)
    assert result.status == STATUS_FAILED and result.error == "output differs"
    assert result.max_abs_diff == 0.5 and result.details.check == check
    # what was measured is all there beside the failure
    assert list(result.samples_ms) == [2.0, 4.0] and result.setup_s == 1.25
    assert result.throughput == pytest.approx(4 / 0.003)


def test_a_passed_check_is_recorded_and_a_verdict_with_no_record_keeps_the_backends():
    check = OutputCheck(note="numpy spot check", tolerance=0.0)
    passed = result_from(job(), measurement(), setup_s=0.5,
                         verdict=Verdict(max_abs_diff=0.0, check=check))  # fmt: skip
    assert passed.status == STATUS_OK and passed.error is None
    assert passed.max_abs_diff == 0.0 and passed.details.check == check
    own = OutputCheck(note="the backend's")
    kept = result_from(job(), measurement(details=Details(check=own, final_loss=0.25)),
                       setup_s=0.5)  # fmt: skip
    assert kept.ok and kept.details.check == own and kept.details.final_loss == 0.25
    # an empty reason fails nothing (as `if error:` did in every loop)
    assert result_from(job(), measurement(), setup_s=0.5, verdict=Verdict(error="")).error is None


def test_set_up_threads_version_and_the_process_record_land_in_the_one_result():
    seen: list[Details] = []

    def recorded(details: Details) -> Details:
        seen.append(details)
        return dataclasses.replace(details, compile_cache="cold: fresh per process")

    threads = {"intra_op": 1, "inter_op": 1}
    process = ProcessSetup(import_s=0.75, threads=threads, version=lambda: "9.9",
                           recorded=recorded)  # fmt: skip
    result = result_from(job(), measurement(), setup_s=2.5, process=process)
    assert (result.setup_s, result.import_s, result.framework_version) == (2.5, 0.75, "9.9")
    assert result.details.threads == threads
    assert result.details.compile_cache == "cold: fresh per process"
    # the process's record sees the details as they are stored: the region recorded
    assert list(seen[0].measured_wall or ()) == [100.0, 102.0] and seen[0].threads == threads
    assert result.details.extra == {"backend": "its own"}
    assert result.details.energy is not None and result.details.energy.joules_per_sample == 1.0
    assert (result.cpu_percent, result.peak_rss_mb) == (150.0, 512.0)


def test_rates_follow_the_measurement_and_a_batch_sharing_its_weights():
    given = result_from(job(), measurement(rate=1000.0), setup_s=None)
    assert given.throughput == 1000.0
    assert given.gflops == pytest.approx(1000.0 * (given.flops_per_sample or 0.0) / 1e9)
    decoder = job(workload="llm-tiny", params={"isl": 8, "osl": 4})
    own = result_from(decoder, measurement(), setup_s=None)
    shared = result_from(decoder, measurement(weights_shared=True), setup_s=None)
    assert own.bytes_per_sample and shared.bytes_per_sample == own.bytes_per_sample / 4
    assert shared.gbps == pytest.approx((own.gbps or 0.0) / 4)  # GB/s follow the bytes
    alone = measurement(batch=1, weights_shared=True)
    assert result_from(decoder, alone, setup_s=None).bytes_per_sample == own.bytes_per_sample


def test_a_served_engines_case_keeps_its_own_scenario_as_an_endpoints_does():
    stepped = result_from(job(), measurement(batch=1), setup_s=None)
    assert stepped.case.scenario == "single-stream"  # the batch's
    served = job(workload="llm-tiny", framework="vllm", compile="default",
                 params={"isl": 8, "osl": 4})  # fmt: skip
    assert result_from(served, measurement(batch=1), setup_s=None).case.scenario is None
    # time-to-train serves no queries: its kind keeps the scenario given (none)
    trained = job(workload="mnist-train", mode="train")
    assert result_from(trained, measurement(batch=1), setup_s=None).case.scenario is None


def kernel_check(output: np.ndarray, loss: float) -> tuple[Verdict, list[str]]:
    """The step loop's checks on the add kernel's output and a training loss."""
    fetched: list[str] = []

    def fetch_loss() -> float:
        fetched.append("loss")
        return loss

    add = make_case(workload="add", batch_size=1, threads=1, params={"size": 64})
    add_job = make_job(add, Settings(seed=0), "cpu")
    prepared = Prepared(step=lambda: None, device="cpu", fetch_output=lambda: output,
                        fetch_loss=fetch_loss)  # fmt: skip
    return _checks(add_job, prepared), fetched


def correct_sum() -> np.ndarray:
    inputs = get_workload("add").make_inputs(1, {"size": 64}, "infer", 0)
    return inputs["x"] + inputs["y"]


def test_the_loss_is_checked_only_where_the_output_check_passed():
    wrong, fetched = kernel_check(correct_sum() + 1.0, loss=0.5)
    assert wrong.error is not None and wrong.error.startswith("output differs from the reference")
    assert wrong.final_loss is None and fetched == []  # no loss fetched after a failure
    nan, fetched = kernel_check(correct_sum(), loss=math.nan)
    assert nan.error == "training loss is not finite (nan) after the measured steps"
    assert nan.max_abs_diff == 0.0 and nan.check is not None and fetched == ["loss"]
    assert math.isnan(nan.final_loss or 0.0)
    fine, _ = kernel_check(correct_sum(), loss=0.5)
    assert fine.error is None and fine.final_loss == 0.5


class CountingBackend(Backend):
    """No framework: a step that counts its calls."""

    name = "counting"

    def __init__(self) -> None:
        self.steps = 0

    def version(self) -> str:
        return "unused: the worker's ProcessSetup reads the version"

    def configure_threads(self, intra_op: int, inter_op: int) -> dict:
        return {}

    def resolve_device(self, requested: str) -> str:
        return "cpu"

    def prepare(self, job: Job) -> Prepared:
        def step() -> None:
            self.steps += 1

        return Prepared(step=step, device="cpu", details=Details(extra={"b": 1}))


def test_the_step_loop_makes_its_result_in_one_call_with_the_version_read_after_it():
    backend = CountingBackend()
    steps_at_version: list[int] = []

    def version() -> str:
        steps_at_version.append(backend.steps)
        return "1.0"

    process = ProcessSetup(import_s=0.125, threads={"intra_op": 1}, version=version)
    settings = Settings(min_time_s=0.0, min_iters=3, warmup_iters=1)
    result = run_steps(backend, job(framework="null", batch_size=1), settings, process)
    assert result.ok and result.framework_version == "1.0" and result.import_s == 0.125
    assert steps_at_version == [backend.steps] and backend.steps >= 5  # read once, after
    assert result.details.threads == {"intra_op": 1} and result.setup_s is not None
    assert result.details.check is not None and result.details.timing_mode == "latency"
    assert len(result.samples_ms) == 3 and result.details.extra == {"b": 1}
