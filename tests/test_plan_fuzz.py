"""Property-based fuzzing of every parser of user input.

Random and malformed YAML suites, command lines and run files must end in a
valid plan/run or a UserError (exit code 2 in the CLI) - never another
exception - and a refused import leaves the store as it was.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import yaml
from factories import timed_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlbench.cli.parser import build_parser
from dlbench.cli.run_commands import request_from_args
from dlbench.errors import UserError
from dlbench.plan.build import RunRequest, build_plan
from dlbench.plan.suites import CASE_KEYS, SETTING_KEYS, TOP_KEYS
from dlbench.results.records import run_from_json
from dlbench.results.store import Store

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
NAMES = st.sampled_from(
    [
        "mlp",
        "gemm",
        "add",
        "mnist-cnn",
        "bert-base",
        "null",
        "torch",
        "jax",
        "onnxruntime",
        "eager",
        "compile",
        "default",
        "infer",
        "train",
        "cpu",
        "cuda",
        "offline",
        "single-stream",
        "",
        "nope",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10**12),
    NAMES,
    st.text(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6) | NAMES, inner, max_size=3)
    ),
    max_leaves=8,
)


def mapping_of(keys: tuple[str, ...]) -> st.SearchStrategy[dict]:
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=5), VALUES, max_size=len(keys))


SUITES = st.fixed_dictionaries(
    {},
    optional={
        "cases": st.lists(mapping_of(CASE_KEYS), max_size=3) | VALUES,
        "settings": mapping_of(SETTING_KEYS) | VALUES,
        **{k: VALUES for k in TOP_KEYS if k not in ("cases", "settings")},
    },
)


def plan_or_user_error(text: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        handle.write(text)
    try:
        plan = build_plan(RunRequest(suite=handle.name))
        assert plan.cases
    except UserError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
    finally:
        Path(handle.name).unlink()


@FUZZ
@given(SUITES)
def test_random_suites_plan_or_fail_clearly(suite):
    plan_or_user_error(yaml.safe_dump(suite))


@FUZZ
@given(st.text(max_size=200))
def test_random_text_as_a_suite(text):
    plan_or_user_error(text)


OPTIONS = st.sampled_from(
    [
        "--workload",
        "--framework",
        "--compile",
        "--mode",
        "--scenario",
        "--device",
        "--batch-size",
        "--threads",
        "--interop-threads",
        "--param",
        "--min-time",
        "--min-iters",
        "--warmup",
        "--timeout",
        "--seed",
    ]
)
ARGV = st.lists(
    st.one_of(
        OPTIONS,
        NAMES,
        st.integers(-5, 10**6).map(str),
        st.sampled_from(["1e400", "nan", "-0", "size=8", "seq=0", "x=y"]),
        st.text(max_size=6),
    ),
    max_size=8,
)


@FUZZ
@given(ARGV)
def test_random_command_lines_plan_or_fail_clearly(argv):
    try:
        args = build_parser().parse_args(["run", *argv])
        build_plan(request_from_args(args))
    except UserError as exc:
        assert str(exc)


VALID = json.loads(json.dumps(timed_run("fuzz", 1.0, 1).to_dict()))


def mutated(data: dict, path: list, value) -> dict:
    copy = json.loads(json.dumps(data))
    target = copy
    for key in path[:-1]:
        target = target[key] if isinstance(target, dict) else target[0]
    if isinstance(target, dict) and path:
        target[path[-1]] = value
    return copy


PATHS = st.sampled_from(
    [
        ["id"],
        ["results"],
        ["env"],
        ["schema_version"],
        ["results", "x"],
        ["results", "latency_ms"],
        ["results", "status"],
        ["results", "params"],
        ["results", "samples_ms"],
        ["results", "threads"],
        ["plan"],
        ["settings"],
        ["finished_at"],
    ]
)


@FUZZ
@given(PATHS, VALUES)
def test_mutated_run_files_load_or_fail_clearly_and_never_touch_the_store(path, value):
    text = json.dumps(mutated(VALID, path, value))
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "s.sqlite"
        with Store(db) as store:
            store.import_run(timed_run("existing", 1.0, 1))
        try:
            run = run_from_json(text, "fuzz.json")
        except UserError:
            with sqlite3.connect(db) as check:
                assert check.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
            return
        with Store(db) as store:
            try:
                store.import_run(run)
            except UserError as exc:
                assert "already in store" in str(exc)
                return
            assert store.load_run(run.id).id == run.id


@FUZZ
@given(VALUES)
def test_random_json_is_refused_clearly(value):
    """A random document is never a run; it must be refused as one, not crash."""
    try:
        run = run_from_json(json.dumps(value), "random.json")
    except UserError as exc:
        assert str(exc).startswith("random.json")
    else:
        assert run.id  # only reachable if the fuzzer built a whole valid run
