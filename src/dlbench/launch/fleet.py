"""Run one suite on every node of a Ray cluster and store each node's run.

The cluster is an engine that already exists (`ray start` on each machine); dlbench
brings no scheduler of its own. Each chosen node gets one Ray task, pinned to it
(NodeAffinitySchedulingStrategy, soft=False: never moved to another node) and asking
for all of the node's CPUs and GPUs, so Ray places nothing else of dlbench's there
while it runs. The task starts `dlbench run SUITE` on the node as a subprocess, with
a scratch store and a JSON file there, so the node measures exactly as `dlbench run`
does: one fresh worker per case, one case at a time, and the node's own environment
fingerprint. The task returns the run's JSON; this process, which waits in `ray.wait`
without polling, adds the node's mark (results.fleet_marks) and imports the run into
the store as it arrives.

A node that dies, whose task crashes, or that runs past --node-timeout is recorded
as failed: a run for that node whose planned cases are failed results naming the
cause (as the runner records a crashed worker's case), and the other nodes go on.
The timeout is kept on the node, where the task stops its `dlbench run` and sends
back the cases that finished. The task first says it has begun (a streaming Ray
task: its first item), and this process gives a node up STOP_GRACE_S past the
timeout counted from then: counted from when the task was sent, a node whose worker
was slow to start (a loaded machine, a runtime_env being built) would be given up
before its own timeout, and the cases it finished lost. A task that has not begun by
the timeout and its grace (queued behind other work, or the node unreachable) is
given up too. A node given up has its task cancelled.

Ray is imported only here and only when a fleet runs: `pip install 'dlbench[fleet]'`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import psutil

from dlbench.errors import UserError
from dlbench.results.env import THREAD_ENV_VARS, Fingerprint
from dlbench.results.fleet_marks import FleetMark
from dlbench.results.records import STATUS_FAILED, Run, base_result, now_iso
from dlbench.results.run_ids import new_run_id
from dlbench.results.store import Store, open_store
from dlbench.results.store_location import redacted_argv, user_data_folder
from dlbench.spec.case import Case, Settings
from dlbench.untyped import JSONObject, JSONValue

if TYPE_CHECKING:  # Ray is imported where a fleet runs (its `ray` module is passed on)
    from ray import ObjectRefGenerator

FLEET_EXTRA = "fleet"
# How long a plain host:port address may take to answer before it is called wrong:
# ray.init itself retries an address where nothing listens for minutes.
CONNECT_PROBE_S = 5.0
# How much longer than --node-timeout this process waits for a node's answer, from when
# its task began: the node stops its run at the timeout and then sends what finished.
# Past it the node is given up.
STOP_GRACE_S = 5.0
# A node task's first item: it runs (its worker is up), and its timeout starts.
TASK_BEGAN = "began"
# A node whose dlbench answers in another form: the task Ray runs there is its own
FOREIGN_ANSWER = (
    "answered in a form this dlbench does not read (another dlbench version on the "
    "node?): install the same dlbench on every node"
)
# Ray starts a task's worker at niceness 15 unless the task's environment sets this
# (Ray's own job supervisor sets it to 0): the node's run would inherit it, and beside
# any other work on the node a niced run gets a sliver of the CPU (bench/fleet_niceness.py:
# a node task of a one-case suite on 2 cores beside 2 busy processes took 39 s at
# niceness 15 and 3.8 s at 0; with nothing beside, 2.3 s and 2.2 s).
RAY_WORKER_NICENESS_ENV = "RAY_worker_niceness"
# A node task's scratch folder (in the node's temporary folder): this, its process id, "-".
SCRATCH_PREFIX = "dlbench-fleet-"
# The last lines of a node's `dlbench run` output kept with its failure.
OUTPUT_TAIL_LINES = 20
# The node's `dlbench run`, killed (SIGKILL, Linux's parent-death signal) when the Ray
# worker that started it dies: a cancelled task or a lost node's raylet takes its
# workers down, and the run must not go on loading the machine with no one to report
# to. Named as text, as the runner names the worker's entry: launch imports no CLI.
NODE_ENTRY = (
    "import sys\n"
    "from dlbench.lifeline import die_with_parent\n"
    "die_with_parent(int(sys.argv[1]))\n"
    "from dlbench.cli.main import main\n"
    "sys.argv = ['dlbench', *sys.argv[2:]]\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@dataclass(frozen=True)
class Node:
    """An alive Ray node, as `ray.nodes()` describes it."""

    id: str
    ip: str
    hostname: str | None
    cpus: float
    gpus: float

    @property
    def name(self) -> str:
        return f"{self.ip} {self.id[:8]}"


@dataclass(frozen=True)
class FleetPlan:
    """What every node runs: the suite (its text, where it is a file here, since the
    nodes do not share this machine's files), the `dlbench run` options that carry the
    settings, and the parent's own plan of it, whose cases a failed node's run holds."""

    suite: str
    suite_text: str | None
    run_options: tuple[str, ...]
    planned_suite: str
    settings: Settings
    cases: tuple[Case, ...]


@dataclass
class SentTask:
    """A node's task in flight: when it was sent, and when it said it had begun."""

    node: Node
    sent_at: float
    began_at: float | None = None

    def give_up_at(self, give_up_s: float) -> float:
        """Its run's timeout and grace, from when it began; or, until it begins, from
        when it was sent (it waits for the node, or the node does not answer)."""
        return (self.sent_at if self.began_at is None else self.began_at) + give_up_s


@dataclass(frozen=True)
class NodeAnswer:
    """What a node's task sends back (node_task): the run's JSON where it wrote one (the
    parent reads it, naming the node where it is not a run), the run's output, and its
    exit status, or the timeout it ran past."""

    output: str
    returncode: int | None = None
    timed_out_s: float | None = None
    run: JSONObject | None = None


@dataclass(frozen=True)
class NodeOutcome:
    node: Node
    run: Run
    failure: str | None = None
    # from when its task was sent to when its answer (or the give-up) came
    seconds: float = 0.0


@dataclass(frozen=True)
class FleetOutcome:
    fleet_id: str
    started_at: str
    outcomes: tuple[NodeOutcome, ...] = ()
    # node runs the store could not take, written as JSON files instead
    kept_aside: tuple[Path, ...] = ()

    def mark(self, node: Node, failure: str | None = None) -> FleetMark:
        """What a node's run carries: this fleet, and the node it ran on."""
        return FleetMark(self.fleet_id, self.started_at, node.id, node.ip, node.hostname, failure)

    @property
    def failed_nodes(self) -> list[NodeOutcome]:
        return [o for o in self.outcomes if o.failure is not None]


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise UserError(
            f"dlbench fleet needs Ray: pip install 'dlbench[{FLEET_EXTRA}]' (on every node too)"
        ) from None
    return ray


def connect(address: str) -> ModuleType:
    """Ray, connected to the cluster at `address` as a driver ("auto": the cluster
    started on this machine, as Ray reads it)."""
    ray = import_ray()
    _probe(address)
    try:
        # WARNING: Ray's own INFO lines ("Connecting to existing Ray cluster") are not
        # dlbench's; log_to_driver off: the nodes' output comes back with their runs.
        # Ray keeps the driver's command line as its job's entrypoint, shown to anyone
        # who lists the cluster's jobs: a store URL's password must not be in it
        given, sys.argv[:] = list(sys.argv), redacted_argv(sys.argv)
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        finally:
            sys.argv[:] = given
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise UserError(f"--ray {address}: cannot connect ({_first_line(exc)})") from None
    return ray


def _probe(address: str) -> None:
    """Refuse an address where nothing answers, in seconds: given one, ray.init
    retries its connection for minutes before it gives up."""
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise UserError(f"--ray {address}: expected HOST:PORT (or auto)") from None
    if not host or port is None:
        raise UserError(f"--ray {address}: expected HOST:PORT (or auto)")
    try:
        socket.create_connection((host, port), timeout=CONNECT_PROBE_S).close()
    except OSError as exc:
        raise UserError(
            f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc}); "
            "give the head node's address (`ray status` on it shows it)"
        ) from None


