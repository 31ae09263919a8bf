"""Shared fixtures: every test gets its own store, never the user's."""

from __future__ import annotations

import ast
import contextlib
import fcntl
import http.server
import importlib.util
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlbench.backends.framework_guard import FRAMEWORK_MODULES
from dlbench.results.env import fingerprint
from dlbench.spec.case import Case, Settings
from dlbench.spec.worker_request import SHARED_COMPILE_CACHE_ENV
from dlbench.worker.engine_server import free_port

SESSION_TEMP: list[Path] = []  # the session's folder, shared by its test processes

# The suite runs three test processes on two cores, each starting workers: the cores are
# always oversubscribed. There, OpenMP's default wait (GNU libgomp's, torch's) spins at
# every barrier while its partner thread waits for a core, and burns the rest of its
# time slice: a ResNet-50 forward at two threads took 3.8 times the CPU of a passive
# wait beside two busy processes (bench/omp_wait_under_load.py). Nothing the tests
# assert depends on the wait policy; a user's run keeps the framework's default
# (dlbench sets none: on an idle machine the spin is the faster).
# Set before any test imports torch, and inherited by every process the tests start.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Three facts of the machine are asked of another process once per process: Python's
# `uname -p` (platform.platform()), the installed frameworks' versions (vLLM's from its
# own environment's python) and nvidia-smi's GPUs. Asked here, so that no unit test
# starts them (unit_test_stays_in_process below).
fingerprint()

