"""Bad inputs are refused before a run is stored: exit 2, one line, nothing stored.

Real files throughout: object arrays written by NumPy, a module pickled by
torch.save, an .npz whose compressed zeros expand far past their size.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import FAST, cli

from dlbench.results.store import open_store


def refused(proc: subprocess.CompletedProcess[str], message: str, db: Path) -> str:
    """Exit 2, one error line holding `message`, no traceback, and no run stored."""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("dlbench: error:")]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    if db.exists():
        with open_store(db) as store:
            assert store.run_ids() == []
    return errors[0]


def torchscript_layout(path: Path) -> str:
    """A file that model_format reads as TorchScript (by its zip layout): enough for
    validation, which never loads a model."""
    with zipfile.ZipFile(path, "w") as archive:
        for name in ("m/code/__torch__.py", "m/constants.pkl", "m/data.pkl", "m/version"):
            archive.writestr(name, b"x")
    return str(path)


@pytest.fixture
def model(tmp_path: Path) -> str:
    return torchscript_layout(tmp_path / "model.jit")


def objects() -> np.ndarray:
    return np.array([{"a": 1}, None], dtype=object)


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda p: np.savez(p, x=objects()), "array 'x' holds Python objects (dtype object)"),
        (lambda p: np.save(p, objects(), allow_pickle=True), "holds Python objects"),
        (lambda p: np.savez(p, x=np.zeros(2, np.complex64)), "array 'x' is complex64; model"),
        (lambda p: np.savez(p, x=np.zeros(2, "f4,i8")), "inputs are numeric, boolean or string"),
        (lambda p: p.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr'"), "not a NumPy .npz or .npy"),
        (lambda p: p.write_text("x,y\n1,2\n"), "not a NumPy .npz or .npy file"),
    ],
    ids=["object-npz", "object-npy", "complex", "records", "cut-header", "csv"],
)
def test_input_data_that_is_no_numeric_array_is_refused(
    tmp_path, isolated_store, model, write, message
):
    data = tmp_path / "inputs.npy"
    write(data)
    found = next(tmp_path.glob("inputs.np*"))  # np.savez names its file .npz
    proc = cli("run", "--model", model, "--input-data", str(found), "--quiet")
    refused(proc, message, isolated_store)


@pytest.mark.parametrize("suffix", [".npz", ".npy"])
def test_a_data_file_cut_short_is_one_line_too(tmp_path, isolated_store, model, suffix):
    data = tmp_path / f"inputs{suffix}"
    values = np.arange(1000, dtype=np.float32)
    np.savez(data, x=values) if suffix == ".npz" else np.save(data, values)
    whole = data.read_bytes()
    data.write_bytes(whole[: len(whole) * 2 // 3])  # the .npy's header whole, its data not
    proc = cli("run", "--model", model, "--input-data", str(data), "--quiet")
    refused(proc, "not a NumPy .npz or .npy file", isolated_store)


class Payload:
    """Unpickling this runs code: it creates a marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


@pytest.mark.integration  # torch.save makes the files
@pytest.mark.parametrize("saved", ["module", "payload", "legacy"])
def test_a_pickled_torch_file_is_refused_before_anything_loads_it(tmp_path, isolated_store, saved):
    torch = pytest.importorskip("torch")
    marker, path = tmp_path / "pwned", tmp_path / f"{saved}.pt"
    if saved == "payload":
        torch.save({"model": Payload(str(marker))}, str(path))
    else:  # a real module, in torch.save's zip format or its older bare pickle
        legacy = saved == "legacy"
        torch.save(torch.nn.Linear(8, 4), str(path), _use_new_zipfile_serialization=not legacy)
    line = refused(
        cli("run", "--model", str(path), "--input", "input:2x8", "--quiet"),
        f"--model {path.name} is a torch.save pickle",
        isolated_store,
    )
    assert "pass --trust-model if you trust the file" in line
    # `inspect` refuses it the same way, without starting a loader
    inspected = cli("inspect", str(path))
    refused(inspected, f"inspect {path.name} is a torch.save pickle", isolated_store)
    assert f"loading {path.name} with" not in inspected.stderr
    assert not marker.exists()