def select_nodes(
    described: Sequence[Mapping[str, JSONValue]],
    resource: str | None = None,
    label: tuple[str, str] | None = None,
    on_note: Callable[[str], None] = lambda line: None,
) -> list[Node]:
    """The alive nodes (of `ray.nodes()`) with `resource` and `label`, in IP order;
    a node with neither CPUs nor GPUs in Ray's view (a head started with
    --num-cpus=0, kept free of work on purpose) is left out, and said so."""
    chosen = []
    for info in described:
        if not info.get("Alive"):
            continue
        resources = info.get("Resources") or {}
        if resource is not None and not resources.get(resource):
            continue
        if label is not None and (info.get("Labels") or {}).get(label[0]) != label[1]:
            continue
        node = Node(
            id=str(info["NodeID"]),
            ip=str(info.get("NodeManagerAddress", "?")),
            hostname=info.get("NodeManagerHostname"),
            cpus=float(resources.get("CPU", 0)),
            gpus=float(resources.get("GPU", 0)),
        )
        if node.cpus <= 0 and node.gpus <= 0:
            on_note(f"leaving out node {node.name}: Ray gives it no CPUs or GPUs")
            continue
        chosen.append(node)
    if not chosen:
        wanted = [f"resource {resource!r}"] if resource is not None else []
        wanted += [f"label {label[0]}={label[1]}"] if label is not None else []
        with_what = f" with {' and '.join(wanted)}" if wanted else " with CPUs or GPUs"
        raise UserError(f"no alive node{with_what} in the Ray cluster")
    return sorted(chosen, key=lambda node: (node.ip, node.id))


