"""`dlbench fleet run` on a real Ray cluster, and `fleet report`'s outlier rule.

The cluster is Ray's own multi-node test cluster (ray.cluster_utils.Cluster): a
head and two worker nodes on this machine, each a raylet of its own with one CPU,
started once. Its checks are steps of one test, in order, because pytest-xdist
would give tests of this file to several test processes, each then starting a
cluster of its own on two cores. The report's rule is tested on stored runs built
here, where the numbers are ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import psutil
import pytest
from conftest import DLBENCH, POSTGRES_ENV, cli, dlbench, free_port, null_case, postgres_schema
from factories import make_result, make_run

from dlbench.launch.fleet import (
    SCRATCH_PREFIX,
    Node,
    SentTask,
    describe_ray_error,
    given_up_cause,
    node_task,
    remove_stale_scratch,
    select_nodes,
)
from dlbench.report.fleet_report import MIN_PEERS, OUTLIER_Z, fleet_columns, judge, outliers
from dlbench.results.env import Fingerprint
from dlbench.results.fleet_marks import FleetMark, fleet_mark
from dlbench.results.records import Run
from dlbench.results.store import open_store
from dlbench.results.store_location import PostgresUrl, store_location
from dlbench.spec.case import Settings

TINY_SUITE = """
name: tiny
settings: {min_time: 0, min_iters: 3, warmup: 1}
cases:
  - {workload: mlp, framework: "null"}
"""
# Two seconds of measuring: long enough to lose a node in the middle of it.
SLOW_SUITE = """
name: slow
settings: {min_time: 2, min_iters: 3, warmup: 1}
cases:
  - {workload: mlp, framework: "null", options: {sleep_ms: 50}}
"""
# A case that finishes, then one that never does: what a node's timeout keeps.
HANGING_SUITE = """
name: hanging
settings: {min_time: 0, min_iters: 3, warmup: 1}
cases:
  - {workload: mlp, framework: "null"}
  - {workload: mlp, framework: "null", options: {fault: hang}}
"""


# --- the outlier rule (Iglewicz-Hoaglin), on numbers we choose ---------------------------


def test_the_modified_z_score_flags_the_node_far_from_its_peers():
    verdicts = judge([100.0, 102.0, 98.0, 101.0, 99.0, 60.0])
    # median 99.5, MAD 1.5: z = 0.6745 * (60 - 99.5) / 1.5 = -17.8
    assert verdicts[-1].outlier and verdicts[-1].z == pytest.approx(-17.76, abs=0.01)
    assert not any(v.outlier for v in verdicts[:-1])
    assert all(abs(v.z) < OUTLIER_Z for v in verdicts[:-1])
    # a node 3 MADs off is within the bound: |z| = 0.6745 * 3 = 2.0
    assert not judge([97.0, 100.0, 103.0, 100.0, 106.0])[-1].outlier


def test_too_few_peers_or_no_spread_is_not_judged():
    few = judge([100.0, 10.0])
    assert all(v.z is None and not v.outlier for v in few)
    assert all(v.not_judged == "n=2" for v in few) and MIN_PEERS == 3
    same = judge([100.0, 100.0, 100.0, 40.0])  # MAD 0: no spread to judge 40 against
    assert all(v.not_judged == "MAD 0" and not v.outlier for v in same)


def node_run(run_id: str, node: str, throughput: float | None, cpu: str, **mark: str):
    """A stored fleet node's run of one mlp case at `throughput` samples/s."""
    node_mark = FleetMark(
        fleet_id=mark.get("fleet_id", "fleet-a"),
        started_at="2026-01-01T00:00:00+00:00",
        node_id=node * 8,
        node_ip=f"10.0.0.{node}",
        failure=mark.get("failure"),
    )
    if node_mark.failure is None:
        result = make_result(throughput=throughput, flags=mark.get("flags", "").split() or [])
    else:
        result = make_result(status="failed", error=f"node {node} {node_mark.failure}")
    env = Fingerprint(cpu_model=cpu, hostname=f"h{node}", fleet=node_mark)
    return make_run([result], id=run_id, env=env, finished_at="2026-01-01T00:01:00+00:00")


