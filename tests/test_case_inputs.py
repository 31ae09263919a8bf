"""A case's inputs are made in one place, from one record (spec.case_inputs): what the
worker's frameworks feed, and what names the reference's cached output."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from factories import make_case

from dlbench.spec.case import Case, Settings
from dlbench.spec.case_inputs import CaseInputs, input_axes
from dlbench.spec.case_parts import INPUTS_KEY
from dlbench.spec.record_dict import flat_fields, from_dict, to_dict
from dlbench.worker.steps import make_job


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


def test_a_job_s_inputs_record_carries_the_case_s_input_axes():
    case = make_case(workload="mlp")
    marked = [name for name, f in flat_fields(Case) if f.metadata.get(INPUTS_KEY)]
    assert [name for name, _ in input_axes(case)] == marked
    job = make_job(case, Settings(seed=2), "cpu")
    record = job.case_inputs(6)
    assert (record.workload, record.seed, record.batch_size) == ("mlp", 2, 6)
    assert dict(record.params) == job.params
    assert record.axes == input_axes(case)
