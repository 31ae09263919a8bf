"""Before an endpoint run is stored: does the server answer, serve the model, stream?

Each is the user's to fix, so each ends in exit 2 with one line, before the run
exists: a URL where nothing accepts a connection within the client's connect
timeout, a server that answers /v1/models with an error, a model it does not
list (or, with none named, a server listing several), and a one-token request
that does not come back as a stream. A case with no --served-model gets the one
the server lists, so the model is in the stored case (and its key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from dlbench.errors import UserError
from dlbench.measure.openai_api import MODELS_PATH, request_body
from dlbench.spec.case import Case
from dlbench.spec.registry import ENDPOINT_FRAMEWORK

# A probe's whole answer; a server that takes longer to list its models or to give
# one token is not fit to be measured
PROBE_TIMEOUT_S = 60.0


def check_endpoints(cases: Sequence[Case]) -> list[Case]:
    """The cases, each endpoint case with its served model named; UserError (exit 2)
    where a server cannot be measured."""
    named: dict[tuple[str, str | None], str] = {}
    streamed: set[tuple[str, str, str]] = set()
    out = []
    for case in cases:
        if case.framework != ENDPOINT_FRAMEWORK or case.endpoint is None:
            out.append(case)
            continue
        key = (case.endpoint, case.served_model)
        if key not in named:
            named[key] = served_model(case.endpoint, case.served_model)
        case = replace(case, served_model=named[key])
        if (case.endpoint, named[key], case.api) not in streamed:
            require_stream(case)
            streamed.add((case.endpoint, named[key], case.api))
        out.append(case)
    return out


def served_model(url: str, given: str | None) -> str:
    """The model a case's requests name: the one given, if the server lists it (or
    lists nothing), else the one it lists."""
    listed = _listed_models(url, required=given is None)
    if given is not None:
        if listed and given not in listed:
            raise UserError(f"--served-model {given}: {url} does not serve it; allowed: "
                            f"{', '.join(listed)}")  # fmt: skip
        return given
    if len(listed) != 1:
        raise UserError(f"{url} serves {len(listed)} models; name one with --served-model: "
                        f"{', '.join(listed)}")  # fmt: skip
    return listed[0]


def _listed_models(url: str, required: bool) -> list[str]:
    import httpx

    from dlbench.measure.openai_stream import CONNECT_TIMEOUT_S

    try:
        reply = httpx.get(
            url + MODELS_PATH, timeout=httpx.Timeout(PROBE_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        )
    except httpx.TimeoutException as exc:
        raise UserError(f"--endpoint {url}: no answer within the timeout "
                        f"({type(exc).__name__})") from None  # fmt: skip
    except httpx.HTTPError as exc:
        raise UserError(f"--endpoint {url}: cannot connect ({type(exc).__name__}: "
                        f"{str(exc)[:120]})") from None  # fmt: skip
    if reply.status_code != 200:
        if not required:
            return []  # a server without the list: the name given is taken as it is
        raise UserError(f"--endpoint {url}: GET {MODELS_PATH} answered HTTP {reply.status_code}"
                        "; name the model with --served-model")  # fmt: skip
    return _model_ids(url, reply)


def _model_ids(url: str, reply: Any) -> list[str]:
    try:
        entries = reply.json().get("data") or []
        return [str(entry["id"]) for entry in entries]
    except (ValueError, AttributeError, KeyError, TypeError):
        raise UserError(f"--endpoint {url}: {MODELS_PATH} is not an OpenAI model list "
                        "(not an OpenAI-compatible server?)") from None  # fmt: skip


def require_stream(case: Case) -> None:
    """One request of one token, streamed as the run's will be, or UserError."""
    import httpx

    from dlbench.measure.openai_stream import CONNECT_TIMEOUT_S, stream_request

    assert case.endpoint is not None and case.served_model is not None
    url, api = case.endpoint, case.api
    body = request_body(api, case.served_model, "Hello", 1)

    async def probe() -> Any:
        timeout = httpx.Timeout(PROBE_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        async with httpx.AsyncClient(timeout=timeout) as client:
            return await stream_request(client, url, api, body)

    record = asyncio.run(probe())
    if not record.ok:
        raise UserError(f"--endpoint {url} --api {api}: a one-token streamed request failed: "
                        f"{record.error}")  # fmt: skip
