"""Cases, results and runs for tests: the one place a test writes a case's identity.

Keyword arguments that name a Case field go to the case, the rest to the
Result, so a test states only what it is about:
`make_result(workload="gemm", status="failed", error="...")`. Details may be
given in their JSON form, `details={"timeline": {"throttle": "thermal"}}`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from dlbench.measure.stats import summarize
from dlbench.results.details import Details
from dlbench.results.env import Fingerprint
from dlbench.results.records import STATUS_OK, Result, Run
from dlbench.spec.case import PAIR_FIELDS, Case, Settings
from dlbench.spec.record_dict import flat_fields

# a case's fields by their flat names (a user model's `model`, `inputs`, ...)
CASE_FIELDS = {name for name, _ in flat_fields(Case)}
CASE_DEFAULTS: dict[str, Any] = {
    "workload": "mlp",
    "framework": "torch",
    "compile": "eager",
    "mode": "infer",
    "device": "cpu",
    "batch_size": 1000,
    "precision": "fp32",
    "threads": 2,
}


def make_case(**values: Any) -> Case:
    """A Case of the defaults above, with `values` (pair fields may be given as dicts)."""
    merged = {**CASE_DEFAULTS, **values}
    for name in PAIR_FIELDS:
        if isinstance(merged.get(name), dict):
            merged[name] = tuple(sorted(merged[name].items()))
    return Case.of(**merged)


def make_result(**values: Any) -> Result:
    """A Result (status ok unless given) whose case takes the Case-field arguments."""
    case_values = {k: v for k, v in values.items() if k in CASE_FIELDS}
    measured = {k: v for k, v in values.items() if k not in CASE_FIELDS}
    measured.setdefault("status", STATUS_OK)
    if isinstance(measured.get("details"), dict):
        measured["details"] = Details.from_dict(measured["details"])
    return Result(case=make_case(**case_values), **measured)


def make_run(results: list[Result] | None = None, **values: Any) -> Run:
    """A Run holding `results`; id, start, suite, settings and env default to placeholders
    (settings may be given as a dict of the fields that differ from the defaults, env as
    its JSON)."""
    defaults: dict[str, Any] = {
        "id": "r",
        "started_at": "2026-01-01T00:00:00+00:00",
        "suite": "quick",
        "settings": Settings(),
        "env": {},
    }
    given = {**defaults, **values}
    if isinstance(given["env"], dict):  # as a run's JSON holds it
        given["env"] = Fingerprint.from_dict(given["env"])
    if isinstance(given["settings"], dict):
        given["settings"] = Settings(**given["settings"])  # unchecked: a test may give a bad one
    return Run(results=tuple(results or ()), **given)


def with_result(run: Run, index: int, result: Result) -> Run:
    """`run` with `result` in place of its result at `index` (added at the end where
    `index` is its count): a Run's results are a tuple."""
    return replace(run, results=(*run.results[:index], result, *run.results[index + 1 :]))


def samples(median_ms: float, seed: int, n: int = 400) -> list[float]:
    """Latency samples around `median_ms` with 3% noise, reproducible by seed."""
    rng = np.random.default_rng(seed)
    return [float(x) for x in median_ms * (1 + 0.03 * rng.standard_normal(n))]


def timed_run(
    run_id: str,
    median_ms: float,
    seed: int,
    host: str = "h1",
    cpu: str = "CPU A",
    framework: str = "torch",
    processes: int = 1,
) -> Run:
    """A run of one mlp case whose samples centre on `median_ms` (for compare and gates).

    With `processes` > 1 it is a --repeat run: each process's samples centre
    on its own median, `median_ms` with 3% process-to-process noise.
    """
    from dlbench.results.repeats import add_process

    rng = np.random.default_rng(seed + 1000)
    process_medians = (
        [median_ms] if processes == 1 else median_ms * (1 + 0.03 * rng.standard_normal(processes))
    )
    merged = None
    for index, centre in enumerate(process_medians):
        ms = samples(float(centre), seed * 100 + index)
        process = make_result(
            framework=framework,
            scenario="offline",
            latency_ms=summarize([x / 1000 for x in ms]),
            samples_ms=ms,
            throughput=1000 / (float(centre) / 1000),
            cpu_percent=150.0,
            peak_rss_mb=200.0,
        )
        merged = process if processes == 1 else add_process(merged, process)
    return make_run(
        [merged],
        id=run_id,
        suite="s",
        settings={"min_time_s": 1.0, "repeat": processes},
        env={"hostname": host, "cpu_model": cpu},
    )


def sample_run() -> Run:
    """A run with one ok and one failed case, with awkward strings (for files and tables)."""
    ok = make_result(
        latency_ms=summarize([0.001, 0.002, 0.003]),
        throughput=500_000.0,
        cpu_percent=199.0,
        peak_rss_mb=250.0,
        samples_ms=[1.0, 2.0, 3.0],
        details={"extra": {"k": [1, 2]}},
    )
    failed = make_result(
        workload="gemm",
        compile="script",
        device="auto",
        batch_size=None,
        status="failed",
        error='worker crashed, "quotes", commas, and\nnewlines',
        params={"size": 64},
    )
    return make_run([ok, failed], id="r1", settings={"min_time_s": 1.0}, env={"hostname": "h"})


def checked_result(job: Any, verdict: Any) -> Result:
    """The Result the worker's one assembler (worker.result.result_from) makes of a
    check's verdict, around a measurement of nothing: for the tests that hold a check
    to its rule."""
    from dlbench.measure.energy import EnergyReading
    from dlbench.measure.instruments import Reading
    from dlbench.measure.monitor import ResourceUse
    from dlbench.worker.result import Measurement, result_from

    nothing = Measurement(
        reading=Reading(ResourceUse(0.0, 0.0, None, None), EnergyReading()),
        samples_s=(),
        device=job.device,
        batch=job.batch_size,
        samples_done=0.0,
        details=Details(),
    )
    return result_from(job, nothing, setup_s=None, verdict=verdict)
