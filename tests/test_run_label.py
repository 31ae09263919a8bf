"""`dlbench run --label`: the user's label for the code a run measured (a commit, a
version), kept with the run; `dlbench history --order label` orders by it."""

from __future__ import annotations

import pytest
from conftest import cli
from factories import make_run

from dlbench.cli.parser import build_parser
from dlbench.cli.run_commands import request_from_args
from dlbench.errors import UserError
from dlbench.results.records import Run
from dlbench.results.store import open_store


def test_run_label_is_a_setting_that_lands_in_the_run_and_old_runs_load_without_it():
    args = build_parser().parse_args(["run", "--label", "  abc123 "])
    assert dict(request_from_args(args).settings)["label"] == "abc123"
    for bad in ("", "a\nb", "x" * 101):
        with pytest.raises(UserError, match="printable characters"):
            build_parser().parse_args(["run", "--label", bad])
    with_label = make_run(settings={"label": "abc123"}).to_dict()
    assert Run.from_dict(with_label).settings.label == "abc123"
    assert Run.from_dict(make_run(settings={"seed": 0}).to_dict()).settings.label is None
    bad_type = make_run(settings={"label": 3}).to_dict()
    with pytest.raises(UserError, match=r"settings\.label: expected str, not int"):
        Run.from_dict(bad_type)


@pytest.mark.integration
def test_a_run_stores_its_label_and_a_rerun_takes_only_its_own(isolated_store):
    fast = ("--workload", "mlp", "--framework", "null", "--min-time", "0", "--min-iters", "3",
            "--warmup", "1", "-q")  # fmt: skip
    assert cli("run", *fast, "--label", "abc123").returncode == 0
    with open_store(isolated_store) as store:
        [first] = store.run_ids()
        assert store.load_run(first).settings.label == "abc123"
    assert cli("rerun", first).returncode == 0
    assert cli("rerun", first, "--label", "def456").returncode == 0
    with open_store(isolated_store) as store:
        labels = [store.load_run(i).settings.label for i in store.run_ids()]
    assert sorted(labels, key=str) == [None, "abc123", "def456"]  # the plain rerun: none
