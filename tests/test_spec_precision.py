"""One table of precisions: every name allowed has its check, and no other name passes."""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.errors import UserError
from dlbench.plan.build import RunRequest, build_plan
from dlbench.spec.registry import FRAMEWORKS, PRECISIONS, precision_info
from dlbench.worker.check import _compare


def allowed_precisions() -> set[str]:
    """What the plan accepts (the table) and what any framework's entry offers."""
    return set(PRECISIONS) | {p for info in FRAMEWORKS.values() for p in info.precisions}


def test_an_unknown_precision_is_an_error_never_fp32s_tolerance():
    with pytest.raises(UserError, match="unknown precision 'fp64'; allowed: fp32, tf32, "):
        precision_info("fp64")
    output = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(UserError, match="unknown precision 'fp64'"):
        _compare(output, output, "fp64")
    with pytest.raises(UserError, match="unknown precision 'fp64'"):
        build_plan(RunRequest(workloads=("mlp",), frameworks=("null",), precisions=("fp64",)))


@pytest.mark.parametrize("name", sorted(allowed_precisions()))
def test_every_precision_allowed_has_its_check(name):
    precision = precision_info(name)
    if precision.quantized:
        # held to fp32 by its SQNR, through some framework's quantization path
        assert precision.tolerance is None and precision.min_sqnr_db is not None
        assert any(name in info.quantized for info in FRAMEWORKS.values())
        output = np.ones((2, 3), dtype=np.float32)
        with pytest.raises(ValueError, match="held to fp32 by its SQNR"):
            _compare(output, output, name)
    else:
        assert precision.tolerance is not None and 0 < precision.tolerance < 1
        assert precision.min_sqnr_db is None
        expected = np.full((2, 3), 10.0, dtype=np.float32)
        diff, tolerance = _compare(expected, expected + 0.001, name)
        assert diff == pytest.approx(0.001, rel=1e-3)
        assert tolerance == pytest.approx(10 * precision.tolerance)


def test_a_framework_offers_its_quantized_precisions_once():
    for info in FRAMEWORKS.values():
        assert not any(precision_info(p).quantized for p in info.float_precisions)
        assert len(set(info.precisions)) == len(info.precisions)
