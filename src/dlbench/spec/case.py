"""What is measured (Case) and how (Settings): frozen records.

Validation (plan.validate) happens at the edge, against the registry and the
workloads; these records import nothing above them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection
from dataclasses import MISSING, Field, dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar  # noqa: TID251  # field values by name: each field's own type

from dlbench.measure.timer import MAX_ITERS
from dlbench.spec import record_dict
from dlbench.spec.case_parts import (
    MAX_BATCH,
    MAX_MIN_TIME_S,
    MAX_REPEAT,
    MAX_SEED,
    MAX_THREADS,
    MAX_TIMEOUT_S,
    RECORDED_AXIS,
    SUITE_AXIS,
    DdpLaunch,
    UserModel,
)
from dlbench.spec.cli_options import (
    cli,
    integer_in,
    number_in,
    option_pair,
    param_pair,
    positive_at_most,
    run_label,
)
from dlbench.spec.digest import short_digest
from dlbench.spec.loads import (
    KIND_LOADS,
    FieldsNotTaken,
    Load,
    QueryLoad,
    chosen_load,
    kind_name,
    load_label_parts,
)
from dlbench.spec.registry import FRAMEWORKS, PRECISIONS, WORKLOADS
from dlbench.untyped import JSONObject, JSONValue

MODES = ("infer", "train")
# MLPerf Inference's scenarios: one request at a time (latency), a query of N
# samples once the previous one is done (multi-stream), queries arriving at
# random (Poisson) times at a target rate (server), large batches (offline).
SCENARIOS = ("single-stream", "multi-stream", "server", "offline")
# MLPerf's samples per multi-stream query, where none is given
MULTI_STREAM_SAMPLES = 8
# MLPerf's early-stopping minimum for a 99th percentile with no over-latency
# queries (mlperf.conf sets it as multi-stream's min_query_count): fewer samples
# cannot bound p99.
MIN_P99_QUERIES = 662
# MLPerf Inference's minimum test duration (mlperf.conf: *.*.min_duration = 600000)
OFFICIAL_MIN_TIME_S = 600.0
DEVICE_PATTERN = re.compile(r"cpu|auto|mps|cuda(:\d+)?|remote")
# Where an endpoint case's work runs: its server, not this machine's devices
REMOTE_DEVICE = "remote"
DEVICE_HELP = "cpu, cuda, cuda:N, mps (Apple, torch) or auto"
# Host-to-device copy of the inputs: before the clock (default) or in every step;
# each value's meaning is quoted by the error that refuses it (a by_framework axis).
TRANSFERS = MappingProxyType(
    {
        "outside": "the inputs on the device before the clock",
        "inside": "the input copy in the timed step",
    }
)
# Every framework's compile modes: what --compile may name (each framework has its own).
COMPILE_MODES = tuple(sorted({mode for info in FRAMEWORKS.values() for mode in info.compile_modes}))


def default_threads() -> int:
    """A case's threads where none are given: every CPU available, up to MAX_THREADS."""
    return min(available_cpus(), MAX_THREADS)


