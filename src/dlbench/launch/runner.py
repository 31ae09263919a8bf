"""Run one case in a fresh spawned worker process and always get a Result back.

The parent waits in `Process.join`, which sleeps on the child's sentinel with
select(), waking every sampling interval to record a resource timeline
(measure.timeline) from outside the worker: a few /proc reads per wake, so it
steals next to nothing from the benchmark and no sampling thread runs inside
it. A raise, crash, OOM kill or timeout becomes a failed Result.

The parent never imports worker code (a contract in pyproject.toml): the
worker's entry point is named (launch.worker_entry) and imported by the spawned process alone.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import ModuleType

from dlbench.launch.torchrun import TorchrunProcess
from dlbench.launch.worker_entry import WORKER_ENTRY, import_in_worker
from dlbench.measure.gpu_telemetry import GpuTelemetry, device_indices
from dlbench.measure.timeline import TimelineSampler
from dlbench.results.details import Timeline
from dlbench.results.flags import result_flags
from dlbench.results.records import STATUS_FAILED, Result, base_result, now_iso
from dlbench.spec.case import Case, Settings, available_cpus
from dlbench.spec.loop_kinds import TORCHRUN, loop_kind
from dlbench.spec.worker_request import SHARED_COMPILE_CACHE_ENV, CaseOutputs, WorkerRequest

LOG_TAIL_LINES = 20
# Beside the result file: the progress lines of a long case (worker.progress).
PROGRESS_FILE = "progress.txt"
# The first sample comes sooner than the interval, so a case that ends in
# under half a second still gets a point (a spawned worker lives longer than this).
FIRST_SAMPLE_S = 0.1
# a spawned worker, or torchrun and its ranks for a DistributedDataParallel case
WorkerProcess = BaseProcess | TorchrunProcess
SIGNAL_HINTS = {
    signal.SIGKILL: "killed by SIGKILL (out of memory? the kernel's OOM killer sends it)",
    signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGBUS: "crashed with a bus error (SIGBUS)",
    signal.SIGILL: "crashed on an illegal instruction (SIGILL)",
    signal.SIGFPE: "crashed on a floating-point exception (SIGFPE)",
}


def run_case(
    case: Case,
    settings: Settings,
    on_note: Callable[[str], None] | None = None,
    files_dir: Path | None = None,
) -> Result:
    """Run `case` in its own process; never raises for a failing case.

    `on_note` receives the progress lines a long case writes (an epoch done),
    read between the waits, so a 20-minute training case is not silent.
    `files_dir` is where the case may leave files beside its run (LoadGen's
    logs); without it they go to a temporary folder.
    """
    _quiet_resource_tracker()
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dlbench-case-")))
        request = worker_request(case, settings, scratch, files_dir)
        process = _worker_process(request, stack)
        # Opened before the start, so NVML's start-up cost is not charged to the case.
        telemetry, gpu_note = _open_gpu_telemetry(case.device, case.ranks)
        started_at, wall_start = now_iso(), time.perf_counter()
        timed_out = False
        sampler: TimelineSampler | None = None
        try:
            process.start()  # inside the try: Ctrl-C during the spawn must kill it too
            if process.pid is not None:  # always, once start() returned
                sampler = TimelineSampler(process.pid, gpu=telemetry)
            notes = _ProgressFile(request.outputs.progress_path, on_note)
            timed_out = _wait_sampling(process, settings.timeout_s, sampler, notes)
            notes.check()  # the last line, even when the worker ended between looks
        finally:
            # Also on Ctrl-C: never leave a worker (or its helpers) running, or
            # multiprocessing's exit handler would wait for it forever.
            _kill_group(process)
            if process.pid is not None:
                process.join()
            if telemetry is not None:
                telemetry.close()
        worker_said = _collect(
            case, process, request.result_path, request.log_path, timed_out, settings.timeout_s
        )
    # What the parent adds goes on a copy: the worker's Result is not written into.
    result = _with_timeline(worker_said, sampler, gpu_note)
    # a failed or timed-out case is flagged too: oversubscription may be why
    result = replace(result, flags=result_flags(result, available_cpus()))
    if result.started_at is None:  # no Result from the worker: the parent's clock
        result = replace(result, started_at=started_at, duration_s=time.perf_counter() - wall_start)
    return result


def _worker_process(request: WorkerRequest, stack: contextlib.ExitStack) -> WorkerProcess:
    """The case's process, not yet started, as its loop kind says (spec.loop_kinds:
    `launcher`): torchrun and its ranks for a DDP case, else one spawned worker."""
    case = request.case
    if loop_kind(case).launcher == TORCHRUN:
        return TorchrunProcess(request, stack.enter_context(open(request.log_path, "ab")))
    return multiprocessing.get_context("spawn").Process(
        target=SpawnedFunction(*WORKER_ENTRY),
        args=(request.to_json(),),  # the whole request, one document
        name=f"dlbench-worker {case.label()}",
    )


def worker_request(
    case: Case, settings: Settings, scratch: Path, files_dir: Path | None
) -> WorkerRequest:
    """The case's request: its result, log and progress lines go into `scratch`."""
    return WorkerRequest(
        case=case,
        settings=settings,
        result_path=scratch / "result.json",
        log_path=scratch / "worker.log",
        parent_pid=os.getpid(),
        outputs=CaseOutputs(progress_path=scratch / PROGRESS_FILE, files_dir=files_dir),
        shared_compile_cache=_shared_compile_cache(),
    )


