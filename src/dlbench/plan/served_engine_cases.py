"""Cases of an engine dlbench serves as a server of its own (vLLM:
FrameworkInfo.serves_openai).

Such a case is a decoder workload on the engine, measured as an endpoint is
(worker.served_engine): its load is the endpoint's (--concurrency N, --request-rate R
with --burstiness, --find-peak with --ttft-ms and --tpot-ms at --slo-percentile;
none: one request at a time), not a LoadGen scenario. The options that point at a
server someone else runs (--endpoint, --served-model, --tokenizer) are refused
(plan.validate, from the loop kinds' `takes`): dlbench
starts this one on the workload's checkpoint and sends its seeded prompts as token ids,
through the completions API. --streams is the engine's batch: the most sequences it
runs at once (32 by default, as the other continuous-batching engines here).
"""

from __future__ import annotations

from dlbench.errors import UserError
from dlbench.measure.openai_api import COMPLETIONS
from dlbench.plan.endpoint_cases import require_slos_where_searched, validate_load
from dlbench.plan.token_server_cases import DEFAULT_BATCHED_SEQUENCES
from dlbench.spec.case import Case
from dlbench.spec.case_parts import MAX_STREAMS
from dlbench.spec.loads import ServedEngineLoad
from dlbench.spec.loop_kinds import CLIENT_LOAD_HOW, case_load
from dlbench.spec.registry import FrameworkInfo
from dlbench.workloads.memory import generation_server_need, require_room


def validate_served_engine(case: Case, info: FrameworkInfo) -> Case:
    """The case whole and consistent; returns it with its streams filled in."""
    # the options of a server someone else runs, and LoadGen's, are refused before
    # (plan.validate: this kind's `takes`); the scenario is every case's own field
    if case.scenario is not None:
        raise UserError(f"--scenario: not taken by {case.framework}, whose server dlbench "
                        "starts on the workload's checkpoint; its load is "
                        f"{CLIENT_LOAD_HOW}")  # fmt: skip
    load = case_load(case, ServedEngineLoad)
    if load.api != COMPLETIONS:
        raise UserError(f"--api {load.api}: {case.framework} is sent the workload's seeded "
                        "prompts as token ids, which the completions API takes; allowed: "
                        f"{COMPLETIONS}")  # fmt: skip
    if not isinstance(load.find_peak, bool):
        raise UserError(f"invalid find_peak {load.find_peak!r}; expected true or false")
    validate_load(load)
    require_slos_where_searched(load, f"--find-peak on {case.framework}")
    streams = DEFAULT_BATCHED_SEQUENCES if load.streams is None else load.streams
    most = info.max_streams or MAX_STREAMS
    if streams > most:  # a given one is an integer from 1 to MAX_STREAMS (its reader)
        raise UserError(f"invalid --streams {streams!r} on {case.framework!r} (the most "
                        f"sequences its batch holds); expected 1 to {most}")  # fmt: skip
    require_room(generation_server_need(case, streams, one_pipeline=True))
    return case.replaced(streams=streams)
