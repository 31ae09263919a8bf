"""The loader's answer as `dlbench inspect` and run's --model check read it: the last
line of the loader's output that is one, typed, or a failure saying why it is not."""

from __future__ import annotations

import json

from dlbench.launch.inspect import _last_json_line
from dlbench.spec.model_signature import InputSpec, LoaderAnswer
from dlbench.spec.record_dict import to_dict

ANSWER = LoaderAnswer(
    ok=True,
    inputs=(InputSpec("x", (None, 200), "float32"),),
    outputs=(InputSpec("output", (None, 1), "float32"),),
)


def test_the_answer_is_read_below_what_a_framework_printed_above_it():
    output = "\n".join(["2026 warning: slow path", json.dumps({"level": "info"}),
                        json.dumps(to_dict(ANSWER))])  # fmt: skip
    assert _last_json_line(output) == ANSWER
    assert _last_json_line(output).inputs[0].dims == (None, 200)


def test_an_answer_that_is_not_one_is_a_failure_saying_so():
    for wrong in ({"ok": False}, {"ok": True, "inputs": [{"name": "x"}]}):
        answer = _last_json_line(json.dumps(wrong))
        assert answer is not None and not answer.ok
        assert answer.error is not None and "the loader answered wrongly" in answer.error


def test_no_answer_at_all_is_none():
    assert _last_json_line("Segmentation fault\n") is None
    assert _last_json_line("") is None