def test_fleet_report_flags_an_outlier_and_lists_failed_nodes(isolated_store):
    runs = [
        node_run("r1", "1", 100.0, "CPU A"),
        node_run("r2", "2", 102.0, "CPU A"),
        node_run("r3", "3", 98.0, "CPU A", flags="throttled:thermal"),
        node_run("r4", "4", 40.0, "CPU A"),
        node_run("r5", "5", 500.0, "CPU B"),  # alone on its hardware: not judged
        node_run("r6", "6", None, "CPU A", failure="NodeDiedError: the node is gone"),
        node_run("r0", "7", 1.0, "CPU A", fleet_id="fleet-0"),  # another fleet's
    ]
    with open_store(isolated_store) as store:
        for run in runs:
            store.import_run(run)
    proc = cli("fleet", "report", "fleet-a")
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout
    assert "6 node(s)" in table and "10.0.0.7" not in table
    assert table.count("OUTLIER") == 1 and "throttled:thermal" in table
    assert "not judged (n=1)" in table
    assert "failed: NodeDiedError: the node is gone" in table
    (line,) = [text for text in table.splitlines() if text.startswith("outlier: node")]
    assert line.startswith("outlier: node 10.0.0.4 44444444 on mlp") and "4 CPU A nodes" in line
    # without an id: the newest fleet's runs (fleet-a's were imported last)
    assert "fleet fleet-a" in cli("fleet", "report").stdout
    proc = cli("fleet", "report", "fleet-nope")
    assert proc.returncode == 2 and "no fleet 'fleet-nope'" in proc.stderr


def test_cases_apart_only_in_their_threads_keep_a_row_each():
    """A suite that runs a case at 1 thread and at all of them: the two line up across
    nodes by their place in the suite, and neither hides the other."""
    runs = []
    for node, (one, all_) in enumerate([(10.0, 30.0), (11.0, 31.0), (9.0, 3.0)], start=1):
        run = node_run(f"r{node}", str(node), None, "CPU A")
        results = [make_result(threads=1, throughput=one), make_result(threads=4, throughput=all_)]
        runs.append(replace(run, results=results))
    columns = fleet_columns(runs)
    assert [len(column.cells) for column in columns] == [2, 2, 2]
    names = sorted(columns[0].cells)
    assert names[0].endswith("(case 1)") and names[1].endswith("(case 2)")
    assert [column.cells[names[0]].throughput for column in columns] == [10.0, 11.0, 9.0]
    flagged = outliers(columns)
    assert [(o.node, o.case) for o in flagged] == [(columns[2].mark.node, names[1])]


def test_nodes_are_chosen_alive_by_resource_and_label():
    def described(node_id, alive=True, cpus=1.0, **resources):
        return {
            "NodeID": node_id,
            "Alive": alive,
            "NodeManagerAddress": "10.0.0.1",
            "Resources": {"CPU": cpus, **resources},
            "Labels": {"tier": "gold"} if resources else {},
        }

    nodes = [
        described("a"),
        described("b", alive=False),
        described("c", bench=1.0),
        described("d", cpus=0.0),  # a head kept free of work
    ]
    notes: list[str] = []
    assert [n.id for n in select_nodes(nodes, on_note=notes.append)] == ["a", "c"]
    assert notes and "no CPUs or GPUs" in notes[0]
    assert [n.id for n in select_nodes(nodes, resource="bench")] == ["c"]
    assert [n.id for n in select_nodes(nodes, label=("tier", "gold"))] == ["c"]


def test_a_node_is_given_up_by_the_clock_of_its_task_once_it_has_begun():
    # --node-timeout 10: a node is given up 15 s (its grace past the timeout) after its
    # task was sent while the task waits to begin, and 15 s after it began once it has
    # (a worker 8 s in starting keeps its run's whole 10 s and the cases it finishes)
    sent = SentTask(Node("n1", "10.0.0.1", "h1", cpus=1.0, gpus=0.0), sent_at=100.0)
    assert sent.give_up_at(15.0) == 115.0
    assert given_up_cause(sent, 10.0, 15.0) == (
        "did not start its task within 15 s of it being sent (busy with other work, or "
        "unreachable): given up"
    )
    sent.began_at = 108.0
    assert sent.give_up_at(15.0) == 123.0
    assert given_up_cause(sent, 10.0, 15.0) == (
        "timed out after 10 s (--node-timeout), and its task did not answer 5 s later: given up"
    )