def available_cpus() -> int:
    """CPUs this process may run on (affinity-aware, unlike os.cpu_count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Case:
    """The identity of one measurement; equal keys measure the same thing.

    A Result embeds the Case as it ran: the worker resolves `device` ("auto"),
    `batch_size` (None: the workload's default for the device), `params` (the
    workload's defaults filled in), `scenario` and `interop_threads`. Adding an
    axis is one field here (with its `dlbench run` option in metadata "cli"
    and its part of label()) and its check in plan.validate; key(), the result
    schema, CSV columns, suite keys, the option and the plan's RunRequest all
    follow from the fields. An axis only some frameworks implement (its option
    marked by_framework, as --transfer is) needs no check of its own: plan.validate
    checks it against each framework's registry entry (FrameworkInfo.axes).

    A case is these fields every case has, a user's model file where it runs one
    (`user_model`, spec.case_parts), and its load (`load`): the record of its kind of
    loop (spec.loads: a time-to-train target, a DDP launch, LoadGen's load, a served
    LLM's, ...), which kind follows from the case's own fields (`kind`). Their fields
    are written flat beside the case's own, under their own names: `Case.of` and
    `replaced` take those flat names, as a case file, a suite entry and `dlbench run`
    give them.
    """

    # its JSON holds every field, as every stored case does (spec.record_dict)
    WRITES_EVERY_FIELD: ClassVar[bool] = True

    workload: str = field(
        metadata=SUITE_AXIS
        | cli(
            "--workload",
            "-w",
            repeat=True,
            vocabulary=WORKLOADS,
            metavar="WORKLOAD",
            help="a workload, by the name dlbench list workloads shows",
        )
    )
    framework: str = field(
        metadata=SUITE_AXIS
        | cli(
            "--framework",
            "-f",
            repeat=True,
            vocabulary=FRAMEWORKS,
            metavar="FRAMEWORK",
            help=", ".join(FRAMEWORKS),
        )
    )
    compile: str = field(
        metadata=SUITE_AXIS
        | cli(
            "--compile",
            "-c",
            repeat=True,
            vocabulary=COMPILE_MODES,
            noun="compile mode",
            metavar="COMPILE",
            help="compile mode, e.g. eager, compile, script; each applies to the frameworks "
            "that have it",
        )
    )
    mode: str = field(
        default="infer",
        metadata=RECORDED_AXIS
        | cli(
            "--mode",
            "-m",
            repeat=True,
            vocabulary=MODES,
            help="default: infer, or train for time-to-train workloads",
        ),
    )
    device: str = field(
        default="auto",
        metadata=RECORDED_AXIS | cli("--device", "-d", help=f"{DEVICE_HELP} (default: auto)"),
    )
    batch_size: int | None = field(
        default=None,
        metadata=RECORDED_AXIS
        | cli(
            "--batch-size",
            "-b",
            repeat=True,
            parse=integer_in(1, MAX_BATCH),
            help="samples per step; default: the workload's, 1 for single-stream and server, "
            f"{MULTI_STREAM_SAMPLES} for multi-stream",
        ),
    )
    precision: str = field(
        default="fp32",
        metadata=RECORDED_AXIS
        | cli(
            "--precision",
            "-p",
            repeat=True,
            vocabulary=PRECISIONS,
            metavar="PRECISION",
            help="fp32 (strict, default), tf32, amp-fp16, amp-bf16 (torch), bf16 or fp16 "
            "(torch text generation: the whole model in that type), int8 or "
            "int8-dynamic (post-training quantization: onnxruntime, openvino, torch)",
        ),
    )
    threads: int = field(
        default_factory=default_threads,
        metadata=RECORDED_AXIS
        | cli(
            "--threads",
            "-t",
            parse=integer_in(1, MAX_THREADS),
            help="intra-op threads (default: all CPUs available)",
        ),
    )
    interop_threads: int | None = field(
        default=None,
        metadata={record_dict.REQUIRED: True}
        | cli(
            "--interop-threads",
            parse=integer_in(1, MAX_THREADS),
            help="inter-op threads (default: same as --threads)",
        ),
    )
    params: tuple[tuple[str, int], ...] = field(
        default=(),
        metadata=SUITE_AXIS
        | cli(
            "--param",
            repeat=True,
            parse=param_pair,
            metavar="KEY=INT",
            help="workload parameter, e.g. size=2048",
        ),
    )
    options: tuple[tuple[str, str], ...] = field(
        default=(),
        metadata=SUITE_AXIS
        | cli(
            "--option",
            repeat=True,
            parse=option_pair,
            metavar="KEY=VALUE",
            help="a framework's own option, part of the case's label, e.g. optimizer=fused "
            "(torch's fused AdamW); `dlbench list frameworks` names each framework's",
        ),
    )
    scenario: str | None = field(
        default=None,
        metadata=SUITE_AXIS
        | cli(
            "--scenario",
            "-s",
            repeat=True,
            vocabulary=SCENARIOS,
            metavar="SCENARIO",
            help="single-stream (batch 1, latency), offline (large batches, throughput), or "
            "with MLPerf LoadGen: multi-stream (a query of N samples after the last) or server "
            "(Poisson arrivals at --target-qps, or --find-peak)",
        ),
    )
    # a user's model file, its inputs and its trust (--model): None for a built-in
    # workload; its fields are written beside the case's own (spec.case_parts)
    user_model: UserModel | None = field(default=None, metadata=record_dict.FLATTENED)
    # its load: the record of its kind of loop (spec.loads: a time-to-train target, a
    # DDP launch, LoadGen's load, a served LLM's, ...), the kind decided by the case's
    # own fields (spec.loads.kind_name); None for a kind whose load has no fields
    load: Load | None = field(default=None, metadata=record_dict.flattened_union(chosen_load))
    # written after the DDP launch's keys, where every stored run has it
    transfer: str = field(
        default="outside",
        metadata={record_dict.WRITTEN_AFTER: "torchrun_args"}
        | SUITE_AXIS
        | cli(
            "--transfer",
            vocabulary=TRANSFERS,
            by_framework=True,
            help="GPU cases: copy the inputs host-to-device before timing (outside, default) "
            "or in every timed step (inside)",
        ),
    )

    def __post_init__(self) -> None:
        """The load its kind's record: where none is given, that record at its defaults
        (a `--scenario server` case is a LoadGen case before any of its fields is given);
        a record of another kind is a TypeError (Case.of refuses such fields first)."""
        record = KIND_LOADS.get(self.kind)
        if self.load is None and record is not None:
            object.__setattr__(self, "load", record())  # frozen: its own construction
        elif self.load is not None and type(self.load) is not record:
            raise TypeError(f"a {self.kind} case holds no {type(self.load).__name__}")

    @property
    def kind(self) -> str:
        """The name of the kind of loop it runs (spec.loop_kinds has each kind's entry)."""
        load = self.load
        own = {f.name: getattr(load, f.name) for f in fields(load)} if load is not None else {}
        return kind_name({"workload": self.workload, "framework": self.framework,
                          "scenario": self.scenario, "options": self.options, **own})  # fmt: skip

    def effective_batch_size(self, default: int) -> int:
        """The batch the worker uses: a single-stream or server query is one sample,
        a multi-stream query MLPerf's 8 unless given."""
        if self.batch_size is not None:
            return self.batch_size
        if self.scenario in ("single-stream", "server"):
            return 1
        return MULTI_STREAM_SAMPLES if self.scenario == "multi-stream" else default

    def effective_scenario(self, batch_size: int) -> str:
        """Given, or derived from the batch: 1 is single-stream, more is offline."""
        if self.scenario is not None:
            return self.scenario
        return "single-stream" if batch_size == 1 else "offline"

    @property
    def effective_interop_threads(self) -> int:
        """Inter-op threads default to the intra-op count, as the frameworks' own defaults do."""
        return self.interop_threads if self.interop_threads is not None else self.threads

    @property
    def threads_in_use(self) -> int:
        """CPU threads the case runs at once: each DDP rank (on a GPU too) has its own."""
        return self.threads * self.ranks

    def value_of(self, name: str) -> object:
        """A field's value by its flat name (as a case file, a suite entry and an option
        name it): a part's field where the case has that part, else its default."""
        if name in _OWN_FIELDS:
            return getattr(self, name)
        record: UserModel | Load | None
        if name in _USER_MODEL_FIELDS:
            record = self.user_model
        elif name in _LOAD_FIELDS:
            record = self.load
        else:
            raise AttributeError(f"a case has no field {name!r}")
        if record is not None and name in _RECORD_FIELDS[type(record)]:
            return getattr(record, name)
        default = record_dict.field_default(_FLAT[name])
        return None if default is MISSING else default

    @property
    def is_ddp(self) -> bool:
        """Launched by torchrun under DistributedDataParallel (--nproc N, N >= 1): a case
        of the ddp kind, the one that holds a DdpLaunch."""
        return isinstance(self.load, DdpLaunch)

    @property
    def ranks(self) -> int:
        """The processes the case trains in: its DDP ranks, 1 for a plain process."""
        return self.load.nproc if isinstance(self.load, DdpLaunch) else 1

    @property
    def driven_by_loadgen(self) -> bool:
        """Given --loadgen (or planning set it: a multi-stream or server scenario): MLPerf
        LoadGen drives it (a LoadGen case, or a generation server)."""
        return isinstance(self.load, QueryLoad) and self.load.loadgen is True

    @property
    def given_model(self) -> UserModel:
        """The user model's part, for the code that runs only a user model's case."""
        if self.user_model is None:
            raise TypeError(f"a {self.workload} case has no model file (--model)")
        return self.user_model

    @property
    def device_kind(self) -> str:
        """cpu, cuda, mps or auto: the device without its index (cuda:1 and cuda:0 compare)."""
        return self.device.split(":")[0]

    def key(self) -> str:
        """What makes two results the same case, within a run and across runs.

        Every field that changes what is measured, with the device reduced to
        its kind; launch details and file paths (their digests count) are left
        out. Stored beside each result and used by compare, rerun and scaling.
        """
        return self.key_without()

    def key_without(self, *names: str) -> str:
        """The key with some axes left out: the 1-process twin of a DDP case matches on it."""
        whole = self.to_dict()
        data = {
            name: whole[name]
            for name, f in record_dict.flat_fields(Case)
            if _in_key(f) and name not in names
        }
        if "device" in data:
            data["device"] = self.device_kind
        if "interop_threads" in data:  # None and the same count as threads are one case
            data["interop_threads"] = self.effective_interop_threads
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def label(self, omit: Collection[str] = (), only: Collection[str] | None = None) -> str:
        """The one human-readable name of a case, for every table, chart and message.

        Every key axis that is not at its usual value appears, so two cases
        with different keys never share a label. `omit` drops axes a table
        shows in columns of their own; `only` keeps just the named axes (a
        study table whose rows differ by framework and compile mode).
        """
        parts = [(axis, text) for axis, text in self._label_parts() if text]
        chosen = [
            text for axis, text in parts if axis not in omit and (only is None or axis in only)
        ]
        return " ".join(chosen).replace(" / [", " [").strip(" /")

    def _label_parts(self) -> list[tuple[str, str]]:
        framework = NULL_LABEL if self.framework == "null" else self.framework
        batch = "default" if self.batch_size is None else str(self.batch_size)
        interop = self.interop_threads
        return [
            ("workload", self.workload),
            ("params", " ".join(f"{k}={v}" for k, v in self.params)),
            ("framework", f"/ {framework}"),
            ("compile", f"[{self.compile}]"),
            ("mode", self.mode),
            ("scenario", self.scenario or ""),
            ("precision", "" if self.precision == "fp32" else self.precision),
            ("batch_size", f"bs={batch}"),
            ("device", self.device),
            ("threads", f"t={self.threads}"),
            ("interop_threads", "" if interop in (None, self.threads) else f"interop={interop}"),
            ("transfer", "transfer=inside" if self.transfer == "inside" else ""),
            *load_label_parts(self.load, self.scenario),
            *_user_model_label_parts(self.user_model),
            ("options", " ".join(f"{k}={v}" for k, v in self.options)),
        ]

    @classmethod
    def of(cls, **flat: Any) -> Case:  # noqa: ANN401  # each field's own type
        """The case of these fields by their flat names, as a case file, a suite entry and
        `dlbench run`'s options name them: a user model's fields (model, inputs, ...) go
        into its part (spec.case_parts), made where one of them is given a value, and a
        load's into its kind's record (spec.loads); FieldsNotTaken where a load's field
        is given a value its kind's record has no place for."""
        return cls(**_nested(flat))

    def replaced(self, **flat: Any) -> Case:  # noqa: ANN401  # each field's own type
        """This case with some fields, by their flat names, set (dataclasses.replace
        across the parts and the load)."""
        values = {name: getattr(self, name) for name in _OWN_FIELDS}
        for part in ("user_model", "load"):
            record = values.pop(part)
            if record is not None:
                values.update((f.name, getattr(record, f.name)) for f in fields(record))
        return Case.of(**{**values, **flat})

    def to_dict(self) -> JSONObject:
        return record_dict.to_dict(self)

    @classmethod
    def from_dict(cls, data: JSONValue, where: str | None = None) -> Case:
        """The case a JSON object holds; ValueError (naming `where`) where it is not one."""
        if isinstance(data, dict) and "ddp" not in data:
            # written before the field: every multi-process case was DDP
            nproc = data.get("nproc", 1)
            data = {**data, "ddp": isinstance(nproc, int) and nproc > 1}
        return record_dict.from_dict(cls, data, where)


_OWN_FIELDS = tuple(f.name for f in fields(Case))
_FLAT = dict(record_dict.flat_fields(Case))
_USER_MODEL_FIELDS = {f.name: f for f in fields(UserModel)}
_LOAD_FIELDS = frozenset(_FLAT) - frozenset(_OWN_FIELDS) - frozenset(_USER_MODEL_FIELDS)


# the fields of each record a case may hold beside its own
_RECORD_FIELDS = {
    record: frozenset(f.name for f in fields(record))
    for record in (UserModel, *KIND_LOADS.values())
}


def _nested(flat: dict[str, Any]) -> dict[str, Any]:  # Any: each field's own type
    """Flat field values with the user model's gathered into its part (None where none
    of its fields is given a value other than its default), and the load's into its
    kind's record (spec.loads.chosen_load)."""
    values = dict(flat)
    own = {name: values.pop(name) for name in _USER_MODEL_FIELDS if name in values}
    given = any(
        not record_dict.holds_default(value, record_dict.field_default(_USER_MODEL_FIELDS[name]))
        for name, value in own.items()
    )
    if "user_model" in values:
        if given:
            raise TypeError(f"user_model and its fields ({', '.join(own)}) given together")
    else:
        missing = [
            name
            for name, f in _USER_MODEL_FIELDS.items()
            if given and record_dict.field_default(f) is MISSING and name not in own
        ]
        if missing:
            raise TypeError(f"{', '.join(own)} given without {', '.join(missing)}")
        values["user_model"] = UserModel(**own) if given else None
    load = {name: values.pop(name) for name in _LOAD_FIELDS if name in values}
    if "load" in values:
        if load:
            raise TypeError(f"load and its fields ({', '.join(load)}) given together")
        return values
    kind = kind_name({**values, **load})
    record = KIND_LOADS.get(kind)
    taken = _RECORD_FIELDS[record] if record is not None else frozenset()
    strays = sorted(
        (name for name, value in load.items() if name not in taken
         and not record_dict.holds_default(value, record_dict.field_default(_FLAT[name]))),
        key=list(_FLAT).index,
    )  # fmt: skip
    if strays:
        raise FieldsNotTaken(kind, {name: load[name] for name in strays})
    values["load"] = record(**{k: v for k, v in load.items() if k in taken}) if record else None
    return values


# How the null backend's cases are named wherever they are shown.
NULL_LABEL = "null (harness)"
# Case fields kept as name -> value pairs (JSON objects in files): params, options, inputs
PAIR_FIELDS = record_dict.pair_fields(Case)


def _user_model_label_parts(user_model: UserModel | None) -> list[tuple[str, str]]:
    if user_model is None:
        return []
    model, data = user_model.model_digest, user_model.input_data_digest
    return [
        ("model_digest", f"model={short_digest(model)}" if model else ""),
        ("inputs", " ".join(f"{k}:{v}" for k, v in user_model.inputs)),
        ("input_data_digest", f"input-data={short_digest(data)}" if data else ""),
    ]


def _in_key(f: Field[object]) -> bool:
    return bool(f.metadata.get("key", True))


def suite_axes() -> tuple[str, ...]:
    """The Case fields a suite entry may set."""
    return tuple(name for name, f in record_dict.flat_fields(Case) if f.metadata.get("suite"))


@dataclass(frozen=True)
class Settings:
    """How every case of a run is measured (the stop rule and the guards)."""

    # its JSON holds every setting, as every stored run's does (spec.record_dict)
    WRITES_EVERY_FIELD: ClassVar[bool] = True

    # "cli": the `dlbench run` option that sets the field; a suite's settings
    # use the same names (min_time for --min-time; plan.build.SETTING_FIELDS)
    min_time_s: float = field(
        default=1.0,
        metadata=cli(
            "--min-time",
            parse=number_in(0.0, MAX_MIN_TIME_S),
            group="measurement",
            help="seconds of measured time",
        ),
    )
    min_iters: int = field(
        default=10,
        metadata=cli(
            "--min-iters",
            parse=integer_in(1, MAX_ITERS),
            group="measurement",
            help="measured iterations at least",
        ),
    )
    warmup_iters: int = field(
        default=3,
        metadata=cli(
            "--warmup",
            parse=integer_in(0, MAX_ITERS),
            group="measurement",
            help="warm-up iterations after the first call",
        ),
    )
    timeout_s: float = field(
        default=600.0,
        metadata=cli(
            "--timeout",
            parse=positive_at_most(MAX_TIMEOUT_S),
            group="measurement",
            help="seconds per case (default 600)",
        ),
    )
    seed: int = field(
        default=0,
        metadata=cli(
            "--seed",
            parse=integer_in(0, MAX_SEED),
            group="measurement",
            help="seed for weights and inputs (default 0)",
        ),
    )
    # fresh worker processes per case, run round-robin (results.repeats merges them)
    repeat: int = field(
        default=1,
        metadata=cli(
            "--repeat",
            parse=integer_in(1, MAX_REPEAT),
            metavar="N",
            group="measurement",
            help="run each case in N fresh worker processes, round-robin over the cases; "
            "compare needs several per side for a verdict (default 1; suites may set it)",
        ),
    )
    # LoadGen cases: MLPerf's own minimum duration (OFFICIAL_MIN_TIME_S) and
    # query counts instead of short runs; still not a submission
    official: bool = field(
        default=False,
        metadata=cli(
            "--official",
            switch=True,
            group="serving",
            help=f"LoadGen cases: MLPerf's minimum duration ({OFFICIAL_MIN_TIME_S:g} s) "
            "instead of short runs",
        ),
    )
    # Seconds of continuous work before a ceiling case's sustained windows (option
    # ceiling=sustained, worker.ceiling_windows); None: 10 on a GPU, 0 on a CPU. Set by
    # `dlbench roofline --sustain`, whose option it is: no `run` option declares it.
    sustain_s: float | None = None
    # The user's name for the code measured (a commit, a version), which dlbench cannot
    # know: `dlbench history --order label` orders runs by it. It changes no number, so
    # a suite file cannot set it (plan.suites.SETTING_KEYS) and no case key holds it.
    label: str | None = field(
        default=None,
        metadata=cli(
            "--label",
            parse=run_label,
            metavar="TEXT",
            group="output",
            help="store this label with the run (a commit, a version); "
            "`dlbench history --order label` orders runs by it",
        ),
    )

    def to_dict(self) -> JSONObject:
        return record_dict.to_dict(self)

    @classmethod
    def from_dict(cls, data: JSONValue, where: str | None = None) -> Settings:
        """The settings a JSON object holds; ValueError (naming `where`) where they are not."""
        return record_dict.from_dict(cls, data, where)
