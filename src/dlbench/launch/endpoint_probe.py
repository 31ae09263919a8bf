"""Before an endpoint run is stored: does the server answer, serve the model, and
stream what the run will send?

Each is the user's to fix, so each ends in exit 2 with one line, before the run
exists: a URL where nothing accepts a connection within the client's connect
timeout, a server that answers /v1/models with an error, a model it does not list
(or, with none named, a server listing several), credentials it refuses, and a
request like the run's (a prompt of the case's input length, salted as the run's
are, asking for a few tokens) that does not come back as a whole stream within the
check's deadline: a server that streams without end, or a byte at a time, fails it
then, never hangs it. A case with no --served-model gets the one the server lists,
so the model is in the stored case (and its key).

The credentials (--api-key, $OPENAI_API_KEY, or `user:password@` in the URL) are
taken out of the URL here, before the plan sees it, and handed on in the environment
(measure.openai_auth): the probe and the workers send them; nothing prints or
stores them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dlbench.errors import UserError
from dlbench.measure.openai_api import MODELS_PATH, request_body
from dlbench.measure.openai_auth import (
    API_KEY_OPTION,
    AUTHORIZATION_ENV,
    auth_headers,
    basic_authorization,
    bearer_authorization,
    redacted,
    without_credentials,
)
from dlbench.spec.case import Case, Settings
from dlbench.spec.loads import ForeignServerLoad
from dlbench.spec.loop_kinds import case_load, load_part
from dlbench.spec.registry import ENDPOINT_FRAMEWORK

if TYPE_CHECKING:  # imported where a check runs: a run without --endpoint needs none
    import httpx

    from dlbench.measure.openai_stream import Negotiated
    from dlbench.workloads.requests import Turn

# The most a check's answer may take, --timeout permitting: a server that cannot
# list its models, or give a few tokens to a prompt of the case's length, in this
# long is not fit to be measured
CHECK_DEADLINE_S = 120.0
# Statuses that say the server wants credentials it was not given
UNAUTHORIZED = (401, 403)
CREDENTIALS_HINT = (
    f"the server wants credentials: {API_KEY_OPTION} KEY (or $OPENAI_API_KEY), or "
    "user:password@ in the URL"
)


def take_credentials(url: str | None, api_key: str | None, resuming: bool = False) -> str | None:
    """The endpoint URL without its credentials, for the plan; the Authorization they
    (or --api-key, else $OPENAI_API_KEY) make is left in this process's environment
    for the check and the workers it starts, and nowhere else."""
    os.environ.pop(AUTHORIZATION_ENV, None)  # each command resolves its own
    if api_key is not None and url is None and not resuming:
        raise UserError(f"{API_KEY_OPTION} is sent to an OpenAI-compatible server: "
                        "give --endpoint URL (or --resume a run that has one)")  # fmt: skip
    basic = basic_authorization(url) if url is not None else None
    if basic is not None and api_key is not None:
        raise UserError(f"{API_KEY_OPTION} and user:password@ in --endpoint's URL are two "
                        "Authorization headers; give one")  # fmt: skip
    header = basic or (bearer_authorization(api_key) if api_key else None)
    if header is not None:
        os.environ[AUTHORIZATION_ENV] = header
    return without_credentials(url) if url is not None else None


def check_endpoints(cases: Sequence[Case], settings: Settings) -> list[Case]:
    """The cases, each endpoint case with its served model named; UserError (exit 2)
    where a server cannot be measured."""
    deadline_s = min(CHECK_DEADLINE_S, settings.timeout_s)
    named: dict[tuple[str, str | None], str] = {}
    checked: set[tuple[str | None, str, str, tuple[tuple[str, int], ...], str | None]] = set()
    out = []
    for case in cases:
        load = load_part(case, ForeignServerLoad)
        if case.framework != ENDPOINT_FRAMEWORK or load is None or load.endpoint is None:
            out.append(case)
            continue
        key = (load.endpoint, load.served_model)
        if key not in named:
            named[key] = served_model(load.endpoint, load.served_model, deadline_s)
        case = case.replaced(served_model=named[key])
        sent = (load.endpoint, named[key], load.api, case.params, load.tokenizer)
        if sent not in checked:
            require_stream(case, settings.seed, deadline_s)
            checked.add(sent)
        out.append(case)
    return out


def served_model(url: str, given: str | None, deadline_s: float = CHECK_DEADLINE_S) -> str:
    """The model a case's requests name: the one given, if the server lists it (or
    lists nothing), else the one it lists."""
    listed = _listed_models(url, required=given is None, deadline_s=deadline_s)
    if given is not None:
        if listed and given not in listed:
            raise UserError(f"--served-model {given}: {url} does not serve it; allowed: "
                            f"{', '.join(listed)}")  # fmt: skip
        return given
    if len(listed) != 1:
        raise UserError(f"{url} serves {len(listed)} models; name one with --served-model: "
                        f"{', '.join(listed)}")  # fmt: skip
    return listed[0]


def _listed_models(url: str, required: bool, deadline_s: float) -> list[str]:
    import httpx

    from dlbench.measure.openai_stream import DEADLINE_PASSED, deadline

    async def listing() -> httpx.Response:
        async with _client(deadline_s) as client, deadline(deadline_s):
            return await client.get(url + MODELS_PATH)

    import asyncio  # here, where a server is probed: every command imports this module

    try:
        reply = asyncio.run(listing())
    except DEADLINE_PASSED:
        raise UserError(f"--endpoint {url}: no whole answer to GET {MODELS_PATH} within "
                        f"{deadline_s:g} s ({_deadline_words()})") from None  # fmt: skip
    except httpx.TimeoutException as exc:
        raise UserError(f"--endpoint {url}: no answer within the timeout "
                        f"({type(exc).__name__})") from None  # fmt: skip
    except httpx.HTTPError as exc:
        raise UserError(f"--endpoint {url}: cannot connect ({type(exc).__name__}: "
                        f"{redacted(str(exc))[:120]})") from None  # fmt: skip
    if reply.status_code in UNAUTHORIZED:
        raise UserError(f"--endpoint {url}: GET {MODELS_PATH} answered HTTP "
                        f"{reply.status_code}: {CREDENTIALS_HINT}")  # fmt: skip
    if reply.status_code != 200:
        if not required:
            return []  # a server without the list: the name given is taken as it is
        raise UserError(f"--endpoint {url}: GET {MODELS_PATH} answered HTTP {reply.status_code}"
                        ": no OpenAI-compatible API lists its models at this URL (check its "
                        "address and port); a server that serves one without the list takes "
                        "its name from --served-model")  # fmt: skip
    return _model_ids(url, reply)


def _model_ids(url: str, reply: httpx.Response) -> list[str]:
    try:
        entries = reply.json().get("data") or []
        return [str(entry["id"]) for entry in entries]
    except (ValueError, AttributeError, KeyError, TypeError):
        raise UserError(f"--endpoint {url}: {MODELS_PATH} is not an OpenAI model list "
                        "(not an OpenAI-compatible server?)") from None  # fmt: skip


def require_stream(case: Case, seed: int, deadline_s: float = CHECK_DEADLINE_S) -> None:
    """One request as the run's will be (its first prompt's length, salted, a few
    tokens), streamed whole within `deadline_s`, or UserError."""
    from dlbench.measure.openai_stream import FEW_TOKENS, negotiate

    load = case_load(case, ForeignServerLoad)
    assert load.endpoint is not None and load.served_model is not None  # the plan's
    url, api = load.endpoint, load.api
    turn = _check_prompt(case, load.tokenizer, seed)
    body = request_body(api, load.served_model, turn.text, min(FEW_TOKENS, turn.output_tokens))

    async def check() -> Negotiated:
        async with _client(deadline_s) as client:
            return await negotiate(client, url, api, body, deadline_s)

    import asyncio  # as above

    record = asyncio.run(check()).record
    if record.ok:
        return
    hint = f": {CREDENTIALS_HINT}" if record.status in UNAUTHORIZED else ""
    error = redacted(record.error or "")
    deadline = f" ({_deadline_words()})" if error.startswith("no whole answer") else ""
    raise UserError(f"--endpoint {url} --api {api}: a streamed request like the run's "
                    f"({turn.tokens} prompt tokens, {body['max_tokens']} asked) failed: "
                    f"{error}{deadline}{hint}")  # fmt: skip


def _check_prompt(case: Case, tokenizer: str | None, seed: int) -> Turn:
    """The first turn of a conversation as the run makes them, with a salt of its own:
    the run's first prompts find no cache this one warmed (but a shared prefix the
    workload designs, as the run's warm-up warms it)."""
    from dlbench.workloads.requests import LLM_REQUESTS, RequestSet, new_salt, prompt_text

    params = LLM_REQUESTS.resolve_params("cpu", dict(case.params))
    text = prompt_text(tokenizer)
    return RequestSet(params, seed, text, new_salt()).conversation(0, warmup=True).turns[0]


def _client(deadline_s: float) -> httpx.AsyncClient:
    import httpx

    from dlbench.measure.openai_stream import CONNECT_TIMEOUT_S

    timeout = httpx.Timeout(deadline_s, connect=min(CONNECT_TIMEOUT_S, deadline_s))
    return httpx.AsyncClient(timeout=timeout, headers=auth_headers())


def _deadline_words() -> str:
    return f"the check's deadline: the least of {CHECK_DEADLINE_S:g} s and --timeout"
