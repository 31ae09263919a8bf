"""The worker process: runs exactly one case and writes its Result to a file.

This module is imported in a freshly spawned interpreter, so it must not
import NumPy or a framework at module level: thread variables are set first,
then the one framework of the case is imported (and that import is timed).
"""

from __future__ import annotations

import faulthandler
import json
import math
import os
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dlbench.atomic import write_atomic
from dlbench.backends import load_backend
from dlbench.backends.base import Backend, Job, Prepared, device_kind, first_line
from dlbench.config import Case, Settings
from dlbench.errors import CaseError, CaseSkipped, ReferenceUnavailable
from dlbench.launch.check import check_output
from dlbench.launch.placement import require_placement
from dlbench.measure.monitor import ProcessMonitor, ResourceUse, peak_rss_mb
from dlbench.measure.stats import summarize, throughput
from dlbench.measure.timer import StopRule, Timing, run_timed
from dlbench.registry import FRAMEWORKS, framework_info
from dlbench.results.records import STATUS_FAILED, STATUS_OK, STATUS_SKIPPED, Result
from dlbench.workloads import get_workload

# Read by OpenMP, MKL, OpenBLAS and friends when they load: set before import.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Beside the result file: progress lines of long cases, which the parent shows.
PROGRESS_FILE = "progress.txt"
PROGRESS_ENV = "DLBENCH_PROGRESS_FILE"


