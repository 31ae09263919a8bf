"""An engine dlbench serves as a server of its own (vLLM): started for the case, loaded
by the endpoint client, its tokens held to the torch reference's, stopped.

The server starts on a free loopback port (or --option port=N) on the workload's
shared checkpoint, and the case waits for it (worker.engine_server); its settings are
read back from it (the backend's `served_details`). The load is the endpoint's
(worker.endpoint_run: --concurrency, --request-rate, --find-peak, the SLOs), with the
workload's seeded prompts sent as token ids (the completions API takes a prompt so),
PROMPTS of them in turn, each request asking for its tokens' ids in the stream. Every
answered request's tokens, the warm-up's included, are then held to the reference's
for its prompt, as a LoadGen server's are (worker.token_serving): continuous batching
must still compute the same tokens. A server that exits during the run fails the case
with its log's last lines; the server never outlives the case.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.base import Backend, Job
from dlbench.backends.openai_server import OpenAIServerBackend
from dlbench.errors import ReferenceUnavailable
from dlbench.measure.openai_api import COMPLETIONS, length_fields, request_body
from dlbench.measure.openai_stream import StreamedRequest, stream_request
from dlbench.reference.decoder import reference_tokens
from dlbench.results.details import Details, Generation, TokenCheck
from dlbench.results.records import Result
from dlbench.spec.case import Settings
from dlbench.spec.loads import ServedEngineLoad
from dlbench.spec.loop_kinds import case_load
from dlbench.spec.registry import precision_info
from dlbench.worker.endpoint_run import LoadTarget, Session, run_endpoint
from dlbench.worker.engine_server import EngineServer, free_port, require_free
from dlbench.worker.files import case_files_dir
from dlbench.worker.placement import require_placement
from dlbench.worker.progress import report_progress
from dlbench.worker.result import BARE, ProcessSetup, Verdict, result_from
from dlbench.worker.token_check import check_tokens, failure
from dlbench.workloads.requests import Conversation, RequestSet, Turn, WordText

if TYPE_CHECKING:
    import httpx

# The seeded prompts requests take in turn, each checked against the reference's tokens
# (as many as a LoadGen server's: worker.token_serving)
PROMPTS = 8
# The most a server may take to serve: vLLM compiling a model (and capturing CUDA graphs
# on a GPU) takes minutes; the case's --timeout bounds the whole case beside it
READY_DEADLINE_S = 900.0
SERVER_LOG = "server.log"
# The completions API's field that asks for each streamed token's id (vLLM's own)
TOKEN_IDS_FIELD = "return_token_ids"


@dataclass(frozen=True)
class TokenTurn(Turn):
    """A turn whose prompt is token ids (the workload's seeded prompt), not text."""

    token_ids: tuple[int, ...] = ()


class SeededPrompts(RequestSet):
    """The decoder workload's seeded prompts as the endpoint client's requests:
    conversation i is one turn of prompt i mod PROMPTS, answered with osl tokens. No
    salt: the reference's tokens are for these prompts (a prefix cache is off instead:
    backends.vllm.server)."""

    def __init__(self, job: Job) -> None:
        super().__init__(job.params, job.seed, WordText())
        inputs = job.inputs(PROMPTS)
        self.prompts = [tuple(int(t) for t in row) for row in inputs["input_ids"]]
        self.isl, self.osl = job.params["isl"], job.params["osl"]

    def conversation(self, index: int, warmup: bool = False) -> Conversation:
        turn = TokenTurn("", self.isl, self.osl, self.prompts[index % PROMPTS])
        return Conversation(index, (turn,))


class TokenPromptSession(Session):
    """The endpoint client's session with token-id prompts; it keeps every answer with
    the prompt it answered, for the check."""

    def __init__(self, target: LoadTarget, requests: RequestSet, client: httpx.AsyncClient,
                 device: str, timeout_s: float | None = None) -> None:  # fmt: skip
        super().__init__(target, requests, client, device, timeout_s)
        self.token_ids_field = TOKEN_IDS_FIELD  # vLLM's own field: nothing to negotiate
        self.answers: list[tuple[int, StreamedRequest]] = []

    async def negotiate(self) -> None:
        return None

    async def conversation(self, conversation: Conversation) -> list[StreamedRequest]:
        turn = conversation.turns[0]
        assert isinstance(turn, TokenTurn)  # SeededPrompts'
        body = request_body(COMPLETIONS, self.model, "", turn.output_tokens, self.token_ids_field)
        body["prompt"] = list(turn.token_ids)  # the completions API takes token ids
        # vLLM honours ignore_eos, so max_tokens alone fixes the length (each answer's
        # is checked: token_check); min_tokens would add its logits processor's work
        # to every step, which vLLM's own client does not ask (docs/validation.md)
        body.pop("min_tokens", None)
        self.length_fields = self.length_fields or length_fields(body)
        record = await stream_request(self.client, self.url, COMPLETIONS, body)
        self.answers.append((conversation.index % PROMPTS, record))
        return [record]


def run_served_engine(
    backend: Backend, job: Job, settings: Settings, process: ProcessSetup = BARE
) -> Result:
    """Start the case's server, measure it under the case's load, check its tokens.
    Its loop kind selects it by the registry's `serves_openai`; the backend must be the
    class that serves (a registry entry and its backend that disagree are dlbench's bug)."""
    if not isinstance(backend, OpenAIServerBackend):
        raise TypeError(f"{job.case.framework} serves_openai, but its backend is no server")
    options = dict(job.case.options)
    port = int(options["port"]) if "port" in options else free_port()
    if "port" in options:
        require_free(port)
    folder = case_files_dir(job.outputs)
    launch = backend.server_launch(job, port, folder)
    started = time.perf_counter()
    with EngineServer(launch, folder / SERVER_LOG, backend.cause_in_log) as server:
        report_progress(job.outputs, f"starting {launch.engine}'s server on port {port}")
        server.ready(READY_DEADLINE_S)
        ready = f"{launch.engine}'s server is ready after {server.ready_s:.0f} s"
        report_progress(job.outputs, ready)
        details = backend.served_details(job, launch, server.log_text())
        require_placement(job.device, details)
        load = case_load(job.case, ServedEngineLoad)
        target = LoadTarget(launch.url, launch.served_model, load)
        sessions: list[TokenPromptSession] = []

        def new_session(target: LoadTarget, requests: RequestSet, client: httpx.AsyncClient,
                        device: str, timeout_s: float | None = None) -> Session:  # fmt: skip
            sessions.append(TokenPromptSession(target, requests, client, device, timeout_s))
            return sessions[-1]

        try:
            run = run_endpoint(job, settings, target, SeededPrompts(job), new_session,
                               server.exit_watch)  # fmt: skip
        except Exception:
            if server.exited() is None:
                raise
            raise server.failure("stopped during the run") from None
        if server.exited() is not None:  # its requests failed: the server's words say why
            raise server.failure("stopped during the run")
        ready_s = server.ready_s
    # every answered request's tokens against the reference's for its prompt
    check = token_check(job, sessions[0].answers if sessions else [])
    merged = _merged(run.measured.details, details, launch.url, folder / SERVER_LOG, ready_s)
    generation = merged.generation
    assert generation is not None  # _merged's
    measured = replace(
        run.measured, details=replace(merged, generation=replace(generation, tokens=check))
    )
    # the load's own failure first; else a clear divergence of the tokens fails the case
    verdict = Verdict(error=run.verdict.error or failure(check))
    # the server's address is a launch detail, kept in the details
    setup_s = (run.setup_s or 0.0) + (ready_s or 0.0)
    result = result_from(job, measured, setup_s=setup_s, verdict=verdict, process=process)
    stopped = f"{launch.engine}'s server stopped ({time.perf_counter() - started:.0f} s)"
    report_progress(job.outputs, stopped)
    return result


def _merged(measured: Details, served: Details, url: str, log: Path,
            ready_s: float | None) -> Details:  # fmt: skip
    """The server's own record (placement, settings, KV cache) beside what was measured."""
    generation = measured.generation or Generation()
    if served.generation is not None:
        generation = replace(generation, kv_cache_mb=served.generation.kv_cache_mb,
                             kv_cache_dtype=served.generation.kv_cache_dtype)  # fmt: skip
    extra = {**served.extra, "server_url": url, "server_log": str(log),
             "server_ready_s": ready_s, **measured.extra}  # fmt: skip
    return replace(measured, placement=served.placement, extra=extra, generation=generation)


def token_check(job: Job, answers: list[tuple[int, StreamedRequest]]) -> TokenCheck:
    done = [(row, record) for row, record in answers if record.ok]
    if not done:
        return TokenCheck(verdict="not checked: no request was answered")
    answered = [(row, record.output_ids) for row, record in done if record.output_ids is not None]
    if len(answered) < len(done):
        return TokenCheck(verdict="not checked: the server sent no token ids")
    osl = job.params["osl"]
    lengths = [len(ids) for _, ids in answered]
    short = [length for length in lengths if length != osl]
    if short:
        return TokenCheck(verdict=f"diverged: an answer of {short[0]} tokens, where {osl} "
                          "were asked")  # fmt: skip
    try:
        reference = reference_tokens(job.case_inputs(PROMPTS))
    except ReferenceUnavailable as exc:
        return TokenCheck(verdict=f"not checked: {exc}")
    rows = [row for row, _ in answered]
    expected = {name: values[rows] for name, values in reference.items()}
    tolerance = precision_info(job.case.precision).tolerance or 0.0
    return check_tokens([ids for _, ids in answered], expected, tolerance)