@pytest.mark.integration  # _collect imports Ray's exceptions
def test_a_node_answering_in_another_form_fails_alone_saying_so():
    pytest.importorskip("ray.exceptions")
    from dlbench.launch.fleet import FOREIGN_ANSWER, FleetOutcome, FleetPlan, _collect

    case = null_case()
    plan = FleetPlan("tiny.yaml", None, (), "tiny", Settings(), (case,))
    node = Node("n1", "10.0.0.1", "h1", cpus=1.0, gpus=0.0)
    # an older dlbench's node_task answered with a dict
    older = {"run": None, "returncode": 0, "timed_out_s": None, "output": ""}
    outcome = _collect(older, node, plan, FleetOutcome("fleet-1", "2026-11-29T00:00:00+00:00"))
    assert outcome.failure == FOREIGN_ANSWER
    (failed,) = outcome.run.results
    assert failed.status == "failed" and FOREIGN_ANSWER in (failed.error or "")


@pytest.mark.integration
def test_a_ray_error_is_one_line_naming_its_cause():
    exceptions = pytest.importorskip("ray.exceptions")
    raised = exceptions.RayTaskError("node_task", "Traceback ...", ValueError("bad suite\nmore"))
    assert describe_ray_error(raised) == "the task raised ValueError: bad suite"
    died = exceptions.NodeDiedError("the node 1a2b died\nits raylet is gone")
    assert describe_ray_error(died) == "NodeDiedError: the node 1a2b died"
    assert describe_ray_error(KeyError()) == "KeyError"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuch"], "unknown suite 'nosuch'"),
        (["tiny.yaml", "--ray", "bogus"], "--ray bogus: expected HOST:PORT"),
        (["tiny.yaml", "--ray", "127.0.0.1:{port}"], "no Ray cluster answers there"),
        (["tiny.yaml", "--node-label", "tier"], "expected KEY=VALUE"),
    ],
)
@pytest.mark.integration
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, monkeypatch):
    if "{port}" in args or "bogus" in args:  # read once the suite is checked
        pytest.importorskip("ray", reason="needs dlbench[fleet]")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY_SUITE)
    args = [arg.format(port=free_port()) for arg in args]
    if "--ray" not in args:
        args += ["--ray", "127.0.0.1:1"]
    proc = cli("fleet", "run", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.integration
def test_without_ray_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    proc = cli("fleet", "run", "quick", "--ray", "127.0.0.1:1")
    assert proc.returncode == 2 and "pip install 'dlbench[fleet]'" in proc.stderr


# --- a real cluster ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    cluster_utils = pytest.importorskip("ray.cluster_utils", reason="needs dlbench[fleet]")
    # Node deaths seen within a second or two, not Ray's default half a minute.
    system = {
        # a lost node is known in seconds
        "health_check_period_ms": 500,
        "health_check_failure_threshold": 3,
        # no idle workers started ahead for each driver (every fleet run is one): a
        # node's task starts the one worker it needs, and the test's CPU goes to tests
        "enable_worker_prestart": False,
        "prestart_worker_first_driver": False,
    }
    made = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": system}
    )
    try:
        first = made.add_node(num_cpus=1)
        second = made.add_node(num_cpus=1, resources={"bench": 1})
        made.wait_for_nodes()
        yield SimpleNamespace(cluster=made, head=made.head_node, first=first, second=second)
    finally:
        made.shutdown()


def fleet_runs_by_node(db: Path | PostgresUrl, fleet_id: str) -> dict[str, tuple[FleetMark, Run]]:
    """The fleet's stored runs by the Ray node id each was marked with."""
    with open_store(db, read_only=True) as store:
        runs = [store.load_run(s.id) for s in store.list_runs()]
    found = {}
    for run in runs:
        mark = fleet_mark(run)
        if mark is not None and mark.fleet_id == fleet_id:
            found[mark.node_id] = (mark, run)
    return found


def fleet_id_of(stderr: str) -> str:
    """The id in the line `fleet run` says as it sends the tasks."""
    return stderr.split("fleet ", 1)[1].split(":", 1)[0]


