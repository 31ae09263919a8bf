"""Suite parsing, CLI overrides and validation: every bad input is a UserError."""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import cli
from factories import make_case

from dlbench.errors import UserError
from dlbench.plan.build import RunRequest, build_plan
from dlbench.plan.suites import builtin_suite_names, load_suite
from dlbench.plan.validate import validate_case
from dlbench.spec import registry
from dlbench.spec.case import Case


def write(tmp_path: Path, text: str, name: str = "suite.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_default_is_the_quick_suite_and_it_is_valid():
    plan = build_plan(RunRequest())
    assert plan.suite == "quick"
    assert {c.workload for c in plan.cases} == {"add", "gemm", "mlp", "mnist-cnn"}
    assert {c.framework for c in plan.cases} == {"null", "torch"}
    assert {c.compile for c in plan.cases if c.framework == "torch"} == {
        "eager",
        "script",
        "compile",
    }
    assert plan.settings.min_time_s == 0.5


def test_every_builtin_suite_parses():
    for name in builtin_suite_names():
        assert load_suite(name).entries


def test_filters_select_within_a_suite():
    plan = build_plan(RunRequest(workloads=("mlp",), frameworks=("torch",), suite="quick"))
    assert {(c.workload, c.framework) for c in plan.cases} == {("mlp", "torch")}
    assert {c.mode for c in plan.cases} == {"infer", "train"}


def test_adhoc_matrix_is_the_product_of_options():
    request = RunRequest(
        workloads=("mlp",),
        compiles=("eager", "script"),
        modes=("infer", "train"),
        batch_sizes=(1, 8),
        device="cpu",
        threads=1,
    )
    plan = build_plan(request)
    assert len(plan.cases) == 2 * 2 * 2
    assert all(c.device == "cpu" and c.threads == 1 for c in plan.cases)
    assert plan.suite == "adhoc"


def test_settings_layer_suite_then_cli(tmp_path):
    path = write(
        tmp_path,
        "settings: {min_time: 2, min_iters: 7}\ncases: [{workload: mlp, framework: 'null'}]\n",
    )
    plan = build_plan(RunRequest(suite=path, settings=(("min_iters", 3),)))
    assert (plan.settings.min_time_s, plan.settings.min_iters) == (2, 3)


def test_cli_params_go_to_the_workloads_that_have_them():
    plan = build_plan(RunRequest(params=(("size", 256),)))
    sized = {c.workload: dict(c.params) for c in plan.cases}
    assert sized["add"] == {"size": 256} and sized["gemm"] == {"size": 256}
    assert sized["mlp"] == {}


def test_batch_size_override_replaces_suite_values(tmp_path):
    path = write(tmp_path, "cases: [{workload: mlp, framework: 'null', batch_size: [1, 2]}]\n")
    plan = build_plan(RunRequest(suite=path, batch_sizes=(16,)))
    assert [c.batch_size for c in plan.cases] == [16]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (RunRequest(workloads=("resnet9000",)), "unknown workload 'resnet9000'; known: add, gemm"),
        (RunRequest(workloads=("mlp",), frameworks=("caffe",)), "unknown framework 'caffe'"),
        (RunRequest(workloads=("mlp",), compiles=("turbo",)), "unknown compile mode 'turbo'"),
        (
            RunRequest(workloads=("mlp",), frameworks=("null",), compiles=("script",)),
            "compile mode 'script' matches none of the cases \\(mlp on null: default\\)",
        ),
        (  # dlbench's device decode loop is a generation loop: no step workload has it
            RunRequest(workloads=("mlp",), frameworks=("torch",), compiles=("device-loop",)),
            "compile mode 'device-loop' matches none of the cases \\(mlp on torch: eager, "
            "compile, reduce-overhead, script, export\\)",
        ),
        (
            RunRequest(workloads=("gemm",), modes=("train",)),
            "workload 'gemm' does not support mode 'train'; allowed: infer",
        ),
        (RunRequest(workloads=("mlp",), modes=("serve",)), "unknown mode 'serve'"),
        (RunRequest(workloads=("mlp",), device="tpu"), "unknown device 'tpu'"),
        (RunRequest(workloads=("mlp",), batch_sizes=(0,)), r"batch_size 0 \(--batch-size\)"),
        (
            RunRequest(workloads=("mlp",), params=(("size", 8),)),
            "--param size: no workload of this run \\(mlp\\) has it; their parameters: none",
        ),
        (
            RunRequest(workloads=("add",), params=(("sise", 8),)),
            "--param sise: no workload of this run \\(add\\) has it; their parameters: size",
        ),
        (
            RunRequest(suite="nonesuch"),
            "unknown suite 'nonesuch'; built-in: ceilings, cpu-inference, llm, llm-serving, "
            "mnist, pt2-training, quick, seed-add",
        ),
        (RunRequest(settings=(("min_iters", 0),)), r"min_iters 0 \(--min-iters\)"),
        (
            RunRequest(settings=(("timeout_s", 0),)),
            r"^timeout 0 \(--timeout\): expected a number > 0",
        ),
        (RunRequest(settings=(("timeout_s", float("inf")),)), "timeout inf"),
        (RunRequest(settings=(("timeout_s", 1e300),)), "timeout 1e\\+300"),
        (RunRequest(settings=(("min_iters", 200_000),)), "from 1 to 100000"),
        (RunRequest(settings=(("seed", -1),)), "seed -1"),
        (RunRequest(workloads=("mlp",), device="cpu\n"), "unknown device"),
        (RunRequest(workloads=("mlp",), threads=10**20), "expected an integer from 1 to 1024"),
    ],
)
def test_bad_requests_name_the_problem(request_, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[")):
        build_plan(request_)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cases: [{workload: mlp, framework: 'null'}\n", "invalid YAML at line"),
        ("- just\n- a list\n", "expected a mapping"),
        ("cases: [{workload: mlp, framework: 'null'}]\nrepeat: 3\n", "unknown key 'repeat'"),
        # the study a run gets follows the suite's name; no key chooses it
        (
            "report: cpu-inference\ncases: [{workload: mlp, framework: 'null'}]\n",
            "unknown key 'report'; allowed: name, description, settings, cases$",
        ),
        (
            "cases: [{workload: mlp, framework: 'null', batch: 3}]\n",
            r"cases\[0\]: unknown key 'batch'; allowed: workload, framework",
        ),
        (
            "settings: {min_tim: 1}\ncases: [{workload: mlp, framework: 'null'}]\n",
            "settings: unknown key 'min_tim'",
        ),
        (
            "settings: {min_time: fast}\ncases: [{workload: mlp, framework: 'null'}]\n",
            "settings.min_time: expected a number",
        ),
        ("cases: []\n", "'cases' must be a non-empty list"),
        ("cases: [{workload: mlp}]\n", "needs both 'workload' and 'framework'"),
        ("cases: [{workload: mlp, framework: null}]\n", 'write "null" in quotes'),
        (
            "cases: [{workload: mlp, framework: torch, batch_size: big}]\n",
            "batch_size 'big' \\(--batch-size\\): expected an integer from 1 to",
        ),
        ("cases: [{workload: {a: 1}, framework: torch}]\n", "unknown workload"),
        ("cases: [{workload: mlp, framework: torch, device: [1]}]\n", "unknown device"),
        (
            "cases: [{workload: mlp, framework: torch, options: {fault: raise}}]\n",
            "unknown torch-backend option 'fault'; allowed: optimizer",
        ),
        (
            "cases: [{workload: mlp, framework: 'null', options: {fault: melt}}]\n",
            "fault='melt'; allowed: raise",
        ),
    ],
)
def test_bad_suite_files_name_the_problem(tmp_path, text, message):
    with pytest.raises(UserError, match=message):
        build_plan(RunRequest(suite=write(tmp_path, text)))


def test_unreadable_suite_file(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError, match="cannot read suite file"):
        build_plan(RunRequest(suite=str(path)))
    with pytest.raises(UserError, match="cannot read suite file"):
        build_plan(RunRequest(suite=str(tmp_path / "missing.yaml")))


@pytest.fixture
def uninstalled_framework(monkeypatch):
    ghost = registry.FrameworkInfo(
        name="ghost",
        target="nowhere:Nothing",
        compile_modes=("default",),
        default_compile="default",
        import_name="dlbench_no_such_module_xyz",
        distributions=("dlbench-no-such-dist",),
        install_hint="pip install ghost",
        label="test",
    )
    monkeypatch.setitem(registry.FRAMEWORKS, "ghost", ghost)
    return ghost


def test_explicit_framework_that_is_not_installed_is_an_error(uninstalled_framework):
    with pytest.raises(
        UserError,
        match="'ghost' is not ready here: dlbench-no-such-dist missing; install it with: pip",
    ):
        build_plan(RunRequest(workloads=("mlp",), frameworks=("ghost",)))


def test_a_framework_installed_without_a_piece_it_needs_names_that_piece(
    uninstalled_framework, monkeypatch
):
    """openvino-genai installed without optimum-intel, its exporter, was said to be not
    installed; the line names what is missing instead."""
    from dataclasses import replace

    from dlbench.spec import registry

    half = replace(uninstalled_framework, import_name="json", needs=("dlbench-no-exporter",))
    monkeypatch.setitem(registry.FRAMEWORKS, "ghost", half)
    assert half.missing() == ["dlbench-no-exporter"]
    with pytest.raises(UserError, match="'ghost' is not ready here: dlbench-no-exporter missing"):
        build_plan(RunRequest(workloads=("mlp",), frameworks=("ghost",)))


def test_suite_cases_of_missing_frameworks_are_skipped_with_a_note(tmp_path, uninstalled_framework):
    path = write(tmp_path, "cases: [{workload: mlp, framework: ['null', ghost]}]\n")
    plan = build_plan(RunRequest(suite=path))
    assert [c.framework for c in plan.cases] == ["null"]
    assert "ghost" in plan.skipped[0]


def test_case_round_trips_through_dict():
    case = Case("add", "torch", "eager", params=(("size", 64),), batch_size=2, threads=1)
    assert Case.from_dict(case.to_dict()) == validate_case(case)


def test_sweeps_form_a_product_of_batch_sizes_and_thread_counts():
    from dlbench.spec.case import available_cpus

    request = RunRequest(
        workloads=("mlp",), frameworks=("null",), sweeps=(("batch", (1, 8)), ("threads", (1, 2)))
    )
    plan = build_plan(request)
    assert sorted((c.batch_size, c.threads) for c in plan.cases) == [(1, 1), (1, 2), (8, 1), (8, 2)]
    from dlbench.plan.sweeps import parse_sweep

    # "all" is the CPUs available; each value once
    assert parse_sweep("threads=1,all") == ("threads", tuple(dict.fromkeys((1, available_cpus()))))


def test_a_suite_entry_may_sweep(tmp_path):
    suite = write(tmp_path, """
cases:
  - workload: mlp
    framework: "null"
    sweep: {batch: [1, 4, 16]}
""")  # fmt: skip
    plan = build_plan(RunRequest(suite=suite))
    assert [c.batch_size for c in plan.cases] == [1, 4, 16]
    bad = write(
        tmp_path, 'cases:\n  - workload: mlp\n    framework: "null"\n    sweep: {depth: [1]}\n'
    )
    with pytest.raises(UserError, match="unknown sweep axis 'depth'; allowed: batch, threads"):
        build_plan(RunRequest(suite=bad))
    empty = write(
        tmp_path, 'cases:\n  - workload: mlp\n    framework: "null"\n    sweep: {batch: []}\n'
    )
    with pytest.raises(UserError, match="an empty sweep of batch"):
        build_plan(RunRequest(suite=empty))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"compile": "script", "precision": "int8-dynamic"},
            "torch int8-dynamic runs in compile mode eager or compile: "
            "use -c eager or -c compile, not script",
        ),
        (
            {"compile": "eager", "precision": "int8"},
            "torch int8 (the PT2E X86 Inductor quantizer, whose int8 kernels come from "
            "torch.compile) runs in compile mode compile: use -c compile, not eager",
        ),
        (
            {"options": {"fault": "raise"}},
            "unknown torch-backend option 'fault'; allowed: optimizer, ceiling",
        ),
        (
            {"framework": "null", "compile": "default", "options": {"melt": "1"}},
            "unknown null-backend option 'melt'; allowed: fault, sleep_ms, spin_ms",
        ),
    ],
)
@pytest.mark.integration
def test_framework_rules_are_read_from_the_frameworks_entry(values, message):
    pytest.importorskip("torchao")  # torch's int8 paths check their quantizer first
    with pytest.raises(UserError) as caught:
        validate_case(make_case(**values))
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("sleep_ms=-1", "null option sleep_ms='-1': expected a number >= 0, got -1"),
        ("spin_ms=soon", "null option spin_ms='soon': expected a number >= 0, got 'soon'"),
    ],
)
def test_a_framework_option_s_free_value_is_held_to_its_reader_at_planning(option, message):
    key, value = option.split("=")
    case = make_case(framework="null", compile="default", options={key: value})
    with pytest.raises(UserError) as caught:
        validate_case(case)
    assert str(caught.value) == message
    assert validate_case(make_case(framework="null", compile="default", options={key: "2.5"}))