@pytest.mark.integration  # torch.save makes the file
def test_with_trust_a_pickled_file_passes_validation(tmp_path):
    torch = pytest.importorskip("torch")
    from dlbench.plan.validate import validate_case
    from dlbench.spec.case import Case

    path = tmp_path / "module.pt"
    torch.save(torch.nn.Linear(8, 4), str(path))
    case = Case.of(workload="user-model", framework="torch", compile="eager",
                   model=str(path), trust_model=True, threads=1)  # fmt: skip
    assert validate_case(case).given_model.model_digest


@pytest.mark.slow
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_inspect_of_a_file_nothing_loads_is_one_line_and_exit_2(isolated_store, model, json_flag):
    pytest.importorskip("torch")
    proc = cli("inspect", model, *json_flag)  # a TorchScript layout torch cannot load
    message = "inspect model.jit: no installed framework loads this TorchScript"
    line = refused(proc, message, isolated_store)
    assert "torch: torch " in line and "cannot load TorchScript model.jit" in line
    assert proc.stdout == ""  # no table, no JSON: nothing was loaded to describe


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-w", "add", "-f", "null", "--param", "size=10000000"],
         "add infer at batch 1 with size=10000000 needs at least 727.6 TiB of memory"),
        (["-w", "gemm", "-f", "null", "-d", "cpu", "-b", "1000000"],
         "gemm infer at batch 1000000 with size=1024 needs at least 7.6 TiB"),
        (["-w", "mlp", "-f", "null", "-b", "2147483647"], "lower --batch-size"),
        (["-w", "bert-large", "-f", "torch", "-m", "train", "-b", "100000000"],
         "lower --param seq or --batch-size"),
        (["-w", "mnist-train", "-f", "torch", "--param", "train_samples=1000000000"],
         "lower --param train_samples or --batch-size"),
    ],
    ids=["param", "batch-cpu", "batch-max", "batch-weights", "data-set"],
)  # fmt: skip
def test_sizes_beyond_memory_are_refused_before_the_run(isolated_store, args, message):
    line = refused(cli("run", *args, "--quiet"), message, isolated_store)
    assert "this machine has" in line and "available" in line


def zeros_npz(path: Path, shape: tuple[int, ...]) -> None:
    """A real .npz of float32 zeros, deflated as it is written: never all in memory here."""
    header = {"descr": "<f4", "fortran_order": False, "shape": shape}
    chunk, chunks = bytes(2**20), int(np.prod(shape)) * 4 // 2**20
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("x.npy", "w", force_zip64=True) as member,
    ):
        np.lib.format.write_array_header_1_0(member, header)
        for _ in range(chunks):
            member.write(chunk)


def test_an_npz_that_expands_past_memory_is_refused_from_its_header(
    tmp_path, isolated_store, model, monkeypatch
):
    from dlbench.workloads import memory

    data = tmp_path / "zeros.npz"
    zeros_npz(data, (2**23, 4))  # 128 MiB of zeros in a file of a few hundred KB
    assert data.stat().st_size < 2**20
    monkeypatch.setattr(memory, "available_bytes", lambda: 192 * 2**20)  # a small machine
    line = refused(
        cli("run", "--model", model, "--input-data", str(data), "--quiet"),
        "--input-data zeros.npz (largest array: x 8388608x4 float32) needs at least 128.0 MiB",
        isolated_store,
    )
    assert "this machine has 192.0 MiB available" in line


