"""Typed result records and their JSON form.

Format history (bump SCHEMA_VERSION on any incompatible change and teach
`upgrade` to read the older form):
  1 - first format: Run{schema_version, id, started_at, finished_at, suite,
      command, settings, env, results[Result]}; a Result copied the case's
      identity into flat fields (workload, framework, ..., nproc) and kept the
      case as asked in `case`.
  2 - a Result embeds the Case as it ran (`case`, defaults resolved) and keeps
      no copy of its fields; the case key gained transfer, the model's and the
      data's digests, target accuracy and thread counts.
  Within 2, results written before flags were recorded have no `flags`: their
  `noisy` field and GPU throttle verdict are read as flags (results.flags).
  `noisy` is still written, read from the flags, for readers of older files.
  3 - `details` is typed (results.details.Details): each capability's record
      under its own key (energy, check, loadgen, training, ddp, processes,
      quantization, timeline, ...), a framework's own settings under `extra`.
      Schema 2's flat dict is mapped key by key (results.details.details_from_v2);
      the efficiency and DDP scaling it stored become `stored_efficiency` and
      `ddp.stored_scaling`.
  Within 3, fields added where they were measured: an endpoint result written
  before `details.endpoint.timed_from` was timed from each request's send, open
  loops included (read as none: `show` says "from the send"); before
  `details.endpoint.client`, `details.limit` and a generation's work fields
  (`decode_flops_per_step`, `prefill_flops`, ...), it has no client health, no
  verdict and no prefill roofline, and shows none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import ClassVar

from dlbench.errors import UserError
from dlbench.measure.stats import LatencyStats
from dlbench.results.details import Details, Immutable, details_from_v2
from dlbench.results.env import Fingerprint
from dlbench.results.flags import NOISY, stored_flags
from dlbench.results.run_values import check_run_values
from dlbench.results.schema import check_run_shape
from dlbench.spec import record_dict
from dlbench.spec.case import Case, Settings
from dlbench.spec.record_dict import finite
from dlbench.untyped import JSONObject, JSONValue

SCHEMA_VERSION = 3
STATUS_OK = "ok"
STATUS_FAILED = "failed"
# The device cannot do what the case asks (fp16 AMP on a CPU without fp16 units):
# not a failure of the framework or the harness, and not a number either.
STATUS_SKIPPED = "skipped"
# a training case's headline (details.training, and a --repeat process's summary):
# seconds of training to the last epoch
TIME_TO_TRAIN_KEY = "time_to_train_s"


@dataclass(frozen=True)
class Result(Immutable):
    """One measured case: the case as it ran, its samples and stats."""

    # its JSON holds every field, as every stored result's does (spec.record_dict)
    WRITES_EVERY_FIELD: ClassVar[bool] = True

    # The identity, with the defaults the worker resolved (device, batch size,
    # params, scenario, inter-op threads); `rerun` replays it as it ran.
    case: Case
    status: str
    error: str | None = None
    error_detail: str | None = None
    # what the case asked for before it was resolved ("auto")
    requested_device: str = ""
    latency_ms: LatencyStats | None = None
    throughput: float | None = None
    gflops: float | None = None
    gbps: float | None = None
    # "gflops" or "gbps": the rate that says most about this workload
    primary_metric: str | None = None
    flops_per_sample: float | None = None
    bytes_per_sample: float | None = None
    # what a reader must know beside the numbers (results.flags decides them);
    # `noisy` among them, so it is not kept a second time (see the property)
    flags: tuple[str, ...] = ()
    first_call_ms: float | None = None
    warmup_ms: tuple[float, ...] = ()
    samples_ms: tuple[float, ...] = ()
    cpu_percent: float | None = None
    peak_rss_mb: float | None = None
    load_avg_before: float | None = None
    load_avg_after: float | None = None
    import_s: float | None = None
    setup_s: float | None = None
    max_abs_diff: float | None = None
    framework_version: str | None = None
    details: Details = field(default_factory=Details)
    started_at: str | None = None
    duration_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @property
    def noisy(self) -> bool:
        """Whether the flags say `noisy` (a field of its own before flags were recorded)."""
        return NOISY in self.flags

    def to_dict(self) -> JSONObject:
        fields_json = record_dict.to_dict(self)
        data = {k: self.noisy if k == "noisy" else fields_json[k] for k in result_keys()}
        return finite(data)  # what is not a finite number is null in JSON (record_dict.finite)

    @classmethod
    def from_dict(cls, data: JSONValue, where: str | None = None) -> Result:
        """The result a JSON object holds; ValueError (naming `where`) where it is not one."""
        result = record_dict.from_dict(cls, data, where)
        if "flags" not in data:  # written before flags were recorded
            return replace(result, flags=stored_flags(data.get("noisy"), result.details))
        return result


def result_keys() -> list[str]:
    """A result's keys in JSON and CSV: its fields, with `noisy` (read from the flags)
    where the field was, so files keep the shape readers of older ones expect."""
    names = [f.name for f in fields(Result)]
    names.insert(names.index("flags"), "noisy")
    return names


def base_result(
    case: Case,
    status: str,
    *,
    device: str | None = None,
    batch_size: int | None = None,
    params: dict[str, int] | None = None,
    scenario: str | None = None,
    error: str | None = None,
    error_detail: str | None = None,
) -> Result:
    """A Result embedding `case` with what the worker resolved; the caller adds the
    numbers with `dataclasses.replace`, whose fields the type checker knows."""
    ran = replace(
        case,
        device=device if device is not None else case.device,
        batch_size=batch_size if batch_size is not None else case.batch_size,
        params=tuple(sorted(params.items())) if params is not None else case.params,
        scenario=scenario if scenario is not None else case.scenario,
        interop_threads=case.effective_interop_threads,
    )
    return Result(
        case=ran,
        status=status,
        requested_device=case.device,
        error=error,
        error_detail=error_detail,
    )


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Run(Immutable):
    """A set of results measured together, with the context they were measured in."""

    # its JSON holds every field, as every stored run's does (spec.record_dict)
    WRITES_EVERY_FIELD: ClassVar[bool] = True

    id: str
    started_at: str
    suite: str
    # how its cases were measured; a run written before a setting existed reads as that
    # setting's default (older dlbench behaved so)
    settings: Settings
    # the machine's facts, the ceilings its results are read against, a fleet node's mark
    env: Fingerprint
    command: tuple[str, ...] = ()
    finished_at: str | None = None
    results: tuple[Result, ...] = ()
    schema_version: int = SCHEMA_VERSION
    # The cases as planned, in order: what --resume completes.
    plan: tuple[Case, ...] = ()

    def inference_by_workload(self, loadgen: bool) -> dict[str, list[Result]]:
        """Measured inference results by workload (with its params) and device: those
        LoadGen drove (`loadgen`), or the others; the serving and sweep reports each
        read one kind."""
        grouped: dict[str, list[Result]] = {}
        for result in self.results:
            case = result.case
            if result.ok and case.mode == "infer" and case.driven_by_loadgen == loadgen:
                name = case.label(only=("workload", "params", "device"))
                grouped.setdefault(name, []).append(result)
        return grouped

    @property
    def failures(self) -> int:
        return sum(1 for r in self.results if r.status == STATUS_FAILED)

    def to_dict(self) -> JSONObject:
        data = record_dict.to_dict(self)
        # what is not a finite number is null in JSON; each result's own to_dict saw to its own
        return {k: v if k == "results" else finite(v) for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: JSONValue, source: str = "run") -> Run:
        """Build a Run from parsed JSON, refusing what this version cannot read."""
        data = upgrade(data, source)
        try:
            run = record_dict.from_dict(cls, data, "")
        except ValueError as exc:
            raise UserError(f"{source}: not a valid dlbench run ({exc})") from None
        check_run_shape(data, source)
        check_run_values(data, source, cls, Result)
        return run


REQUIRED_RUN_KEYS = ("id", "started_at", "suite", "settings", "env", "results")


def upgrade(data: JSONValue, source: str) -> JSONObject:
    """Check the schema version; convert older formats to the current one."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise UserError(f"{source}: not a dlbench run file (no schema_version)")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(f"{source}: invalid schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise UserError(
            f"{source}: written by a newer dlbench (schema {version}, this one reads "
            f"up to {SCHEMA_VERSION}); upgrade dlbench to read it"
        )
    missing = [k for k in REQUIRED_RUN_KEYS if k not in data]
    if missing:
        raise UserError(f"{source}: not a valid dlbench run (missing {', '.join(missing)})")
    if version < SCHEMA_VERSION and not isinstance(data["results"], list):
        raise UserError(f"{source}: not a valid dlbench run (results: expected a list)")
    results = data["results"]
    if version == 1:
        results = [upgrade_result_v1(r, source, i) for i, r in enumerate(results)]
    if version <= 2:
        results = [upgrade_result_v2(r) for r in results]
    return {**data, "schema_version": SCHEMA_VERSION, "results": results}


