"""Cases, results and runs for tests: the one place a test writes a case's identity.

Keyword arguments that name a Case field go to the case, the rest to the
Result, so a test states only what it is about:
`make_result(workload="gemm", status="failed", error="...")`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from dlbench.results.records import STATUS_OK, Result, Run
from dlbench.spec.case import PAIR_FIELDS, Case

CASE_FIELDS = {f.name for f in fields(Case)}
CASE_DEFAULTS: dict[str, Any] = {
    "workload": "mlp",
    "framework": "torch",
    "compile": "eager",
    "mode": "infer",
    "device": "cpu",
    "batch_size": 1000,
    "precision": "fp32",
    "threads": 2,
}


def make_case(**values: Any) -> Case:
    """A Case of the defaults above, with `values` (pair fields may be given as dicts)."""
    merged = {**CASE_DEFAULTS, **values}
    for name in PAIR_FIELDS:
        if isinstance(merged.get(name), dict):
            merged[name] = tuple(sorted(merged[name].items()))
    return Case(**merged)


def make_result(**values: Any) -> Result:
    """A Result (status ok unless given) whose case takes the Case-field arguments."""
    case_values = {k: v for k, v in values.items() if k in CASE_FIELDS}
    measured = {k: v for k, v in values.items() if k not in CASE_FIELDS}
    measured.setdefault("status", STATUS_OK)
    return Result(case=make_case(**case_values), **measured)


def make_run(results: list[Result] | None = None, **values: Any) -> Run:
    """A Run holding `results`; id, start, suite, settings and env default to placeholders."""
    defaults: dict[str, Any] = {
        "id": "r",
        "started_at": "2026-01-01T00:00:00+00:00",
        "suite": "quick",
        "settings": {},
        "env": {},
    }
    return Run(results=list(results or []), **{**defaults, **values})
