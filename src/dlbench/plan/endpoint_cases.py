"""Endpoint cases (--endpoint URL): the llm-requests workload on the endpoint client.

`--endpoint URL` alone makes the plan: one case of llm-requests on `endpoint` per
load asked for (a sweep of --concurrency or --request-rate gives several). The
options only such a case takes are refused anywhere else (plan.validate, from the loop
kinds' `takes`), and the ones that exclude each other are refused together, each in
one line naming what is allowed.
Whether the server answers, lists the model and streams is asked in the parent
before the run is stored (launch.endpoint_probe): that needs the network, and
this room has no side effects.
"""

from __future__ import annotations

from pathlib import Path

from dlbench.errors import UserError
from dlbench.measure.client_limits import connection_limit
from dlbench.measure.load_profile import LoadProfile
from dlbench.measure.openai_auth import without_credentials
from dlbench.spec.case import REMOTE_DEVICE, Case
from dlbench.spec.digest import path_digest
from dlbench.spec.loads import ClientLoad, ForeignServerLoad
from dlbench.spec.loop_kinds import case_load
from dlbench.spec.registry import ENDPOINT_FRAMEWORK, ENDPOINT_WORKLOAD
from dlbench.untyped import JSONObject
from dlbench.workloads.model_config import read_model_config
from dlbench.workloads.requests import tokenizer_file

INSTALL = 'pip install "dlbench[llm-serving]"'


def option_value(source: object, name: str) -> object:
    """A field by its flat name: a case's (its part's), or a request's own."""
    return source.value_of(name) if isinstance(source, Case) else getattr(source, name, None)


def endpoint_entry(workloads: tuple[str, ...], frameworks: tuple[str, ...]) -> JSONObject:
    """The one suite entry --endpoint makes; another workload or framework is refused."""
    for given, allowed, flag in ((workloads, ENDPOINT_WORKLOAD, "--workload"),
                                 (frameworks, ENDPOINT_FRAMEWORK, "--framework")):  # fmt: skip
        other = [name for name in given if name != allowed]
        if other:
            raise UserError(f"--endpoint sends {ENDPOINT_WORKLOAD} through the endpoint client; "
                            f"{flag} {other[0]} is not taken (allowed: {allowed})")  # fmt: skip
    return {"workload": ENDPOINT_WORKLOAD, "framework": ENDPOINT_FRAMEWORK}


def validate_endpoint_case(case: Case) -> Case:
    """An endpoint case whole and consistent (its options on any other case are refused
    before: plan.validate); returns it with its tokenizer's digest."""
    if case.framework != ENDPOINT_FRAMEWORK:
        return case
    load = case_load(case, ForeignServerLoad)
    if load.endpoint is None:
        raise UserError(f"the {ENDPOINT_FRAMEWORK} framework needs --endpoint URL (the server)")
    if without_credentials(load.endpoint) != load.endpoint:  # the CLI takes them out first
        raise UserError("an endpoint URL with credentials reached the plan, which keeps and "
                        "stores its URL: give them with --api-key or $OPENAI_API_KEY")  # fmt: skip
    if case.device not in ("auto", REMOTE_DEVICE):
        raise UserError(f"an endpoint's work runs on its server: --device {case.device} is not "
                        f"this client's; allowed: auto or {REMOTE_DEVICE}")  # fmt: skip
    if case.scenario is not None or case.driven_by_loadgen:
        raise UserError("--scenario and --loadgen are MLPerf LoadGen's, for models run here; an "
                        "endpoint's load is --concurrency N or --request-rate R")  # fmt: skip
    processes = load.client_processes or 1
    validate_load(load, processes)
    _require_a_share_each(load, processes)
    if load.model_config is not None:
        _require_model_config(load.model_config)
    require_slos_where_searched(load, "--find-peak with --endpoint")
    return case.replaced(tokenizer_digest=_tokenizer_digest(load.tokenizer))


def validate_load(load: ClientLoad, processes: int = 1) -> None:
    """The load a case of the endpoint client asks for (an endpoint's, or a server
    dlbench starts: plan.served_engine_cases): one profile, valid, with no more users
    than the client's `processes` can hold open."""
    if load.concurrency is not None and load.request_rate is not None:
        raise UserError("--concurrency (a closed loop) and --request-rate (an open loop) are "
                        "two load profiles; give one")  # fmt: skip
    if load.burstiness is not None and load.request_rate is None:
        raise UserError("--burstiness shapes --request-rate's arrivals; give --request-rate")
    if load.latency_clock is not None and load.request_rate is None:
        raise UserError("--latency-clock says where --request-rate's latencies count from (a "
                        "closed loop's count from the send); give --request-rate")  # fmt: skip
    try:
        LoadProfile.of(load.concurrency, load.request_rate, load.burstiness)
    except ValueError as exc:
        raise UserError(f"--endpoint load: {exc}") from None
    _require_users_held(load.concurrency, processes)


def require_slos_where_searched(load: ClientLoad, searched: str) -> None:
    """The SLO bounds the client's search (`searched`: how a refusal names it) and its
    percentile are of."""
    if load.find_peak and load.ttft_ms is None and load.tpot_ms is None:
        raise UserError(f"{searched} searches for the load whose SLOs hold: "
                        "give --ttft-ms, --tpot-ms or both")  # fmt: skip
    if load.slo_percentile is not None and load.ttft_ms is None and load.tpot_ms is None:
        raise UserError("--slo-percentile is the percentile of --ttft-ms and --tpot-ms: "
                        "give one of them")  # fmt: skip


def _require_users_held(users: int | None, processes: int = 1) -> None:
    """Refused, not capped: a case is the load it names, and a capped one would run,
    and be stored as, another (two capped sweep points would be the same load)."""
    limit = connection_limit()
    if users is None or limit is None or -(-users // processes) <= limit.most:
        return
    held = limit.most * processes
    spread = f" over {processes} client processes" if processes > 1 else ""
    raise UserError(f"--concurrency {users}: one client process holds at most {limit.most} "
                    f"requests open at once ({limit.why}); allowed{spread}: 1 to {held} "
                    "(more with --client-processes)")  # fmt: skip


def _require_a_share_each(load: ClientLoad, processes: int) -> None:
    """--client-processes N spreads a closed loop's users: each process needs one."""
    users = load.concurrency or 1
    if processes > 1 and load.request_rate is None and users < processes:
        raise UserError(f"--client-processes {processes} spreads the users over the processes, "
                        f"and this load has {users}; allowed: 1 to {users} (or a "
                        "--request-rate, whose arrivals it spreads)")  # fmt: skip


def _require_model_config(path: str) -> None:
    """--model-config is a dense decoder's config.json the roofline can count."""
    try:
        read_model_config(Path(path), "--model-config")
    except ValueError as exc:
        raise UserError(f"--model-config {path}: {exc}") from None


def _tokenizer_digest(tokenizer: str | None) -> str | None:
    if tokenizer is None:
        return None
    path = tokenizer_file(Path(tokenizer))
    if not path.is_file():
        raise UserError(f"--tokenizer {tokenizer}: no tokenizer.json there (a tokenizers file, "
                        "or the model folder holding one)")  # fmt: skip
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise UserError(f"--tokenizer needs the tokenizers package: {INSTALL}") from None
    try:
        Tokenizer.from_file(str(path))
    except Exception as exc:  # the library's own parse errors: the user's file
        raise UserError(f"--tokenizer {tokenizer}: not a tokenizers file "
                        f"({str(exc).splitlines()[0][:120]})") from None  # fmt: skip
    return path_digest(path)