@pytest.mark.parametrize(
    ("suite", "message"),
    [
        # text is not a number, even where int() would read it
        (
            'cases: [{workload: mlp, framework: torch, threads: "4"}]\n',
            "suite suite: cases[0]: threads '4' (--threads): expected an integer from 1 to 1024",
        ),
        (
            'cases: [{workload: mlp, framework: torch, scenario: server, target_qps: "100"}]\n',
            "suite suite: cases[0]: target_qps '100' (--target-qps): "
            "expected a number > 0, at most 1e+07",
        ),
        (
            "settings: {timeout: 0}\ncases: [{workload: mlp, framework: torch}]\n",
            "suite suite: settings.timeout 0 (--timeout): expected a number > 0, at most 604800",
        ),
    ],
)
def test_a_suite_s_text_or_setting_is_held_to_its_option_s_reader(tmp_path, suite, message):
    done = cli("run", write(tmp_path, suite))
    assert done.returncode == 2
    assert done.stderr.strip() == f"dlbench: error: {message}"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # a suite's SLO bounds (--endpoint given on the command line) once reached the
        # worker unread: their option's reader was their only check
        (
            "{workload: llm-requests, framework: endpoint, concurrency: 2, ttft_ms: -5}",
            "ttft_ms -5 (--ttft-ms): expected a number > 0",
        ),
        (
            "{workload: llm-requests, framework: endpoint, concurrency: 0}",
            "concurrency 0 (--concurrency): expected an integer from 1 to 65536",
        ),
        (
            "{workload: mlp, framework: torch, scenario: server, find_peak: true, "
            "latency_percentile: 42}",
            "latency_percentile 42 (--latency-percentile): expected one of the percentiles "
            "LoadGen reports: 50, 90, 95, 97, 99, 99.9",
        ),
        # a load's field its kind has no place for: its range first, then its kind
        (
            "{workload: mnist-train, framework: torch, mode: train, ttft_ms: -3}",
            "ttft_ms -3 (--ttft-ms): expected a number > 0",
        ),
        (
            "{workload: mnist-train, framework: torch, mode: train, concurrency: 2}",
            "--concurrency goes with --endpoint URL (an OpenAI-compatible server) or an "
            "engine dlbench serves (vllm); mnist-train on torch runs the time-to-train loop "
            "(epochs of training, each timed, until the target accuracy or the last epoch)",
        ),
    ],
)
def test_a_suite_s_number_is_held_to_its_option_s_reader(tmp_path, entry, message):
    suite = write(tmp_path, f"cases:\n  - {entry}\n")
    # refused before the endpoint is asked anything
    endpoint = ("--endpoint", "http://127.0.0.1:9") if "endpoint" in entry else ()
    done = cli("run", suite, *endpoint)
    assert done.returncode == 2
    # the entry it came from first, as a refusal of an entry's own keys names it
    assert done.stderr.strip() == f"dlbench: error: suite suite: cases[0]: {message}"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"workload": "llm-requests", "framework": "endpoint", "compile": "default",
             "device": "remote", "batch_size": None, "endpoint": "http://127.0.0.1:9",
             "concurrency": 2, "client_processes": 0},
            "client_processes 0 (--client-processes): expected an integer > 0",
        ),
        (
            {"workload": "mnist-train", "mode": "train", "target_accuracy": 0.0},
            "target_accuracy 0.0 (--target-accuracy): expected a fraction in (0, 1]",
        ),
    ],
)  # fmt: skip
def test_a_case_file_s_number_is_held_to_its_option_s_reader(values, message):
    """A case read from a file (a stored run's, rerun) is held as the command line is."""
    with pytest.raises(UserError) as caught:
        validate_case(make_case(**values))
    assert str(caught.value) == message