def scratch_folders() -> list[Path]:
    """The node tasks' scratch folders on this machine (every test node is on it)."""
    return list(Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"))


@contextlib.contextmanager
def cpu_held(address: str, node_id: str, folder: Path):
    """Other work on the node (a Ray task of another driver) holding its one CPU."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    holding = folder / "holding"

    def hold(seconds: float) -> None:  # nested: Ray sends it by value
        holding.touch()
        time.sleep(seconds)

    ray.init(address=address, log_to_driver=False, logging_level="WARNING")
    try:
        pinned = NodeAffinitySchedulingStrategy(node_id, soft=False)
        blocker = ray.remote(hold).options(num_cpus=1, scheduling_strategy=pinned).remote(120)
        deadline = time.monotonic() + 30
        while not holding.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # until it runs, and so holds the CPU
        yield
        ray.cancel(blocker, force=True)
    finally:
        ray.shutdown()


@pytest.mark.slow
@pytest.mark.long
def test_a_fleet_on_a_ray_cluster(cluster, tmp_path):
    tiny, slow, hanging = (tmp_path / f"{n}.yaml" for n in ("tiny", "slow", "hanging"))
    tiny.write_text(TINY_SUITE)
    slow.write_text(SLOW_SUITE)
    hanging.write_text(HANGING_SUITE)
    db = tmp_path / "fleet.sqlite"
    address = cluster.cluster.address
    head, first, second = (node.node_id for node in (cluster.head, cluster.first, cluster.second))

    # Every node runs the suite and each node's run is stored with its node's mark;
    # the settings given reach every node's run.
    proc = dlbench(
        "fleet", "run", str(tiny), "--ray", address, "--db", str(db),
        "--min-iters", "4", "--label", "v1.2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    every = fleet_runs_by_node(db, fleet_id_of(proc.stderr))
    assert set(every) == {head, first, second}
    for mark, run in every.values():
        assert mark.failure is None and run.suite == "tiny" and run.results[0].ok
        assert run.settings.min_iters == 4 and run.settings.label == "v1.2"
        assert run.env.cpu_model  # the node's own fingerprint
        # OMP_NUM_THREADS as the node has it (unset), not as Ray sets it for its task,
        # and measured at the node's own priority, not the niceness of Ray's workers
        assert "OMP_NUM_THREADS" not in run.env.thread_env
        assert run.env.niceness == os.getpriority(os.PRIO_PROCESS, 0)
    report = cli("fleet", "report", "--db", str(db))
    assert report.returncode == 0, report.stderr
    assert all(node[:8] in report.stdout for node in (head, first, second)), report.stdout

    # --resource: only the node that has it. Its --node-timeout, kept on the node,
    # stops the run there, and the case that finished is kept. 15 s: the first case's
    # start and run take ~1 s here when quiet and ~4 s beside 6 busy processes.
    proc = dlbench(
        "fleet", "run", str(hanging), "--ray", address, "--resource", "bench",
        "--node-timeout", "15", "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    ((node, (mark, run)),) = fleet_runs_by_node(db, fleet_id_of(proc.stderr)).items()
    assert node == second and mark.failure == "timed out after 15 s (--node-timeout)"
    assert [r.status for r in run.results] == ["ok", "failed"]
    assert "timed out after 15 s" in run.results[1].error and run.env.cpu_model
    # Into a team's PostgreSQL store (where the tests have a server): the node's run is
    # stored there, and the URL's password is neither printed nor stored.
    if os.environ.get(POSTGRES_ENV):
        with postgres_schema(os.environ[POSTGRES_ENV]) as url:
            proc = dlbench("fleet", "run", str(tiny), "--ray", address, "--resource", "bench",
                           "--db", url)  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            password = urlsplit(url).password
            assert password and password not in proc.stdout + proc.stderr
            ((node, (_, run)),) = fleet_runs_by_node(store_location(url), fleet_id_of(
                proc.stderr)).items()  # fmt: skip
            assert node == second and run.results[0].ok
            assert password not in json.dumps(run.to_dict())
    proc = cli("fleet", "run", str(tiny), "--ray", address, "--resource", "gpu-a100")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "dlbench: error: no alive node with resource 'gpu-a100' in the Ray cluster"
    )

    # A fleet where one node is busy with other work (its task cannot begin: given up
    # once the timeout and its grace are past), one node is lost while it measures,
    # and the head goes on and is stored. 30 s: the head's run takes ~3 s here when
    # quiet and ~5 s beside 4 busy processes (CI's busy machine ran it past 10 s when
    # Ray's niceness still reached it); the wait is idle (the busy node's task never
    # begins), and this test runs among the first, beside the CPU-bound tests.
    with cpu_held(address, first, tmp_path):
        before = set(scratch_folders())
        spawned = subprocess.Popen(
            [*DLBENCH, "fleet", "run", str(slow), "--ray", address, "--node-timeout", "30",
             "--db", str(db)],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        started = spawned.stderr.readline()  # said as the tasks are sent
        # lost while it measures: once the head's and its tasks have begun (each makes
        # its scratch folder first; the busy node's cannot start), not before
        deadline = time.monotonic() + 60
        while len(set(scratch_folders()) - before) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # into its run
        cluster.cluster.remove_node(cluster.second, allow_graceful=False)
        rest = spawned.communicate(timeout=120)[1]
    assert spawned.returncode == 1, started + rest
    runs = fleet_runs_by_node(db, fleet_id_of(started))
    assert runs[head][0].failure is None and runs[head][1].results[0].ok
    assert runs[first][0].failure == (
        "did not start its task within 35 s of it being sent (busy with other work, or "
        "unreachable): given up"
    )
    died = runs[second][0].failure
    assert died and ("NodeDiedError" in died or "WorkerCrashedError" in died), died
    for node in (first, second):
        (result,) = runs[node][1].results
        assert result.status == "failed" and result.error.startswith(f"node {runs[node][0].node} ")
    # nothing of the lost node's run goes on (its `dlbench run` dies with its task)
    time.sleep(0.5)
    commands = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
    assert not [command for command in commands if SCRATCH_PREFIX in command]
    # a scratch folder left by a killed task goes with the next task on the machine
    remove_stale_scratch()


@pytest.mark.integration
def test_a_node_measures_against_its_own_stored_ceilings(tmp_path):
    """The node task, called as Ray calls it on the node: given the node's stored
    `ceilings` run, its `dlbench run` carries those ceilings (efficiency is measured
    against them), as a `dlbench run` on that machine would."""
    from dlbench.results.env import fingerprint

    here = fingerprint().hostname
    gemm = make_result(workload="gemm", device="cpu", gflops=50.0, primary_metric="gflops")
    ceilings = make_run([gemm], id="ceil-1", suite="ceilings", env={"hostname": here},
                        finished_at="2026-01-01T00:01:00+00:00")  # fmt: skip
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    answer = node_task(str(suite), TINY_SUITE, [], None, ceilings.to_dict())
    assert answer.returncode == 0 and answer.run is not None, answer.output
    carried = answer.run["env"]["ceilings"]
    assert carried["source_run"] == "ceil-1" and carried["values"] == {"cpu|gflops|fp32": 50.0}
    alone = node_task(str(suite), TINY_SUITE, [], None)
    assert alone.run is not None and alone.run["env"].get("ceilings") is None


@pytest.mark.integration
def test_only_the_scratch_folders_of_dead_tasks_are_removed(tmp_path):
    """A killed node task cannot remove its scratch folder; the next one removes the
    folders whose process is gone, and leaves those whose process lives."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f"{SCRATCH_PREFIX}{dead.pid}-abc"
    alive = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-def"
    other = tmp_path / "unrelated-folder"
    for folder in (left, alive, other):
        folder.mkdir()
    assert remove_stale_scratch(tmp_path) == [left]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name])


def test_the_cli_reference_has_the_fleet_subcommands():
    from test_docs import load_generator

    from dlbench.cli.parser import build_parser

    page = load_generator().render(build_parser())
    run = page.split("### dlbench fleet run\n", 1)[1].split("### dlbench fleet report\n")[0]
    options = ("--ray", "--resource", "--node-label", "--node-timeout", "--min-time", "--label")
    for option in (*options, "--db"):
        assert option in run
