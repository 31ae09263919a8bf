"""Typed result records and their JSON form.

Format history (bump SCHEMA_VERSION on any incompatible change and teach
`upgrade` to read the older form):
  1 - first format: Run{schema_version, id, started_at, finished_at, suite,
      command, settings, env, results[Result]}.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from dlbench.errors import UserError
from dlbench.measure.stats import LatencyStats
from dlbench.results.schema import check_run_shape
from dlbench.spec.case import Case

SCHEMA_VERSION = 1
STATUS_OK = "ok"
STATUS_FAILED = "failed"
# The device cannot do what the case asks (fp16 AMP on a CPU without fp16 units):
# not a failure of the framework or the harness, and not a number either.
STATUS_SKIPPED = "skipped"


@dataclass
class Result:
    """One measured case: its identity as actually run, its samples and stats."""

    workload: str
    framework: str
    compile: str
    mode: str
    device: str
    batch_size: int | None
    precision: str
    threads: int
    interop_threads: int
    status: str
    error: str | None = None
    error_detail: str | None = None
    requested_device: str = ""
    params: dict[str, int] = field(default_factory=dict)
    scenario: str | None = None
    latency_ms: LatencyStats | None = None
    throughput: float | None = None
    gflops: float | None = None
    gbps: float | None = None
    # "gflops" or "gbps": the rate that says most about this workload
    primary_metric: str | None = None
    flops_per_sample: float | None = None
    bytes_per_sample: float | None = None
    noisy: bool | None = None
    first_call_ms: float | None = None
    warmup_ms: list[float] = field(default_factory=list)
    samples_ms: list[float] = field(default_factory=list)
    cpu_percent: float | None = None
    peak_rss_mb: float | None = None
    load_avg_before: float | None = None
    load_avg_after: float | None = None
    import_s: float | None = None
    setup_s: float | None = None
    max_abs_diff: float | None = None
    framework_version: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    duration_s: float | None = None
    # The case as asked for (before defaults were resolved): what `rerun` replays.
    case: dict[str, Any] = field(default_factory=dict)
    # processes (ranks) of a DistributedDataParallel case; throughput is their sum
    nproc: int = 1

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    def compare_key(self) -> tuple[Any, ...]:
        """What makes two results comparable across runs and machines.

        Unlike case_key it leaves out the device index and thread counts, which
        differ between machines; those are shown as context instead.
        """
        params = tuple(sorted(self.params.items()))
        kind = "cpu" if self.device == "cpu" else self.device.split(":")[0]
        return (
            self.workload,
            self.framework,
            self.compile,
            self.mode,
            self.scenario,
            self.batch_size,
            self.precision,
            kind,
            params,
            self.nproc,
        )

    def case_key(self) -> str:
        """Identity used to match the same case across runs."""
        params = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        ranks = f"|nproc={self.nproc}" if self.nproc > 1 else ""  # older keys stay as they were
        return (
            f"{self.workload}|{self.framework}|{self.compile}|{self.mode}|{self.device}|"
            f"bs={self.batch_size}|{self.precision}|t={self.threads}|{params}|{self.scenario}"
            f"{ranks}"
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["latency_ms"] = self.latency_ms.to_dict() if self.latency_ms else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("latency_ms") is not None:
            values["latency_ms"] = LatencyStats.from_dict(values["latency_ms"])
        return cls(**values)


def base_result(case: Case, status: str, **values: Any) -> Result:
    """A Result carrying the case's identity; measured fields are filled by the caller."""
    return Result(
        workload=case.workload,
        framework=case.framework,
        compile=case.compile,
        mode=case.mode,
        device=values.pop("device", case.device),
        requested_device=case.device,
        batch_size=values.pop("batch_size", case.batch_size),
        precision=case.precision,
        threads=case.threads,
        interop_threads=case.effective_interop_threads,
        params=values.pop("params", dict(case.params)),
        scenario=values.pop("scenario", case.scenario),
        case=case.to_dict(),
        nproc=case.nproc,
        status=status,
        **values,
    )


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Run:
    """A set of results measured together, with the context they were measured in."""

    id: str
    started_at: str
    suite: str
    settings: dict[str, Any]
    env: dict[str, Any]
    command: list[str] = field(default_factory=list)
    finished_at: str | None = None
    results: list[Result] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    # The cases as planned (Case dicts), in order: what --resume completes.
    plan: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failures(self) -> int:
        return sum(1 for r in self.results if r.status == STATUS_FAILED)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["results"] = [r.to_dict() for r in self.results]
        return data

    @classmethod
    def from_dict(cls, data: Any, source: str = "run") -> Run:
        """Build a Run from parsed JSON, refusing what this version cannot read."""
        data = upgrade(data, source)
        check_run_shape(data, source)
        try:
            results = [Result.from_dict(r) for r in data["results"]]
            known = {f.name for f in fields(cls)} - {"results"}
            values = {k: v for k, v in data.items() if k in known}
            return cls(results=results, **values)
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{source}: not a valid dlbench run ({exc})") from None


REQUIRED_RUN_KEYS = ("id", "started_at", "suite", "settings", "env", "results")


def upgrade(data: Any, source: str) -> dict[str, Any]:
    """Check the schema version; convert older formats (none exist yet) to the current one."""
    if not isinstance(data, dict) or "schema_version" not in data:
        raise UserError(f"{source}: not a dlbench run file (no schema_version)")
    version = data["schema_version"]
    if not isinstance(version, int) or version < 1:
        raise UserError(f"{source}: invalid schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise UserError(
            f"{source}: written by a newer dlbench (schema {version}, this one reads "
            f"up to {SCHEMA_VERSION}); upgrade dlbench to read it"
        )
    missing = [k for k in REQUIRED_RUN_KEYS if k not in data]
    if missing:
        raise UserError(f"{source}: not a valid dlbench run (missing {', '.join(missing)})")
    return data


def run_from_json(text: str, source: str) -> Run:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise UserError(f"{source}: not a dlbench run (nested too deeply)") from None
    return Run.from_dict(data, source)