def report_progress(line: str) -> None:
    """Append one progress line for the parent (a no-op outside a worker)."""
    path = os.environ.get(PROGRESS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(line.replace("\n", " ") + "\n")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def base_result(case: Case, status: str, **values: Any) -> Result:
    """A Result carrying the case's identity; measured fields are filled by the caller."""
    return Result(
        workload=case.workload,
        framework=case.framework,
        compile=case.compile,
        mode=case.mode,
        device=values.pop("device", case.device),
        requested_device=case.device,
        batch_size=values.pop("batch_size", case.batch_size),
        precision=case.precision,
        threads=case.threads,
        interop_threads=case.effective_interop_threads,
        params=values.pop("params", dict(case.params)),
        scenario=values.pop("scenario", case.scenario),
        case=case.to_dict(),
        nproc=case.nproc,
        status=status,
        **values,
    )


def execute(case: Case, settings: Settings) -> Result:
    """Import, prepare, time and summarise one case (in this process)."""
    block_other_frameworks(case.framework)
    started = time.perf_counter()
    backend = load_backend(case.framework)()  # imports the framework
    import_s = time.perf_counter() - started
    threads = backend.configure_threads(case.threads, case.effective_interop_threads)
    job = make_job(case, settings, backend.resolve_device(case.device))
    try:
        if job.workload.epoch_based:
            from dlbench.launch.epochs import run_epochs

            result = run_epochs(backend, job)
        else:
            result = _run_steps(backend, job, settings)
    except CaseSkipped as skip:
        skip.device = job.device  # the skip names the device it judged
        raise
    result.import_s = import_s
    result.framework_version = backend.version()
    result.details = {
        "frameworks_in_process": frameworks_in_process(),
        "threads": threads,
        **result.details,
    }
    return result


def _run_steps(backend: Backend, job: Job, settings: Settings) -> Result:
    """The step loop: first call, warm-up, then timed steps until the stop rule holds."""
    setup_start = time.perf_counter()
    prepared = backend.prepare(job)
    setup_s = time.perf_counter() - setup_start
    require_placement(job.device, prepared.details)
    timing, usage = measure(prepared, settings)
    result = measured_result(job, prepared, timing, usage)
    _apply_check(result, job, prepared)
    _apply_loss_check(result, prepared)
    result.setup_s = setup_s
    result.details = {
        "loop_wall_s": timing.loop_wall_s,
        # wall-clock bounds of the timed loop, to pick it out of the parent's timeline
        "measured_wall": [usage.wall_start_epoch_s, usage.wall_end_epoch_s],
        **(prepared.after_measure() if prepared.after_measure else {}),
        **prepared.details,
        **result.details,
    }
    return result


def _apply_loss_check(result: Result, prepared: Prepared) -> None:
    """Training must produce a finite loss; NaN weights would make every later loss NaN."""
    if prepared.fetch_loss is None or not result.ok:
        return
    with prepared.context():
        loss = float(prepared.fetch_loss())
    result.details["final_loss"] = loss
    if not math.isfinite(loss):
        result.status = STATUS_FAILED
        result.error = f"training loss is not finite ({loss}) after the measured steps"


def _apply_check(result: Result, job: Job, prepared: Prepared) -> None:
    """Record the output check; a mismatch turns the result into a failure."""
    try:
        with prepared.context():
            outcome = check_output(job, prepared)
    except ReferenceUnavailable as exc:
        result.details["check"] = {"note": f"reference unavailable: {exc}"}
        return
    result.max_abs_diff = outcome.max_abs_diff
    result.details["check"] = {"note": outcome.note, "tolerance": outcome.tolerance}
    if outcome.failed:
        result.status = STATUS_FAILED
        result.error = (
            f"output differs from the reference: max_abs_diff {outcome.max_abs_diff:.3g} > "
            f"tolerance {outcome.tolerance:.3g} ({outcome.note})"
        )


# Every framework's top-level module, from the registry: a new backend is blocked too.
FRAMEWORK_MODULES = tuple(info.import_name for info in FRAMEWORKS.values() if info.import_name)


def block_other_frameworks(framework: str) -> list[str]:
    """Make the other frameworks unimportable in this worker.

    Some frameworks import others when they happen to be installed
    (TensorFlow's tf.lite imports jax), which would put a second framework's
    memory and import time into this case. They all guard such imports, so
    an ImportError just switches the optional feature off.
    """
    own = framework_info(framework).import_name
    blocked = [name for name in FRAMEWORK_MODULES if name != own and name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` fail
    return blocked


def frameworks_in_process() -> list[str]:
    """Which frameworks this worker imported: fairness rule 6 says exactly one."""
    return [name for name in FRAMEWORK_MODULES if sys.modules.get(name) is not None]


def make_job(case: Case, settings: Settings, device: str) -> Job:
    """Resolve the workload's defaults for the device the case actually landed on."""
    workload = get_workload(case.workload)
    kind = device_kind(device)
    return Job(
        case=case,
        workload=workload,
        device=device,
        batch_size=case.effective_batch_size(workload.default_batch_size(kind)),
        params=workload.resolve_params(kind, dict(case.params)),
        seed=settings.seed,
    )


def measure(prepared: Prepared, settings: Settings) -> tuple[Timing, ResourceUse]:
    """Run the timer inside the backend's context, the monitor around the steady state."""
    rule = StopRule(settings.min_time_s, settings.min_iters, settings.warmup_iters)
    monitor = ProcessMonitor()
    with prepared.context():
        timing = run_timed(prepared.step, rule, on_loop_start=monitor.start)
        usage = monitor.stop()
    return timing, usage


def measured_result(job: Job, prepared: Prepared, timing: Timing, usage: ResourceUse) -> Result:
    """Statistics and rates from the raw samples; the null backend claims no FLOPs."""
    case = job.case
    batch = prepared.batch_size or job.batch_size
    stats = summarize(timing.samples_s)
    rate = throughput(batch, stats)
    real_work = case.framework != "null"
    flops = job.workload.flops_per_sample(job.params, case.mode) if real_work else None
    moved = job.workload.bytes_per_sample(job.params, case.mode) if real_work else None
    return base_result(
        case,
        STATUS_OK,
        device=prepared.device,
        batch_size=batch,
        params=job.params,
        scenario=case.effective_scenario(batch),
        latency_ms=stats,
        throughput=rate,
        gflops=rate * flops / 1e9 if flops else None,
        gbps=rate * moved / 1e9 if moved else None,
        primary_metric=job.workload.primary_metric,
        flops_per_sample=flops,
        bytes_per_sample=moved,
        noisy=stats.noisy,
        first_call_ms=timing.first_call_s * 1000.0,
        warmup_ms=to_ms(timing.warmup_s),
        samples_ms=to_ms(timing.samples_s),
        cpu_percent=usage.cpu_percent,
        peak_rss_mb=usage.peak_rss_mb,
        load_avg_before=usage.load_avg_before,
        load_avg_after=usage.load_avg_after,
    )


def to_ms(samples_s: list[float]) -> list[float]:
    """Milliseconds rounded to the nanosecond: finer than any clock, and compact in JSON."""
    return [round(s * 1000.0, 6) for s in samples_s]


def failed_from_exception(case: Case, exc: BaseException) -> Result:
    message = first_line(str(exc))
    if not isinstance(exc, CaseError):
        message = f"{type(exc).__name__}: {message}"
    detail = "".join(traceback.format_exception(exc)[-8:])
    return base_result(
        case, STATUS_FAILED, error=message, error_detail=detail, peak_rss_mb=peak_rss_mb()
    )


def _redirect_output(log_path: str) -> None:
    """Send this process's stdout/stderr (and C-level writes) to the case log."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process if its parent dies (even by SIGKILL).

    Workers (and torchrun, and its ranks) leave the terminal's process group,
    so without this a parent killed hard would leave an orphan loading the
    machine with no timeout. Elsewhere the runner's own cleanup is all there is.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def worker_main(
    case_data: dict[str, Any],
    settings_data: dict[str, Any],
    result_path: str,
    log_path: str,
    parent_pid: int,
) -> None:
    """Process entry point (spawned by the runner)."""
    if hasattr(os, "setsid"):
        os.setsid()  # own process group: the runner can kill helpers we start too
    die_with_parent(parent_pid)
    _redirect_output(log_path)
    faulthandler.enable()  # a segfault's Python stack lands in the log
    case = Case.from_dict(case_data)
    settings = Settings.from_dict(settings_data)
    for name in THREAD_VARS:
        os.environ[name] = str(case.threads)
    os.environ[PROGRESS_ENV] = str(Path(result_path).with_name(PROGRESS_FILE))
    started_at = now_iso()
    wall_start = time.perf_counter()
    try:
        result = execute(case, settings)
    except CaseSkipped as exc:
        device = exc.device or case.device
        result = base_result(case, STATUS_SKIPPED, error=first_line(exc), device=device)
    except Exception as exc:  # any failure of the case is recorded, not raised
        result = failed_from_exception(case, exc)
    result.started_at = started_at
    result.duration_s = time.perf_counter() - wall_start
    write_atomic(Path(result_path), json.dumps(result.to_dict()))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter and framework teardown: it can hang or crash after the
    # result is safely written, and it is not part of any measurement.
    os._exit(0)