# A shell without job control starts its background commands with SIGINT ignored, and
# children inherit that: the Ctrl-C tests' SIGINT would then be lost on dlbench. The test
# process takes Python's own handler back, so that it and the processes it starts (which
# begin with the default disposition) answer SIGINT as under a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def installed(module: str, reason: str | None = None) -> pytest.MarkDecorator:
    """Skip unless `module` is installed, found without importing it. Every test process
    collects every test module, so a framework a module imports at its top is imported
    in each (transformers: 1.8 s of CPU beside torch), where only the processes that run
    its tests need it."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package that is there but does not import
        found = False
    return pytest.mark.skipif(not found, reason=reason or f"needs {module}")


def session_folder(name: str) -> Path:
    """A folder of the test session shared by pytest-xdist's test processes (what is
    made once for every test goes there; its writers lock it)."""
    folder = SESSION_TEMP[0] / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(autouse=True, scope="session")
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One artifact cache (ONNX exports, reference outputs) for the whole session,
    shared by pytest-xdist's test processes: dlbench writes it atomically."""
    session_temp = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:  # each test process has its own basetemp
        session_temp = session_temp.parent
    SESSION_TEMP[:] = [session_temp]
    cache = session_temp / "artifacts"
    cache.mkdir(exist_ok=True)
    os.environ["DLBENCH_CACHE"] = str(cache)
    # torch.compile's caches shared by every worker of the session: the same small
    # graphs compile once (test_cli_quick_suite unsets it and proves cold).
    compile_cache = session_temp / "compile-cache"
    compile_cache.mkdir(exist_ok=True)
    os.environ[SHARED_COMPILE_CACHE_ENV] = str(compile_cache)
    return cache


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked long first, then slow (each in their own order): on several test
    processes the long ones start at once and the short ones fill in behind them,
    rather than one long test running on its own at the end while the others wait.
    Tests marked `alone` last: each waits for every running test to end (below), and
    at the end those are short; among the slow ones at the start, one waited for a
    minute-long test while the cores it would not share stood idle. (pytest-xdist's
    loadgroup then sends a group of tests, such as the ones that read the session's
    vLLM run, before any single test: it orders its units by their number of tests.)
    The tests that start no process come last before those: an integration test sent
    late (a 9 s one once) ran among the `alone` ones, each core but one idle."""
    items.sort(
        key=lambda item: (
            is_alone(item),
            not has(item, "long"),
            not has(item, "slow"),
            not starts_processes(item),
        )
    )
    for item in items:
        if not starts_processes(item):
            item.add_marker(pytest.mark.unit)
    loaded = sorted(name for name in FRAMEWORK_PACKAGES if name in sys.modules)
    if unit_only(config) and loaded:
        _fail_the_fast_tier(config, items, loaded)


# What collecting the fast tier imported, where it imported a framework
COLLECTION_LOADED: list[str] = []


def _fail_the_fast_tier(config: pytest.Config, items: list[pytest.Item], loaded: list[str]) -> None:
    """The fast tier's collection imported a framework, so the guard below (what a test
    loads, before against after) cannot see a unit test that does: its first unit test
    alone runs, and fails saying so. (Raising here, or pytest.exit, breaks a run on
    pytest-xdist's test processes, which collect on their own.)"""
    COLLECTION_LOADED[:] = loaded
    first = next((item for item in items if not starts_processes(item)), None)
    config.hook.pytest_deselected(items=[item for item in items if item is not first])
    items[:] = [first] if first is not None else []


# The fast tier (`python -m pytest -m unit`, for the edit-test loop): every test but
# those marked with one of these. A test marked unit starts no process and imports no
# framework; `unit_test_stays_in_process` below holds it to that in every run.
NOT_UNIT = ("slow", "alone", "integration", "gpu")
# Fixtures of module or session scope that start processes or import a framework: they
# are set up before a test's own fixtures, out of the guard's sight, so a test that
# uses one is never unit (a new such fixture goes here)
PROCESS_FIXTURES = frozenset({"cluster", "keyed_llama_server", "llama_checkpoint",
                              "llama_server", "repeated_run", "vllm_run"})  # fmt: skip
# The registry's frameworks (what a worker blocks), and the heavy libraries that come
# with them or with a kind of case
FRAMEWORK_PACKAGES = (*FRAMEWORK_MODULES, "keras", "tf_keras", "onnx", "transformers", "nncf",
                      "torchao", "ray", "mlperf_loadgen")  # fmt: skip


@pytest.fixture(autouse=True)
def unit_test_stays_in_process(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A unit test that starts a process fails at the start, and one that imports a
    framework fails at its end, each naming the marker it needs instead."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    if COLLECTION_LOADED:
        pytest.fail(
            f"collecting the unit tests imported {', '.join(COLLECTION_LOADED)}: a test module "
            "imports it at its top; import it inside the tests that need it, or skip the "
            "module with pytest.importorskip at its top"
        )
    import multiprocessing.process

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(
            "a unit test started a process: mark it integration (tests/conftest.py)"
        )

    start_popen = subprocess.Popen.__init__

    def refuse_popen(popen: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        # Matplotlib's first import on a machine builds its font cache by running
        # fontconfig's fc-list: the library's one-time set-up, not the test's work (a
        # fresh machine's first chart test failed here)
        command = args[0] if args else kwargs.get("args")
        if isinstance(command, list | tuple) and command and command[0] == "fc-list":
            start_popen(popen, *args, **kwargs)
            return
        refuse()

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_popen)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    before = {name for name in FRAMEWORK_PACKAGES if name in sys.modules}
    yield
    imported = sorted({name for name in FRAMEWORK_PACKAGES if name in sys.modules} - before)
    assert not imported, (
        f"a unit test imported {', '.join(imported)}: mark it integration (tests/conftest.py)"
    )


def unit_only(config: pytest.Config) -> bool:
    """The fast tier's run (`-m unit`)."""
    return str(config.getoption("markexpr", "")).strip() == "unit"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the fast tier's run, a test module that skips whole without a framework (a
    `pytest.importorskip` of one at its top) is not imported: it has no unit test, as a
    unit test imports no framework, and importing it would load the framework into the
    run (torch: seconds) and hide any unit test that imports it from the guard below."""
    if not unit_only(config) or collection_path.suffix != ".py":
        return None
    # None, not False, where it is collected: pytest's own --ignore answers after this
    return any(n in FRAMEWORK_PACKAGES for n in _skipped_whole_without(collection_path)) or None


def _skipped_whole_without(path: Path) -> list[str]:
    """The modules a test file's top-level statements `pytest.importorskip`."""
    names = []
    for statement in ast.parse(path.read_text(), str(path)).body:
        call = getattr(statement, "value", None)
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "importorskip"
            and call.args
            and isinstance(call.args[0], ast.Constant)
        ):
            names.append(str(call.args[0].value))
    return names


def has(item: pytest.Item, marker: str) -> bool:
    return item.get_closest_marker(marker) is not None


def is_alone(item: pytest.Item) -> bool:
    return has(item, "alone")


