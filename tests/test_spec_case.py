"""One identity: Case.key() and Case.label(), which every table, compare and rerun use."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from factories import make_case, make_result, make_run

from dlbench.report.compare import compare_runs
from dlbench.spec import record_dict
from dlbench.spec.case import Case, suite_axes

# Each changes what is measured, so each must change the key (and the label).
AXIS_CHANGES = {
    "workload": {"workload": "gemm"},
    "framework": {"framework": "onnxruntime"},
    "compile": {"compile": "compile"},
    "mode": {"mode": "train"},
    "batch_size": {"batch_size": 8},
    "precision": {"precision": "amp-bf16"},
    "threads": {"threads": 1},
    "interop_threads": {"interop_threads": 1},
    "params": {"params": {"size": 64}},
    "scenario": {"scenario": "single-stream", "batch_size": 1},
    "transfer": {"transfer": "inside"},
    "nproc": {"nproc": 2, "ddp": True},
    "model": {"model": "m.onnx", "model_digest": "ab" * 32},
    "data": {"workload": "mnist-train", "mode": "train", "data_digest": "cd" * 32},
    "target_accuracy": {"workload": "mnist-train", "mode": "train", "target_accuracy": 0.98},
    "inputs": {"model": "m.onnx", "inputs": {"x": "1x3:float32"}},
    "device kind": {"device": "cuda:0"},
    "loadgen": {"loadgen": True},
    "server rate": {"scenario": "server", "batch_size": 1, "target_qps": 100.0},
    "find-peak": {"scenario": "server", "batch_size": 1, "find_peak": True},
    "bound": {"scenario": "server", "batch_size": 1, "target_qps": 100.0, "latency_bound_ms": 50.0},
    "percentile": {
        "scenario": "server",
        "batch_size": 1,
        "target_qps": 100.0,
        "latency_bound_ms": 50.0,
        "latency_percentile": 90.0,
    },
    "streams": {"scenario": "server", "batch_size": 1, "target_qps": 100.0, "streams": 4},
}


def test_every_axis_that_changes_the_measurement_changes_key_and_label():
    cases = {name: make_case(**change) for name, change in AXIS_CHANGES.items()}
    cases["base"] = make_case()
    for (name_a, a), (name_b, b) in itertools.combinations(cases.items(), 2):
        assert a.key() != b.key(), f"{name_a} and {name_b} share a key"
        assert a.label() != b.label(), f"{name_a} and {name_b} share a label"


def test_launch_details_and_paths_are_not_identity():
    base = make_case(model="/here/model.onnx", model_digest="ab" * 32)
    moved = make_case(
        model_digest="ab" * 32, model="/elsewhere/model.onnx", trust_model=True, device="cpu"
    )
    assert base.key() == moved.key()
    mnist = {"workload": "mnist-train", "mode": "train", "data_digest": "cd" * 32}
    assert make_case(**mnist).key() == make_case(**mnist, data_dir="/elsewhere/mnist").key()
    ddp = {"mode": "train", "nproc": 2, "ddp": True}
    assert make_case(**ddp).key() == make_case(**ddp, torchrun_args=("--nnodes", "2")).key()
    assert make_case(device="cuda:0").key() == make_case(device="cuda:1").key()


def test_label_names_precision_and_omits_only_what_is_asked():
    case = make_case(precision="amp-bf16", params={"size": 64})
    assert "amp-bf16" in case.label()
    assert case.label(omit=("batch_size", "device")) == (
        "mlp size=64 / torch [eager] infer amp-bf16 t=2"
    )
    assert case.label(only=("framework", "compile")) == "torch [eager]"
    assert make_case(framework="null", compile="default").label(only=("framework",)) == (
        "null (harness)"
    )


def test_case_round_trips_through_its_dict_form():
    case = make_case(params={"size": 64}, model="m.onnx", inputs={"x": "1x3"})
    assert Case.from_dict(case.to_dict()) == case
    ddp = make_case(mode="train", nproc=2, ddp=True, torchrun_args=("--standalone",))
    assert Case.from_dict(ddp.to_dict()) == ddp
    assert ddp.to_dict()["torchrun_args"] == ["--standalone"]  # JSON's list form


def test_suite_keys_come_from_the_case_fields():
    axes = suite_axes()
    assert {"workload", "framework", "precision", "transfer", "params"} <= set(axes)
    assert {"loadgen", "target_qps", "find_peak", "latency_bound_ms", "streams"} <= set(axes)
    assert "model" not in axes and "nproc" not in axes  # command-line only


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"data_digest": "cd" * 32}, "real data vs synthetic"),
        ({"transfer": "inside"}, "transfer"),
        ({"target_accuracy": 0.9}, "target accuracy"),
        ({"precision": "amp-bf16"}, "precision"),
    ],
)
def test_compare_never_matches_cases_that_measure_different_things(change, what):
    base = {"workload": "mnist-train", "mode": "train"}  # a time-to-train case: data, target
    a = make_run([make_result(samples_ms=[1.0] * 20, latency_ms=None, **base)], id="a")
    b = make_run([make_result(samples_ms=[1.0] * 20, latency_ms=None, **base, **change)], id="b")
    comparison = compare_runs(a, b)
    assert comparison.cases == [], what
    assert len(comparison.only_a) == len(comparison.only_b) == 1
    assert comparison.only_a != comparison.only_b  # the labels say how they differ


def test_labels_of_older_runs_keep_their_whole_unhashed_name():
    a = make_case(model="model_a.onnx", model_digest="unhashed:model_a.onnx")
    b = make_case(model="model_b.onnx", model_digest="unhashed:model_b.onnx")
    assert a.label() != b.label() and "model_a.onnx" in a.label()
    hashed = make_case(model="model.onnx", model_digest="ab" * 32)
    assert "model=" + "ab" * 6 in hashed.label()


def test_a_user_models_part_is_written_flat_and_read_back_into_its_record():
    """The part's fields are keys of the case's JSON, where case files have always had
    them; a case of a built-in workload writes them at their defaults and reads back
    no part."""
    from dlbench.spec.case_parts import UserModel

    user = make_case(workload="user-model", model="/m/net.onnx", model_digest="ab" * 32,
                     inputs={"x": "1x3"}, trust_model=True)  # fmt: skip
    data = user.to_dict()
    assert user.user_model == UserModel("/m/net.onnx", "ab" * 32, (("x", "1x3"),), True)
    assert "user_model" not in data
    assert (data["model"], data["inputs"], data["trust_model"]) == (
        "/m/net.onnx",
        {"x": "1x3"},
        True,
    )
    names = list(data)  # in the order case files have always had
    assert names[names.index("scenario") + 1 : names.index("target_accuracy")] == [
        "model", "model_digest", "inputs", "trust_model", "input_data", "input_data_digest"
    ]  # fmt: skip
    assert Case.from_dict(data) == user
    builtin = make_case().to_dict()
    assert builtin["model"] is None and builtin["inputs"] == {} and builtin["trust_model"] is False
    assert Case.from_dict(builtin).user_model is None
    assert user.replaced(batch_size=4).user_model == user.user_model
    assert user.replaced(model="/m/other.onnx").given_model.model == "/m/other.onnx"
    with pytest.raises(TypeError, match="no model file"):
        _ = make_case().given_model


def test_a_stored_case_with_a_models_inputs_and_no_model_is_refused():
    data = {**make_case().to_dict(), "inputs": {"x": "1x3"}}
    with pytest.raises(ValueError, match=r"results\[0\]\.case\.model: expected str"):
        Case.from_dict(data, "results[0].case")
    del data["model"]
    with pytest.raises(ValueError, match=r"results\[0\]\.case: missing model"):
        Case.from_dict(data, "results[0].case")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("loadgen", 0, "case.loadgen: expected bool, not int"),
        ("find_peak", 0.0, "case.find_peak: expected bool, not float"),
        ("api", None, "case.api: expected str, not NoneType"),
        ("nproc", True, "case.nproc: expected int, not bool"),
        ("nproc", None, "case.nproc: expected int, not NoneType"),
    ],
)
def test_a_parts_field_of_another_type_is_refused_not_read_as_its_default(key, value, message):
    """0 is not False and null is not "completions": a part is left out only where its
    keys hold exactly their defaults, as each field refused a wrong type before."""
    data = {**make_case().to_dict(), key: value}
    with pytest.raises(ValueError, match=message):
        Case.from_dict(data, "case")


def test_a_part_given_both_whole_and_by_its_fields_or_without_its_file_is_refused():
    from dlbench.spec.case_parts import UserModel

    core = {"workload": "user-model", "framework": "onnxruntime", "compile": "default"}
    with pytest.raises(TypeError, match="trust_model given without model"):
        Case.of(**core, trust_model=True)
    with pytest.raises(TypeError, match="user_model and its fields"):
        Case.of(**core, user_model=UserModel("a.onnx"), model="b.onnx")
    # a suite entry's `loadgen: null` reaches planning's check as null, not as false
    assert Case.of(**core, scenario="multi-stream", loadgen=None).value_of("loadgen") is None


@dataclass(frozen=True)
class _Part:
    threads: int = 1


@dataclass(frozen=True)
class _Parent:
    threads: int = 2
    part: _Part | None = field(default=None, metadata=record_dict.FLATTENED)


def test_a_part_whose_field_shares_a_json_key_with_its_parent_is_refused():
    """Two fields would write one key of the case's JSON: the record's type is refused
    when its keys are first listed (for Case, as spec.case is imported)."""
    with pytest.raises(TypeError, match="two fields write the JSON key 'threads'"):
        record_dict.flat_fields(_Parent)
    assert {"model", "inputs"} <= dict(record_dict.flat_fields(Case)).keys()  # Case's part


@dataclass(frozen=True)
class _Rate:
    rate: float | None = None
    shared: int = 1


@dataclass(frozen=True)
class _Users:
    users: int = 1
    shared: int = 1


def _chosen(values):
    return {"rate": _Rate, "users": _Users}.get(values.get("kind"))


@dataclass(frozen=True)
class _Loaded:
    kind: str = ""
    load: _Rate | _Users | None = field(default=None, metadata=record_dict.flattened_union(_chosen))


def test_a_union_is_written_flat_each_key_once_and_read_back_as_the_member_its_parent_names():
    assert [name for name, _ in record_dict.flat_fields(_Loaded)] == [
        "kind",
        "rate",
        "shared",
        "users",
    ]
    rated = _Loaded("rate", _Rate(rate=2.5, shared=3))
    assert record_dict.to_dict(rated) == {"kind": "rate", "rate": 2.5, "shared": 3}
    assert record_dict.from_dict(_Loaded, record_dict.to_dict(rated)) == rated
    # the member is made even where its keys hold defaults: it says which kind it is
    assert record_dict.from_dict(_Loaded, {"kind": "users"}) == _Loaded("users", _Users())
    assert record_dict.from_dict(_Loaded, {"kind": ""}) == _Loaded("", None)
    with pytest.raises(ValueError, match=r"x\.users: given, but _Rate has no such field"):
        record_dict.from_dict(_Loaded, {"kind": "rate", "users": 4}, "x")
    with pytest.raises(ValueError, match=r"x\.users: expected int, not str"):  # its type first
        record_dict.from_dict(_Loaded, {"kind": "rate", "users": "4"}, "x")
    with pytest.raises(ValueError, match=r"rate: given, but no record is held here"):
        record_dict.from_dict(_Loaded, {"kind": "", "rate": 1.0})


@dataclass(frozen=True)
class _OtherDefault:
    shared: int = 2


@dataclass(frozen=True)
class _Clashing:
    load: _Rate | _OtherDefault | None = field(
        default=None, metadata=record_dict.flattened_union(lambda values: None)
    )


def test_a_key_two_members_give_other_defaults_is_refused():
    """It is written, and read back, with the first member's default: a member with
    another would come back changed."""
    with pytest.raises(TypeError, match="'shared': two members give it another type or default"):
        record_dict.flat_fields(_Clashing)