def test_a_header_that_claims_a_huge_shape_is_refused_without_reading_on(
    tmp_path, isolated_store, model
):
    data = tmp_path / "claims.npz"
    with zipfile.ZipFile(data, "w") as archive, archive.open("x.npy", "w") as member:
        header = {"descr": "<f4", "fortran_order": False, "shape": (2**26, 10**6)}
        np.lib.format.write_array_header_1_0(member, header)  # and no data at all
    proc = cli("run", "--model", model, "--input-data", str(data), "--quiet")
    refused(
        proc, "largest array: x 67108864x1000000 float32) needs at least 244.1 TiB", isolated_store
    )
    shapes = cli("run", "--model", model, "--input", "x:100000000x100000", "--quiet")
    refused(shapes, "--input x:100000000x100000 needs at least 9.1 TiB", isolated_store)


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_every_workloads_defaults_fit_a_small_machine(monkeypatch, device):
    """Defaults stay valid where 2 GiB are free (bert-large's weights are 1.3 GB)."""
    from dlbench.plan.validate import validate_case
    from dlbench.spec.case import Case
    from dlbench.spec.registry import ENDPOINT_WORKLOAD, FRAMEWORKS, WORKLOADS
    from dlbench.workloads import get_workload, memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 2 * 2**30)
    # a model whose fp32 weights alone are beyond 2 GiB needs a bigger machine whatever
    # its defaults: llama-3.1-8b (32 GB, for a GPU) only
    too_big = {n for n in WORKLOADS if 4 * get_workload(n).parameter_count > 2 * 2**30}
    assert too_big == {"llama-3.1-8b"}
    for name in WORKLOADS:
        # a user's model is the user's; an endpoint's requests run on its server
        if name in ("user-model", ENDPOINT_WORKLOAD) or name in too_big:
            continue
        framework = next(f for f, info in FRAMEWORKS.items() if info.supports(name, "train")
                         or info.supports(name, "infer"))  # fmt: skip
        for mode in get_workload(name).modes:
            info = FRAMEWORKS[framework]
            if info.supports(name, mode):
                validate_case(Case(name, framework, info.default_compile, mode=mode,
                                   device=device, threads=1))  # fmt: skip


@pytest.mark.slow
def test_a_batch_that_fills_a_dynamic_dimension_past_memory_is_refused(tmp_path, isolated_store):
    """-b fills the model's dynamic batch dimension: only once the model's signature is
    read (the pre-run load) is the size known, and it is checked there."""
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
    )  # fmt: skip
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    built.ir_version = 8
    onnx.save(built, tmp_path / "relu.onnx")
    proc = cli("run", "--model", str(tmp_path / "relu.onnx"), "-f", "onnxruntime",
               "-b", "2000000000", "--quiet")  # fmt: skip
    line = refused(proc, "--model relu.onnx on onnxruntime: the inputs made for it", isolated_store)
    assert "(x 2000000000x8 float32) need 59.6 GiB" in line and "lower --batch-size" in line


@pytest.mark.parametrize(
    ("framework", "device"), [("null", "cuda:99"), ("null", "mps"), ("onnxruntime", "mps")]
)
@pytest.mark.integration
def test_no_framework_reports_ok_on_a_device_it_does_not_have(framework, device):
    from dlbench.launch.runner import run_case
    from dlbench.plan.validate import validate_case
    from dlbench.spec.case import Case
    from dlbench.spec.registry import framework_info

    pytest.importorskip(framework_info(framework).import_name or "dlbench")
    compile_mode = framework_info(framework).default_compile
    case = Case("mlp", framework, compile_mode, device=device, batch_size=2, threads=1)
    result = run_case(validate_case(case), FAST)
    assert result.status == "failed", result.error
    assert f"device {device!r} asked for" in result.error and "--device" in result.error


def test_a_device_resolved_to_another_kind_fails_the_case():
    from dlbench.errors import CaseError
    from dlbench.worker.placement import require_device_kind

    with pytest.raises(CaseError, match="tensorflow has no such device and would run on cuda:0"):
        require_device_kind("tensorflow", "mps", "cuda:0")  # what it did on a CUDA machine
    require_device_kind("torch", "cuda", "cuda:0")
    require_device_kind("jax", "auto", "cpu")


def test_an_8b_generation_on_a_gpu_asks_the_host_for_its_prompts_only():
    """torch builds the 8B model from the seed on the GPU, its reference there too: the
    host holds the prompts, where on the CPU it must hold the fp32 weights."""
    from dlbench.spec.case import Case
    from dlbench.workloads.memory import workload_need

    def need(device: str, **fields: object) -> float:
        case = Case.of(workload="llama-3.1-8b", framework="torch", compile="eager",
                       device=device, precision="bf16", batch_size=8, **fields)  # fmt: skip
        return workload_need(case).nbytes

    assert need("cuda") == 8 * 8 * 1024  # int64 token ids of 8 prompts of 1024 tokens
    assert need("cpu") >= 4 * 8e9  # the fp32 weights the reference is made from
    # a LoadGen server loads the shared checkpoint: its host holds the weights
    assert need("cuda", loadgen=True, scenario="server") >= 4 * 8e9