def upgrade_result_v2(result: JSONValue) -> JSONValue:
    """A schema-2 result as schema 3: its flat details dict in the typed form (a result
    that is not an object is left for the shape check to name)."""
    if not isinstance(result, dict):
        return result
    return {**result, "details": details_from_v2(result.get("details"))}


# Schema 1 copied these case fields into the Result, resolved by the worker.
V1_IDENTITY = (
    "workload",
    "framework",
    "compile",
    "mode",
    "device",
    "batch_size",
    "precision",
    "threads",
    "interop_threads",
    "params",
    "scenario",
    "nproc",
)


def upgrade_result_v1(result: JSONValue, source: str, index: int) -> JSONObject:
    """A schema-1 result as schema 2: its flat identity fields folded into `case`.

    Schema 1 kept no content digests: a user model's or real data's case gets
    "unhashed:" and the file or folder name, so it never passes for a digest.
    """
    if not isinstance(result, dict):
        raise UserError(f"{source}: not a valid dlbench run (results[{index}]: expected an object)")
    given = result.get("case")
    asked = given if isinstance(given, dict) else {}
    case = {**asked, **{k: result[k] for k in V1_IDENTITY if k in result}}
    for path_field, digest_field in (("model", "model_digest"), ("data_dir", "data_digest")):
        if case.get(path_field) and not case.get(digest_field):
            case[digest_field] = f"unhashed:{str(case[path_field]).rstrip('/').split('/')[-1]}"
    upgraded = {k: v for k, v in result.items() if k not in V1_IDENTITY}
    upgraded["case"] = case
    upgraded.setdefault("requested_device", asked.get("device", case.get("device", "")))
    return upgraded


def run_from_json(text: str, source: str) -> Run:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise UserError(f"{source}: not a dlbench run (nested too deeply)") from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise UserError(f"{source}: not a dlbench run (a number of thousands of digits)") from None
    return Run.from_dict(data, source)
