"""A case's inputs are made in one place, from one record (spec.case_inputs): what the
worker's frameworks feed, and what names the reference's cached output."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from factories import make_case

from dlbench.spec.case import Settings
from dlbench.spec.case_inputs import CaseInputs, input_axes
from dlbench.spec.record_dict import from_dict, to_dict
from dlbench.worker.steps import make_job
from dlbench.workloads.inputs import case_arrays


def test_a_job_feeds_the_workloads_inputs_at_its_batch_params_and_seed():
    job = make_job(make_case(workload="mlp", batch_size=3), Settings(seed=5), "cpu")
    made = job.inputs()
    expected = job.workload.make_inputs(3, job.params, "infer", 5)
    assert made.keys() == expected.keys()
    for name in made:
        np.testing.assert_array_equal(made[name], expected[name])
    assert job.inputs(7)["x"].shape[0] == 7
    trained = job.inputs(mode="train")
    assert set(trained) > set(made)  # training's targets too


def test_the_inputs_record_reads_back_and_names_one_set_of_inputs():
    inputs = CaseInputs("bert-base", (("seq", 128), ("layers", 2)), 0, 4)
    assert inputs.params == (("layers", 2), ("seq", 128))  # one order, one digest
    read = from_dict(CaseInputs, to_dict(inputs))
    assert read == inputs
    assert read.digest() == inputs.digest()
    assert CaseInputs("bert-base", (("layers", 2), ("seq", 128)), 0, 4).digest() == inputs.digest()
    others = [
        replace(inputs, batch_size=5),
        replace(inputs, seed=1),
        replace(inputs, params=(("seq", 64), ("layers", 2))),
        replace(inputs, axes=(("input_values", "zeros"),)),
    ]
    assert len({inputs.digest(), *(other.digest() for other in others)}) == 5
    # an axis's value reads back as the JSON it was (what the reference's builder gets)
    assert all(from_dict(CaseInputs, to_dict(other)) == other for other in others)


def test_a_job_s_inputs_record_is_the_case_s_at_the_job_s_params_seed_and_batch():
    case = make_case(workload="mlp")
    job = make_job(case, Settings(seed=2), "cpu")
    record = job.case_inputs(6)
    assert (record.workload, record.seed, record.batch_size, record.mode) == ("mlp", 2, 6, "infer")
    assert dict(record.params) == job.params
    # an axis at its default is left out: adding one keeps every cached output's name
    assert record.axes == input_axes(case) == ()


def test_an_input_axis_case_arrays_does_not_apply_is_an_error_not_a_new_cache_key():
    marked = CaseInputs("mlp", (), 0, 2, axes=(("input_values", '"zeros"'),))
    with pytest.raises(TypeError, match="input_values"):
        case_arrays(marked)
    # values are JSON text: 1 and "1" are two inputs
    assert (
        replace(marked, axes=(("n", "1"),)).digest()
        != replace(marked, axes=(("n", '"1"'),)).digest()
    )