def test_vllm_s_free_options_are_read_as_whole_numbers_and_a_port():
    """vLLM is told a whole number of batched tokens and a port: planning refuses what
    the server would fail on after it started."""
    readers = registry.FRAMEWORKS["vllm"].options
    cases = (("max_num_batched_tokens", "2.5"), ("kv_cache_mib", "1e-9"), ("port", "70000"))
    for key, text in cases:
        with pytest.raises(ValueError):
            readers[key](text)
    assert readers["port"]("8000") == 8000


def test_a_quantized_paths_compile_modes_are_data_in_the_registry(monkeypatch):
    info = registry.FRAMEWORKS["onnxruntime"]
    path = replace(info.quantized["int8"], compiles=("other",), why="a reason")
    changed = replace(info, quantized={**info.quantized, "int8": path})
    monkeypatch.setitem(registry.FRAMEWORKS, "onnxruntime", changed)
    case = make_case(framework="onnxruntime", compile="default", precision="int8")
    with pytest.raises(UserError, match=r"^onnxruntime int8 \(a reason\) runs in compile mode"):
        validate_case(case)


TRANSFER_ON_TORCH = (
    "--transfer inside (the input copy in the timed step) is implemented for torch step "
    "workloads except h2d and user-model"
)


def torchscript_like(path: Path) -> str:
    """A zip laid out as a TorchScript archive: its format is read from the layout."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("m/constants.pkl", b"")
        archive.writestr("m/code/m.py", b"")
    return str(path)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"framework": "onnxruntime", "compile": "default", "transfer": "inside"},
            f"{TRANSFER_ON_TORCH}, not mlp on onnxruntime",
        ),
        ({"workload": "h2d", "transfer": "inside"}, f"{TRANSFER_ON_TORCH}, not h2d on torch"),
        (
            {"workload": "mnist-train", "mode": "train", "transfer": "inside"},
            f"{TRANSFER_ON_TORCH}, not mnist-train on torch",
        ),
        ({"transfer": "sideways"}, "unknown transfer 'sideways'; allowed: outside, inside"),
        (
            {"workload": "gemm", "compile": "export"},
            "compile mode export (torch.export + AOTInductor) runs model inference at fp32 or "
            "tf32; not gemm infer at fp32",
        ),
        (
            {"compile": "export", "precision": "amp-bf16"},
            "compile mode export (torch.export + AOTInductor) runs model inference at fp32 or "
            "tf32; not mlp infer at amp-bf16",
        ),
        (
            {"mode": "train", "compile": "script", "nproc": 2, "ddp": True},
            "--nproc: DistributedDataParallel runs eager or compile, not script",
        ),
    ],
)
def test_rules_of_the_frameworks_entries_read_as_before(values, message):
    """--transfer's rule is generic (plan.validate reads the axis from the field and
    torch's entry); export's precisions and DDP's compile modes are torch's entry too."""
    with pytest.raises(UserError) as caught:
        validate_case(make_case(**values))
    assert str(caught.value) == message


def test_transfer_inside_is_refused_for_a_users_model_file(tmp_path):
    model = torchscript_like(tmp_path / "model.pt")
    validate_case(make_case(workload="user-model", model=model))  # the file alone is fine
    with pytest.raises(UserError) as caught:
        validate_case(make_case(workload="user-model", model=model, transfer="inside"))
    assert str(caught.value) == f"{TRANSFER_ON_TORCH}, not user-model on torch"


def test_a_compile_modes_limits_are_data_in_the_registry(monkeypatch):
    info = registry.FRAMEWORKS["torch"]
    export = replace(info.inference_compiles["export"], precisions=("fp32", "amp-bf16"))
    changed = replace(info, inference_compiles={"export": export}, ddp_compiles=("eager",))
    monkeypatch.setitem(registry.FRAMEWORKS, "torch", changed)
    validate_case(make_case(compile="export", precision="amp-bf16"))
    with pytest.raises(UserError, match="runs model inference at fp32 or amp-bf16; not mlp"):
        validate_case(make_case(compile="export", precision="tf32"))
    with pytest.raises(UserError, match=r"DistributedDataParallel runs eager, not compile$"):
        validate_case(make_case(mode="train", compile="compile", nproc=2, ddp=True))


def test_a_mistake_reads_the_same_in_a_request_and_in_a_case(tmp_path):
    missing = str(tmp_path / "missing.onnx")
    pairs = [
        (
            RunRequest(workloads=("mlp",), frameworks=("null",), scenarios=("bogus",)),
            make_case(framework="null", compile="default", scenario="bogus"),
        ),
        (RunRequest(workloads=("mlp",), precisions=("fp64",)), make_case(precision="fp64")),
        (RunRequest(model=missing), make_case(workload="user-model", model=missing)),
    ]
    for request, case in pairs:
        with pytest.raises(UserError) as from_request:
            build_plan(request)
        with pytest.raises(UserError) as from_case:
            validate_case(case)
        assert str(from_request.value) == str(from_case.value)


def test_an_option_reaches_the_case_and_an_unknown_one_exits_2():
    done = cli("run", "-w", "mlp", "-f", "torch", "-m", "train", "--option", "optimizer=fused",
               "--dry-run")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "optimizer=fused" in done.stdout
    for bad in ("optimizer=slow", "colour=red", "optimizer"):
        done = cli("run", "-w", "mlp", "-f", "torch", "--option", bad, "--dry-run")
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_an_option_on_a_framework_without_options_names_those_with_them():
    done = cli("run", "-w", "mlp", "-f", "jax", "--option", "optimizer=fused", "--dry-run")
    assert done.returncode == 2
    assert "'jax' takes none; frameworks with options of their own" in done.stderr
    assert "torch" in done.stderr


def test_the_device_loop_is_a_compile_mode_of_torch_text_generation():
    plan = build_plan(RunRequest(workloads=("llm-tiny",), frameworks=("torch",),
                                 compiles=("eager", "device-loop")))  # fmt: skip
    assert [case.compile for case in plan.cases] == ["eager", "device-loop"]