def starts_processes(item: pytest.Item) -> bool:
    """Marked as a test that starts a process, or using a fixture that does: the
    tests that are not the fast tier's."""
    if any(has(item, marker) for marker in NOT_UNIT):
        return True
    return bool(PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())))


# The suite runs on several test processes (pytest-xdist's -n in addopts). A test
# marked `alone` measures time or CPU use, so nothing else may run beside it:
# every test holds the cores lock shared while it runs (set-up and tear-down
# included), an `alone` test holds it exclusively. The turnstile, taken first,
# lets a waiting `alone` test in before tests that arrive after it.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    with cores_held(item.config, is_alone(item)):
        return (yield)


@contextlib.contextmanager
def cores_held(config: pytest.Config, alone: bool) -> Iterator[None]:
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one test process: nothing runs beside
        yield
        return
    # xdist gives each test process the folder popen-gwN inside the run's own
    locks = Path(config.option.basetemp).parent
    with open(locks / "turnstile", "a") as turnstile, open(locks / "cores", "a") as cores:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(cores, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield  # closing the files releases both locks


@pytest.fixture(autouse=True)
def isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "store.sqlite"
    monkeypatch.setenv("DLBENCH_DB", str(db))
    return db


FAST = Settings(min_time_s=0.0, min_iters=3, warmup_iters=1, timeout_s=120.0)


def null_case(**options: str) -> Case:
    return Case(
        workload="mlp",
        framework="null",
        compile="default",
        device="cpu",
        threads=1,
        options=tuple(sorted(options.items())),
    )


DLBENCH = [sys.executable, "-m", "dlbench"]


def dlbench(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run the real command line, as a user does, and capture what it says."""
    options: dict[str, Any] = {"capture_output": True, "text": True, "timeout": 300}
    return subprocess.run([*DLBENCH, *args], **{**options, **kwargs})


def spawn_dlbench(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Start the command line without waiting, for tests that signal or kill it."""
    options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    return subprocess.Popen([*DLBENCH, *args], **{**options, **kwargs})


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in this process, for what needs no worker (user errors,
    store commands): the same exit code and output as `dlbench`, without a new
    interpreter. The subprocess tests above keep proving the real entry point."""
    from dlbench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's own errors and --help
            code = exit_.code if isinstance(exit_.code, int) else 2
    return subprocess.CompletedProcess([*DLBENCH, *args], code, out.getvalue(), err.getvalue())


# A PostgreSQL server's URL, password included (`.ci/postgres start` prints one, and
# .ci/run passes it here): the shared-store tests run against it, and are skipped,
# saying why, where it is not set.
POSTGRES_ENV = "DLBENCH_TEST_POSTGRES"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A store URL in a schema of its own (made for the test, dropped after it)."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"no PostgreSQL server: set {POSTGRES_ENV} (.ci/postgres start DIR)")
    with postgres_schema(url) as scoped:
        yield scoped


@contextlib.contextmanager
def postgres_schema(url: str) -> Iterator[str]:
    """`url` in a schema made for the caller and dropped after, as a team keeps dlbench
    beside other tables: `?options=-csearch_path%3DNAME`."""
    import psycopg

    schema = f"test_{os.getpid()}_{time.monotonic_ns()}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    joiner = "&" if "?" in url else "?"
    try:
        yield f"{url}{joiner}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="session")
def llama_checkpoint() -> Path:
    """llm-tiny's checkpoint folder (its tokenizer.json) and GGUF file's folder."""
    pytest.importorskip("llama_cpp.server.app", reason="needs llama-cpp-python[server]")
    from dlbench.reference.decoder import checkpoint_folder

    return checkpoint_folder("llm-tiny", 0)


@pytest.fixture(scope="session")
def llama_server(llama_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1 serving llm-tiny's GGUF,
    for the test process's session. It serves requests one after another
    (interrupt_requests off: by default a new request cuts the one streaming)."""
    with served_llm_tiny(tmp_path_factory) as url:
        yield url


# The API key the keyed server wants (a test's own, no secret)
LLAMA_API_KEY = "test-key-9f2c1e"


@pytest.fixture(scope="session")
def keyed_llama_server(
    llama_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The same server started with an API key, as a user's server may be."""
    with served_llm_tiny(tmp_path_factory, "--api_key", LLAMA_API_KEY) as url:
        yield url


@contextlib.contextmanager
def served_llm_tiny(tmp_path_factory: pytest.TempPathFactory, *options: str) -> Iterator[str]:
    import httpx

    from dlbench.backends.llama_cpp.gguf_export import CONVERTER, EXPORT, GGUF_FILE
    from dlbench.reference.decoder import converted

    folder, _ = converted("llama-cpp", "llm-tiny", 0, EXPORT, CONVERTER)
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"  # a file: a pipe could fill
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(folder / GGUF_FILE),
         "--model_alias", "llm-tiny", "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", "512", "--n_threads", "1", "--n_threads_batch", "1",
         "--interrupt_requests", "False", *options],
        stdout=subprocess.DEVNULL, stderr=log.open("w"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:  # a keyed server answers 401: it is up
            if httpx.get(f"{url}/v1/models", timeout=1).status_code in (200, 401):
                break
        except httpx.TransportError:
            time.sleep(0.2)
        if server.poll() is not None:
            pytest.fail(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
    else:
        server.kill()
        pytest.fail("llama_cpp.server did not answer within 60 s")
    yield url
    server.terminate()
    server.wait(timeout=30)


class JsonOnly(http.server.BaseHTTPRequestHandler):
    """A server that lists one model and answers a completion whole, never streaming."""

    def do_GET(self) -> None:
        self._answer(b'{"object": "list", "data": [{"id": "whole", "object": "model"}]}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(b'{"choices": [{"text": "whole"}]}')

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return  # quiet: the tests read the client's record, not the server's log


@pytest.fixture
def json_only_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), JsonOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def require_ready(*frameworks: str) -> None:
    """Skip, naming what is missing, where a framework is not ready here (its package, or
    a piece it needs: openvino-genai without optimum-intel). The README's test command
    installs the dev extras only; CI installs every piece, so nothing skips there."""
    from dlbench.spec.registry import FRAMEWORKS

    for name in frameworks:
        missing = FRAMEWORKS[name].missing()
        if missing:
            pytest.skip(f"{name} is not ready here: {', '.join(missing)} missing "
                        f"({FRAMEWORKS[name].install_hint})")  # fmt: skip


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("needs Debian's chromium (installed by .ci/run)")
    # Chromium makes its singleton socket under $TMPDIR: a test's own long one (pytest's
    # tmp_path) passes the 108 bytes a socket path may hold, and Chromium dies
    short = "/tmp" if os.path.isdir("/tmp") else None
    with tempfile.TemporaryDirectory(dir=short) as profile:
        return subprocess.run(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **({"TMPDIR": short} if short else {})},
        )


# Appended to a copy of a report by the layout test (never to the product's page): it
# writes onto <body> whether the page is wider than the window, and every chart label
# that runs past its chart's box.
LAYOUT_PROBE = """<script>
const page = document.documentElement;
const clipped = [];
for (const svg of document.querySelectorAll('svg.chart')) {
  const box = svg.getBoundingClientRect();  // both on the screen: rotations applied
  for (const text of svg.querySelectorAll('text')) {
    const b = text.getBoundingClientRect();
    if (b.left < box.left - 1 || b.top < box.top - 1 || b.right > box.right + 1 ||
        b.bottom > box.bottom + 1)
      clipped.push(text.textContent.slice(0, 40));
  }
}
document.body.dataset.overflow = String(page.scrollWidth > window.innerWidth);
document.body.dataset.clipped = JSON.stringify(clipped);
</script>"""


def assert_page_fits(page: str, width: int, folder: Path) -> None:
    """The page, in headless Chromium at `width` px: no wider than the window, and no
    chart label past its chart's edge."""
    import re
    from html import unescape

    probed = folder / f"probed-{width}.html"
    probed.write_text(page.replace("</body>", LAYOUT_PROBE + "</body>"))
    shown = chromium(f"--window-size={width},900", "--dump-dom", probed.as_uri())
    dom = shown.stdout
    assert dom, f"chromium showed nothing: {shown.stderr[-2000:]}"
    assert 'data-overflow="false"' in dom, f"the page is wider than {width} px"
    clipped = re.search(r'data-clipped="([^"]*)"', dom)
    assert clipped is not None and unescape(clipped.group(1)) == "[]", clipped