def run_fleet(
    ray: ModuleType,
    nodes: Sequence[Node],
    plan: FleetPlan,
    store: Store,
    fleet_id: str,
    node_timeout_s: float | None = None,
    on_note: Callable[[str], None] = lambda line: None,
) -> FleetOutcome:
    """One task per node; each node's run stored as it arrives, failures included."""
    fleet = FleetOutcome(fleet_id, now_iso())
    outcomes: list[NodeOutcome] = []
    kept_aside: list[Path] = []

    def finish(done: NodeOutcome, sent: SentTask) -> None:
        outcomes.append(replace(done, seconds=time.monotonic() - sent.sent_at))
        kept_aside.extend(_store(outcomes[-1], store, on_note))

    ceilings = {node.id: _ceilings_of(store, node) for node in nodes}
    pending = _dispatch(ray, nodes, plan, node_timeout_s, ceilings)
    give_up_s = None if node_timeout_s is None else node_timeout_s + STOP_GRACE_S
    try:
        while pending:
            for task in _wait(ray, pending, give_up_s):
                sent = pending[task]
                item = _next_item(ray, task)
                if isinstance(item, str):  # TASK_BEGAN, the one text a task sends
                    sent.began_at = time.monotonic()
                    continue
                del pending[task]
                finish(_collect(item, sent.node, plan, fleet), sent)
            for task, sent in list(pending.items()):
                if give_up_s is not None and time.monotonic() >= sent.give_up_at(give_up_s):
                    ray.cancel(task, force=True)  # its worker killed, and its run with it
                    del pending[task]
                    cause = given_up_cause(sent, node_timeout_s, give_up_s)
                    finish(_failed(sent.node, plan, fleet, cause), sent)
    finally:
        for task in pending:  # Ctrl-C or a store fault: nothing runs on for no one
            ray.cancel(task, force=True)
    return replace(fleet, outcomes=tuple(outcomes), kept_aside=tuple(kept_aside))


def given_up_cause(sent: SentTask, node_timeout_s: float | None, give_up_s: float) -> str:
    """Why a node was given up: its task never began, or began and never answered."""
    if sent.began_at is None:
        return (
            f"did not start its task within {give_up_s:g} s of it being sent "
            "(busy with other work, or unreachable): given up"
        )
    return (
        f"timed out after {node_timeout_s:g} s (--node-timeout), and its task did not "
        f"answer {STOP_GRACE_S:g} s later: given up"
    )


def _ceilings_of(store: Store, node: Node) -> JSONObject | None:
    """The node's newest stored `ceilings` run (by its host name), as JSON: its run
    measures efficiency against them, as `dlbench run` on that machine would."""
    run = store.latest_ceilings_run(node.hostname) if node.hostname else None
    return run.to_dict() if run is not None else None


