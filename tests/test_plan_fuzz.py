"""Property-based fuzzing of every parser of user input, through the command line.

Random and malformed YAML suites and command lines (`dlbench run --dry-run`)
and run files (`dlbench import`) must end in exit 0 or in exit 2 with one line
on stderr: never a traceback, and nothing stored when refused.
"""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import cli
from factories import timed_run
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_plan_inputs import torchscript_layout

from dlbench.errors import UserError
from dlbench.plan.build import RunRequest, build_plan
from dlbench.plan.suites import CASE_KEYS, SETTING_KEYS, TOP_KEYS
from dlbench.results.records import run_from_json
from dlbench.results.store import open_store

# starts a process or imports a framework: not in the fast tier (tests/conftest.py)
pytestmark = pytest.mark.integration

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


def one_clear_line_or_success(done: subprocess.CompletedProcess[str]) -> None:
    """Exit 0, or exit 2 with one line on stderr; never a traceback or another code."""
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode in (0, 2), (done.returncode, done.stderr)
    if done.returncode == 2:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dlbench"), done.stderr


def plan_or_user_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        suite = Path(folder) / "suite.yaml"
        suite.write_text(text, encoding="utf-8")
        done = cli("run", "--dry-run", "--db", str(Path(folder) / "s.sqlite"), str(suite))
        one_clear_line_or_success(done)
        assert not (Path(folder) / "s.sqlite").exists()  # a dry run stores nothing


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
@example(["mlp", "\n"])  # a newline in an argument once split the error in two lines
def test_random_command_lines_plan_or_fail_clearly(argv):
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "s.sqlite"
        one_clear_line_or_success(cli("run", "--dry-run", "--db", str(db), *argv))
        assert not db.exists()


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
def test_mutated_run_files_import_or_fail_clearly_and_never_touch_the_store(path, value):
    with tempfile.TemporaryDirectory() as folder:
        db, file = Path(folder) / "s.sqlite", Path(folder) / "run.json"
        with open_store(db) as store:
            store.import_run(timed_run("existing", 1.0, 1))
        file.write_text(json.dumps(mutated(VALID, path, value)), encoding="utf-8")
        done = cli("import", str(file), "--db", str(db))
        one_clear_line_or_success(done)
        with sqlite3.connect(db) as check:
            stored = check.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        assert stored == (2 if done.returncode == 0 else 1), done.stderr


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


ARRAY_DTYPES = st.sampled_from(
    ["float32", "float16", "int64", "uint8", "bool", "complex64", "U3", "S2", "f4,i8", "object"]
)
SHAPES = st.lists(st.integers(0, 4), max_size=3).map(tuple)
CLAIMED = st.lists(st.integers(0, 2**40), min_size=1, max_size=3).map(tuple)


@st.composite
def input_data_files(draw: st.DrawFn) -> tuple[str, bytes]:
    """An --input-data file as a user might bring it, or a broken one: arrays of
    every kind of dtype, a header claiming more than any memory, bytes cut short,
    or no NumPy file at all."""
    kind = draw(st.sampled_from(["npz", "npy", "claims", "cut", "bytes"]))
    buffer = io.BytesIO()
    if kind == "bytes":
        return ".npy", draw(st.binary(max_size=64))
    if kind == "claims":  # a header alone, claiming a shape of any size
        descr = draw(st.sampled_from(["<f4", "|O", "<U2", "|b1", "<i8"]))
        header = {"descr": descr, "fortran_order": False, "shape": draw(CLAIMED)}
        np.lib.format.write_array_header_1_0(buffer, header)
        return ".npy", buffer.getvalue()
    dtype = draw(ARRAY_DTYPES)
    array = np.zeros(draw(SHAPES), dtype=dtype)
    if kind == "npz":
        names = draw(st.lists(st.sampled_from(["x", "input", "", "a b"]), min_size=1, max_size=2))
        np.savez(buffer, **{name: array for name in names})
        return ".npz", buffer.getvalue()
    np.save(buffer, array, allow_pickle=True)
    whole = buffer.getvalue()
    return ".npy", whole[: draw(st.integers(0, len(whole)))] if kind == "cut" else whole


@FUZZ
@given(input_data_files())
def test_random_input_data_plans_or_fails_clearly(file):
    """The parent reads --input-data before any worker: headers, dtypes and sizes
    end in a plan or one UserError line (the worker then matches names and shapes)."""
    suffix, content = file
    with tempfile.TemporaryDirectory() as folder:
        model = torchscript_layout(Path(folder) / "model.jit")
        data = Path(folder) / f"inputs{suffix}"
        data.write_bytes(content)
        try:
            plan = build_plan(RunRequest(model=model, input_data=str(data)))
        except UserError as exc:
            assert str(exc) and "\n" not in str(exc).strip()
        else:
            assert plan.cases and all(case.given_model.input_data_digest for case in plan.cases)