def _shared_compile_cache() -> Path | None:
    """The test suite's shared compiler cache folder, where it names one."""
    folder = os.environ.get(SHARED_COMPILE_CACHE_ENV)
    return Path(folder) if folder else None


class SpawnedFunction:
    """A module's function, named here and imported only by the process it is sent to.

    A spawned Process is pickled to its child, and pickle sends a function as a
    reference it checks by importing the function's module first: the worker's
    modules would then load in the parent too. This object is sent instead as
    `getattr(import_in_worker(module), name)`, which the child evaluates
    while it unpickles its Process, so there the target is the function itself.
    In the parent it is only a name: calling it raises.
    """

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __reduce__(self) -> tuple[Callable[..., object], tuple[_ImportedModule, str]]:
        return getattr, (_ImportedModule(self.module), self.name)

    def __call__(self, *args: object) -> None:
        raise RuntimeError(f"{self.module}.{self.name} runs only in the process it is sent to")


class _ImportedModule:
    """Pickles to `import_in_worker(name)`: the module, imported where it is unpickled
    (NumPy's BLAS pool at one thread first: launch.worker_entry says why)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple[Callable[[str], ModuleType], tuple[str]]:
        return import_in_worker, (self.name,)


TRACKER_WARNING = "ignore::UserWarning:multiprocessing.resource_tracker"


def _quiet_resource_tracker() -> None:
    """Keep multiprocessing's tracker from warning about workers' semaphores at exit.

    Workers end with os._exit once their result is written (teardown can hang),
    so semaphores that torch.compile's helper pools made are never unregistered;
    the tracker, started by the first spawn with this environment, frees them
    and would print a "leaked semaphore" warning for each, about nothing.
    """
    current = os.environ.get("PYTHONWARNINGS", "")
    if TRACKER_WARNING not in current:
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, (current, TRACKER_WARNING)))


def _open_gpu_telemetry(device: str, nproc: int = 1) -> tuple[GpuTelemetry | None, str | None]:
    """NVML telemetry for the case's GPUs; none (and no reason) for a CPU case.

    A DDP case puts rank r on cuda:r, so its N GPUs are all watched.
    """
    indices = device_indices(device)
    if indices and nproc > 1:
        indices = list(range(nproc))
    return GpuTelemetry.open(indices) if indices else (None, None)


class _ProgressFile:
    """The worker's progress lines, passed on when the file grew since the last look."""

    def __init__(self, path: Path | None, on_note: Callable[[str], None] | None) -> None:
        self.path, self.on_note, self.size = path, on_note, 0

    def check(self) -> None:
        if self.on_note is None or self.path is None:
            return
        try:
            size = self.path.stat().st_size
            if size == self.size:
                return
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return  # not written yet
        self.size = size
        lines = text.splitlines()
        if lines:
            self.on_note(lines[-1])