def _dispatch(
    ray: ModuleType,
    nodes: Sequence[Node],
    plan: FleetPlan,
    node_timeout_s: float | None,
    ceilings: Mapping[str, JSONObject | None],
) -> dict[ObjectRefGenerator, SentTask]:
    """A task per node, pinned to it and holding all its CPUs and GPUs; by its
    streamed answers (first TASK_BEGAN, then the node's answer), the node and when it
    was sent."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(streamed_node_task)
    pending = {}
    for node in nodes:
        ref = task.options(
            num_cpus=node.cpus,
            num_gpus=node.gpus,
            # soft=False: never moved to another node, failed where its node is gone
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.id, soft=False),
            # a retry would run the suite twice, or wait for a node that is gone
            max_retries=0,
            num_returns="streaming",
            # the node's run measures at the priority `dlbench run` has on the node
            runtime_env={"env_vars": {RAY_WORKER_NICENESS_ENV: "0"}},
            name=f"dlbench-fleet {node.name}",
        ).remote(
            plan.suite, plan.suite_text, list(plan.run_options), node_timeout_s,
            ceilings.get(node.id),
        )  # fmt: skip
        pending[ref] = SentTask(node, time.monotonic())
    return pending


def _wait(
    ray: ModuleType, pending: Mapping[ObjectRefGenerator, SentTask], give_up_s: float | None
) -> list[ObjectRefGenerator]:
    """The tasks with an item to read (begun, or ended), waiting in Ray (no polling)
    until one has or the nearest node is to be given up."""
    wait_s = None
    if give_up_s is not None:
        nearest = min(sent.give_up_at(give_up_s) for sent in pending.values())
        wait_s = max(0.0, nearest - time.monotonic())
    ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait_s)
    return list(ready)


def _next_item(ray: ModuleType, task: ObjectRefGenerator) -> object:
    """A task's next streamed item (ray.wait said it is there), or the RayError that
    ended the task (its node died, its worker crashed, its code raised)."""
    from ray.exceptions import RayError

    try:
        return ray.get(next(task))
    except RayError as exc:
        return exc


def _collect(item: object, node: Node, plan: FleetPlan, fleet: FleetOutcome) -> NodeOutcome:
    """The node's run from its task's answer, or a failed one saying why there is none."""
    from ray.exceptions import RayError

    if isinstance(item, RayError):
        return _failed(node, plan, fleet, describe_ray_error(item))
    if not isinstance(item, NodeAnswer):  # Ray runs the node's own dlbench's node_task
        return _failed(node, plan, fleet, FOREIGN_ANSWER)
    output = item.output
    partial: Run | None = None
    if item.run is not None:
        try:
            partial = Run.from_dict(item.run, f"node {node.name}'s run")
        except UserError as exc:
            return _failed(node, plan, fleet, str(exc), output)
        if partial.finished_at is not None:
            return NodeOutcome(node, _marked(partial, fleet.mark(node)))
    if item.timed_out_s is not None:
        cause = f"timed out after {item.timed_out_s:g} s (--node-timeout)"
    else:
        last = _first_line(output.strip().splitlines()[-1]) if output.strip() else "no output"
        cause = f"dlbench run on the node exited with status {item.returncode}: {last}"
    return _failed(node, plan, fleet, cause, output, partial)


def _marked(run: Run, mark: FleetMark) -> Run:
    return replace(run, env=replace(run.env, fleet=mark))


def _failed(
    node: Node,
    plan: FleetPlan,
    fleet: FleetOutcome,
    cause: str,
    output: str | None = None,
    partial: Run | None = None,
) -> NodeOutcome:
    """A run for a node without one of its own: every case it had not finished is a
    failed result naming the cause (the node's output, where it has any, as the
    detail), as the runner records a worker that crashed. A run the node began keeps
    its finished cases (they are in plan order: the runner goes through the plan in
    order, and --repeat's later rounds only replace results)."""
    detail = "\n".join(output.splitlines()[-OUTPUT_TAIL_LINES:]) if output else None
    if partial is not None:
        planned = list(partial.plan)
        done = partial.results
        run = partial
    else:
        planned, done = list(plan.cases), ()
        run = Run(
            id=new_run_id(),
            started_at=now_iso(),
            suite=plan.planned_suite,
            settings=plan.settings,
            env=Fingerprint(hostname=node.hostname) if node.hostname else Fingerprint(),
            command=redacted_argv(list(sys.argv)),
            plan=tuple(planned),
        )
    error = f"node {node.name} {cause}"
    failed = [
        base_result(case, STATUS_FAILED, error=error, error_detail=detail)
        for case in planned[len(done) :]
    ]
    run = replace(run, results=(*done, *failed), finished_at=now_iso())
    return NodeOutcome(node, _marked(run, fleet.mark(node, cause)), failure=cause)


def _store(done: NodeOutcome, store: Store, on_note: Callable[[str], None]) -> list[Path]:
    """The node's run into the store; where the store fails, the file kept instead."""
    try:
        store.import_run(done.run)
    except UserError as exc:  # the store failed (a lost connection): keep the run, go on
        kept = _keep_aside(done.run)
        on_note(f"node {done.node.name}: its run could not be stored ({exc}); kept in "
                f"{kept}: `dlbench import {kept}` once the store is back")  # fmt: skip
        return [kept]
    failures = done.run.failures
    counts = f"{len(done.run.results)} case(s), {failures} failed"
    if done.failure is not None:
        on_note(f"node {done.node.name}: FAILED: {done.failure}; run {done.run.id} stored")
    else:
        on_note(f"node {done.node.name}: run {done.run.id} stored ({counts}, {done.seconds:.1f} s)")
    return []


def _keep_aside(run: Run) -> Path:
    """A node's run as a JSON file in the user's data folder, where the store failed."""
    from dlbench.results.files import write_json

    path = user_data_folder() / "fleet-runs" / f"{run.id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(run, path)
    return path


def describe_ray_error(exc: BaseException) -> str:
    """What Ray says went wrong with a node's task, in one line: the node died, its
    worker crashed, the task was cancelled, or the code raised (its exception)."""
    cause = getattr(exc, "cause", None)  # RayTaskError: what the task's code raised
    if isinstance(cause, BaseException):
        return f"the task raised {type(cause).__name__}: {_first_line(cause)}"
    text = _first_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _first_line(what: object, limit: int = 300) -> str:
    lines = str(what).strip().splitlines()
    line = lines[0].strip() if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def streamed_node_task(
    suite: str,
    suite_text: str | None,
    run_options: list[str],
    timeout_s: float | None,
    ceilings_run: JSONObject | None = None,
) -> Iterator[str | NodeAnswer]:
    """node_task as Ray runs it on the node: first TASK_BEGAN, once the node's worker
    runs it and before the run's timeout starts, then node_task's answer."""
    yield TASK_BEGAN
    yield node_task(suite, suite_text, run_options, timeout_s, ceilings_run)


def node_task(
    suite: str,
    suite_text: str | None,
    run_options: list[str],
    timeout_s: float | None,
    ceilings_run: JSONObject | None = None,
) -> NodeAnswer:
    """On the node: `dlbench run` of the suite into a scratch store and JSON file, and
    what came back: the run's JSON where it wrote one (after each case, so a run
    stopped at `timeout_s` still holds the cases it finished), its exit status, its
    output, and the timeout where it ran past it. `ceilings_run`: the node's stored
    `ceilings` run, put in the scratch store so the run measures efficiency by it."""
    remove_stale_scratch()
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
    try:
        if ceilings_run is not None:
            with open_store(scratch / "store.sqlite") as store:
                store.import_run(Run.from_dict(ceilings_run, "the node's ceilings run"))
        if suite_text is not None:  # a suite file of the parent's: written here, same name
            path = scratch / "suite" / Path(suite).name
            path.parent.mkdir()
            path.write_text(suite_text, encoding="utf-8")
            suite = str(path)
        json_path = scratch / "run.json"
        command = [
            *(sys.executable, "-c", NODE_ENTRY, str(os.getpid()), "run", suite),
            *("--json", str(json_path), "--db", str(scratch / "store.sqlite"), "--quiet"),
            *run_options,
        ]
        try:
            # waits in select() on the output pipe until the run ends or the timeout
            done = subprocess.run(
                command,
                env=node_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=timeout_s,
                check=False,
            )
            answer = NodeAnswer(done.stdout, returncode=done.returncode)
        except subprocess.TimeoutExpired as expired:  # the run was killed (SIGKILL)
            output = expired.output
            text = output.decode(errors="replace") if isinstance(output, bytes) else output
            answer = NodeAnswer(text or "", timed_out_s=timeout_s)
        if json_path.exists():  # written atomically: complete where it exists
            answer = replace(answer, run=json.loads(json_path.read_text(encoding="utf-8")))
        return answer
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def remove_stale_scratch(folder: Path | None = None) -> list[Path]:
    """Remove the scratch folders of node tasks whose process is gone: a task killed
    (its node given up, or its worker lost) cannot remove its own. Each folder names
    its task's process; a folder whose process lives on is left alone."""
    removed = []
    for path in Path(folder or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        pid = path.name.removeprefix(SCRATCH_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def node_environment() -> dict[str, str]:
    """This worker's environment for the node's run, with the thread variables as the
    node itself set them: Ray sets OMP_NUM_THREADS (to the task's CPUs) and
    CUDA_VISIBLE_DEVICES (to its GPUs) inside its worker, and the run's fingerprint
    records those variables, so its numbers would read as measured under settings
    the node never had. The task holds all of the node's CPUs and GPUs, so what Ray
    set restricts nothing. Linux keeps the environment a process started with in
    /proc/self/environ; elsewhere the environment stays as Ray left it."""
    env = dict(os.environ)
    started = _starting_environment()
    if started is None:
        return env
    for name in THREAD_ENV_VARS:
        if name in started:
            env[name] = started[name]
        else:
            env.pop(name, None)
    return env


def _starting_environment() -> dict[str, str] | None:
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return None
    pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0"))
    return {name: value for name, sep, value in pairs if sep}
