"""A fleet run's mark on each node's run, and the runs of one fleet found in the store.

`dlbench fleet run` stores one ordinary Run per node (the node's own `dlbench run`,
or, for a node that died or timed out, one whose cases are failed results). What
ties them together is `run.env.fleet` (results.env.FleetMark, typed and checked when
the run is read): the fleet run's id and start, and the Ray node the run belongs to.
env is where a run keeps what is not a result (its fingerprint, its ceilings), so the
mark needs no new schema version, and a reader that knows nothing of fleets sees an
ordinary run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from dlbench.errors import UserError
from dlbench.results.env import FleetMark
from dlbench.results.records import Run
from dlbench.results.run_ids import new_run_id, shown
from dlbench.results.store import Store

FLEET_ID_PREFIX = "fleet-"
# A node's run starts by its own clock, which may run behind the machine that started
# the fleet: runs this long before the fleet's start are still looked at for it.
CLOCK_SKEW = timedelta(minutes=10)


def fleet_mark(run: Run) -> FleetMark | None:
    """The run's mark, or None for a run of no fleet."""
    return run.env.fleet if isinstance(run.env.fleet, FleetMark) else None


def new_fleet_id() -> str:
    """A run id (UTC time and random hex) marked as a fleet's: sortable, and never
    mistaken for one node's run."""
    return FLEET_ID_PREFIX + new_run_id()


def fleet_runs(store: Store, fleet_id: str | None = None) -> tuple[str, list[Run]]:
    """The runs of fleet `fleet_id` in the store (default: the newest fleet's), in the
    order their nodes are named. The store is read newest first and only back to a
    little before the fleet began, not through every run it holds."""
    summaries = list(reversed(store.list_runs()))
    found: list[Run] = []
    start: datetime | None = None
    for summary in summaries:
        when = _moment(summary.started_at)
        if start is not None and when is not None and when < start - CLOCK_SKEW:
            break
        run = store.load_run(summary.id)
        mark = fleet_mark(run)
        if mark is None or (fleet_id is not None and mark.fleet_id != fleet_id):
            continue
        if fleet_id is None:
            fleet_id = mark.fleet_id  # the newest run of any fleet names the newest fleet
        found.append(run)
        start = start or _moment(mark.started_at)
    if not found:
        if fleet_id is None:
            raise UserError(
                f"no fleet run in store {store.name}; run `dlbench fleet run SUITE --ray "
                "ADDRESS` first, or pass --db with the store it wrote"
            )
        raise UserError(f"no fleet {shown(fleet_id)} in store {store.name} (see dlbench runs)")
    assert fleet_id is not None
    return fleet_id, sorted(found, key=lambda run: _node_order(run))


def _node_order(run: Run) -> tuple[str, str]:
    mark = fleet_mark(run)
    return (mark.node_ip, mark.node_id) if mark else ("", run.id)


def _moment(text: str) -> datetime | None:
    """An ISO time as a datetime to compare, None where it is not one (an imported
    run's field) or has no zone (it cannot be compared with one that has)."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo is not None else None