def _wait_sampling(
    process: WorkerProcess,
    timeout_s: float,
    sampler: TimelineSampler | None,
    notes: _ProgressFile | None = None,
) -> bool:
    """Wait up to `timeout_s` for the worker, sampling between waits; True if it timed out.

    Each join sleeps on the worker's sentinel and returns the moment it exits,
    so this is as prompt as one long join and never a busy poll.
    """
    deadline = time.monotonic() + timeout_s
    wait = FIRST_SAMPLE_S if sampler is not None else timeout_s
    while (remaining := deadline - time.monotonic()) > 0:
        ended = _wait_for_exit(process, min(wait, remaining))
        if sampler is not None:
            # at the exit too: the worker is not reaped yet, so this last point
            # covers a measured region that ended between two samples
            sampler.sample()
            wait = sampler.interval
        if notes is not None:
            notes.check()
        if ended:
            # not is_alive(): the sentinel is ready as the exit closes the worker's
            # files, a moment before it can be reaped
            return False
    return process.is_alive()


def _wait_for_exit(process: WorkerProcess, timeout: float) -> bool:
    """Sleep until the worker exits or `timeout` passes, without reaping it; True if it exited.

    Its sentinel (a pidfd for torchrun) becomes readable at the exit: the
    zombie left until join() still has the CPU times of its last moments.
    """
    sentinel = process.sentinel
    if sentinel is None:  # torchrun where there is no pidfd: Popen's own wait
        process.join(timeout)
        return not process.is_alive()
    return bool(multiprocessing.connection.wait([sentinel], timeout))


def _with_timeline(result: Result, sampler: TimelineSampler | None, gpu_note: str | None) -> Result:
    """The result with its timeline, the summary over its measured region, and any
    GPU verdict."""
    if sampler is None:
        return result
    if result.case.device == "cpu":
        # An "auto" case that landed on the CPU: the idle GPU's readings would mislead.
        sampler.forget_gpu()
        gpu_note = None
    summary = sampler.summary(_measured_window(result.details.measured_wall))
    timeline = Timeline(
        points=sampler.points,
        origin_epoch_s=round(sampler.origin_epoch_s, 3),
        summary=summary,
        throttle=summary.throttle,
        gpu_telemetry=gpu_note,
        cpu_set=sampler.cpu_set,
    )
    return replace(result, details=replace(result.details, timeline=timeline))


def _measured_window(value: object) -> tuple[float, float] | None:
    """The worker's [start, end] epoch seconds around the measured region, if well-formed."""
    if isinstance(value, list | tuple) and len(value) == 2:
        start, end = value
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in (start, end)):
            return float(start), float(end)
    return None


def _kill_group(process: WorkerProcess) -> None:
    """SIGKILL the worker's process group (it calls setsid), or the worker alone."""
    if process.pid is None:
        return
    if isinstance(process, TorchrunProcess):
        process.kill()  # the ranks live in sessions of their own
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        if process.is_alive():
            process.kill()


def _collect(
    case: Case,
    process: WorkerProcess,
    result_path: Path,
    log_path: Path,
    timed_out: bool,
    timeout_s: float,
) -> Result:
    """The worker's own Result if it wrote one, else a failed Result saying why."""
    if result_path.exists():
        # Written atomically, so if it exists it is complete.
        return Result.from_dict(json.loads(result_path.read_text(encoding="utf-8")))
    if timed_out:
        error = f"timed out after {timeout_s:g} s (--timeout); the worker was killed"
    else:
        error = describe_exit(process.exitcode)
    return base_result(case, STATUS_FAILED, error=error, error_detail=_log_tail(log_path))


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker did not report a result"
    if exitcode < 0:
        number = -exitcode
        try:
            hint = SIGNAL_HINTS.get(
                signal.Signals(number), f"killed by {signal.Signals(number).name}"
            )
        except ValueError:
            hint = f"killed by signal {number}"
        return f"worker {hint}"
    return f"worker exited with status {exitcode} without reporting a result"


def _log_tail(log_path: Path) -> str | None:
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return "\n".join(lines[-LOG_TAIL_LINES:]) or None
