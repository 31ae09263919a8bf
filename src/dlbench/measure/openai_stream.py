"""One streamed request to an OpenAI-compatible server, timed as its chunks arrive.

A request goes to `/v1/completions` or `/v1/chat/completions` with `stream: true`;
the server answers with server-sent events, one `data: {json}` line per chunk and
`data: [DONE]` at the end. The clock is read when each chunk carrying output (text,
token ids or log-probabilities: measure.openai_api.ChunkOutput) has been received
and parsed, the moment a streaming client has it: the first such chunk is the first
token, the gaps between chunks the inter-token latencies (a chunk may carry more
than one token where the server batches them, as every peer client counts it). A
role-only or usage-only chunk starts no clock. The token counts are the server's
own: its token ids where it sends them (asked for where `negotiate` found it answers
them), its `usage` (asked for with `stream_options.include_usage`), or left for the
caller to count with the model's tokenizer.

Nothing fails silently, and nothing a server sends ends more than its request: a
refused connection, an HTTP error status, a timeout, a stream cut short or a chunk
that is not one (not JSON, invalid UTF-8, not an object, no choices, a field of the
wrong type) ends the request with its `error` set, counted by kind, and the times it
reached.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx

from dlbench.measure.openai_api import (
    PATHS,
    TOKEN_ID_FIELDS,
    MalformedChunk,
    error_summary,
    read_chunk,
)
from dlbench.untyped import JSONObject

DONE = b"[DONE]"
# A server that does not accept a connection within this is down, not slow
CONNECT_TIMEOUT_S = 10.0
# What went wrong with a request, counted apart: the server refused or dropped the
# connection, a read, connect or the request's deadline timed out, it answered an
# HTTP error, its stream was not one or broke off, a chunk was not one, or the client
# could not read the answer.
CONNECTION, TIMEOUT, HTTP, STREAM, MALFORMED, CLIENT = (
    "connection", "timeout", "http", "stream", "malformed", "client",
)  # fmt: skip
ERROR_KINDS = (CONNECTION, TIMEOUT, HTTP, STREAM, MALFORMED, CLIENT)
# Tokens a first request asks for (the check before a run, the worker's negotiation):
# a first token and the gaps after it
FEW_TOKENS = 4
# HTTP statuses that say the request's body was refused (a field the server does not
# take): negotiate then asks again without the token-id fields
REFUSED_BODY = (400, 422)

# A deadline for a whole block of awaits: asyncio.timeout from Python 3.11, and on 3.10
# (which the project admits) the aio-libs backport it was taken from
if sys.version_info >= (3, 11):
    from asyncio import timeout as deadline
else:
    from async_timeout import timeout as deadline
# What a passed deadline raises: TimeoutError, which asyncio's is from Python 3.11; on
# 3.10 async-timeout and asyncio.wait_for raise asyncio.TimeoutError, a class apart
DEADLINE_PASSED: tuple[type[Exception], ...] = (TimeoutError, asyncio.TimeoutError)


@dataclass
class StreamedRequest:
    """What one request did, on time.perf_counter's clock.

    Not frozen, unlike the records built from it: the client fills it chunk by chunk
    as its stream arrives (a copy per chunk would cost the client's hot path), and a
    conversation's turns get their due times once it has ended (worker.endpoint_load)."""

    sent_s: float
    chunk_times_s: list[float] = field(default_factory=list)  # chunks that carried output
    # the output text's pieces, chunk by chunk (joined when read: appending to one string
    # would copy it at every chunk)
    pieces: list[str] = field(default_factory=list)
    token_ids: int | None = None  # ids the server sent (None: it sent none)
    # the ids themselves, in order (a served engine's are held to the reference's tokens)
    output_ids: list[int] | None = None
    prompt_tokens: int | None = None  # the server's usage report, where it sent one
    output_tokens: int | None = None
    finish_reason: str | None = None
    done_s: float | None = None
    error: str | None = None  # None: the stream ended with [DONE]
    error_kind: str | None = None  # one of ERROR_KINDS, beside the words
    max_tokens: int | None = None  # as asked
    status: int | None = None  # the HTTP status it was answered with
    id_fields: list[str] = field(default_factory=list)  # TOKEN_ID_FIELDS it answered
    # when it was due (an open loop's schedule, or the turn before it ending): None
    # where nothing scheduled it (a closed loop's user sends when ready)
    due_s: float | None = None

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def ran_to_length(self) -> bool:
        """The server says it stopped at max_tokens: it gave exactly that many."""
        return self.finish_reason == "length" and self.max_tokens is not None

    def fail(self, kind: str, error: str) -> None:
        self.error_kind, self.error = kind, error

    @property
    def ok(self) -> bool:
        return self.error is None


async def stream_request(client: httpx.AsyncClient, base_url: str, api: str,
                         body: JSONObject,
                         deadline_s: float | None = None) -> StreamedRequest:  # fmt: skip
    """Send one streaming request and read its chunks to the end (or to its error);
    `deadline_s` bounds the whole answer, however slowly its bytes come."""
    record = StreamedRequest(sent_s=time.perf_counter(), max_tokens=body.get("max_tokens"))
    id_fields = [name for name in TOKEN_ID_FIELDS if body.get(name)]
    try:
        async with deadline(deadline_s):
            await _exchange(client, base_url.rstrip("/") + PATHS[api], api, body, id_fields,
                            record)  # fmt: skip
    except DEADLINE_PASSED:
        record.fail(TIMEOUT, f"no whole answer within {deadline_s:g} s")
    except httpx.TimeoutException as exc:
        record.fail(TIMEOUT, f"timeout ({type(exc).__name__})")
    except httpx.TransportError as exc:
        record.fail(CONNECTION, f"connection: {type(exc).__name__}: {exc}")
    except httpx.HTTPError as exc:  # a body it cannot decode, redirects without end
        record.fail(CLIENT, f"client: {type(exc).__name__}: {exc}")
    finally:
        record.done_s = time.perf_counter()
    return record


async def _exchange(client: httpx.AsyncClient, url: str, api: str, body: JSONObject,
                    id_fields: list[str], record: StreamedRequest) -> None:  # fmt: skip
    async with client.stream("POST", url, json=body) as reply:
        record.status = reply.status_code
        if reply.status_code != 200:
            answer = await reply.aread()
            detail = error_summary(answer, reply.headers.get("content-type", ""))
            record.fail(HTTP, f"HTTP {reply.status_code}: {detail}")
            return
        await _read_events(api, reply, id_fields, record)


async def _read_events(api: str, reply: httpx.Response, id_fields: list[str],
                       record: StreamedRequest) -> None:  # fmt: skip
    if not reply.headers.get("content-type", "").startswith("text/event-stream"):
        record.fail(STREAM, f"not a stream: content-type {reply.headers.get('content-type')!r}")
        return
    async for data in _data_lines(reply):
        if data == DONE:
            if not record.chunk_times_s:
                record.fail(STREAM, "the stream ended with no output (no text and no token)")
            return
        problem = _take_chunk(api, data, id_fields, record)
        if problem is not None:
            record.fail(*problem)
            return
    record.fail(STREAM, "the stream ended without [DONE]")


async def _data_lines(reply: httpx.Response) -> AsyncIterator[bytes]:
    """The `data:` fields of the stream's lines, as bytes: a chunk is decoded as UTF-8
    strictly when it is parsed (httpx's text lines would replace a bad byte quietly).
    Lines end in CRLF, LF or CR, as server-sent events allow."""
    pending = b""
    async for block in reply.aiter_bytes():
        lines = (pending + block).replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        pending = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):  # comments, event names, keep-alives: skipped
                yield line[5:].strip()
    if pending.startswith(b"data:"):
        yield pending[5:].strip()


def _take_chunk(api: str, data: bytes, id_fields: list[str],
                record: StreamedRequest) -> tuple[str, str] | None:  # fmt: skip
    """Take one chunk into the record; or the error kind and words of one that is not a
    chunk, or that reports the server's error."""
    try:
        text = data.decode()  # strict UTF-8 (json.loads of bytes takes twice as long)
    except UnicodeDecodeError:
        return MALFORMED, f"a chunk that is not UTF-8: {data[:80]!r}"
    try:
        chunk = json.loads(text)
    except ValueError:
        return MALFORMED, f"a chunk that is not JSON: {data[:80]!r}"
    if isinstance(chunk, dict) and "error" in chunk:
        return HTTP, f"server error in the stream: {str(chunk['error'])[:200]}"
    try:
        output = read_chunk(api, chunk, id_fields)
    except MalformedChunk as exc:
        return MALFORMED, str(exc)
    if output.carries_output:
        record.chunk_times_s.append(time.perf_counter())
        record.pieces.append(output.text)
    if output.token_ids is not None:
        record.token_ids = (record.token_ids or 0) + output.token_ids
        if record.output_ids is None:
            record.output_ids = []
        record.output_ids += output.ids  # in place: no copy per chunk
        record.id_fields.extend(f for f in output.id_fields if f not in record.id_fields)
    record.finish_reason = output.finish_reason or record.finish_reason
    if output.prompt_tokens is not None:
        record.prompt_tokens = output.prompt_tokens
    if output.completion_tokens is not None:
        record.output_tokens = output.completion_tokens
    return None


@dataclass(frozen=True)
class Negotiated:
    """A first request's answer, and the token-id field the run asks for (None: the
    server answered none, or refused the fields)."""

    record: StreamedRequest
    token_ids_field: str | None


async def negotiate(client: httpx.AsyncClient, base_url: str, api: str, body: JSONObject,
                    deadline_s: float | None = None) -> Negotiated:  # fmt: skip
    """Send `body` asking for token ids in every way TOKEN_ID_FIELDS knows, and find out
    from the answer which way this server answers (by what it sends, not its name). A
    server that refuses the body (HTTP 400 or 422) is asked again without them."""
    asking = {**body, **dict.fromkeys(TOKEN_ID_FIELDS, True)}
    record = await stream_request(client, base_url, api, asking, deadline_s)
    if record.status in REFUSED_BODY:
        plain = await stream_request(client, base_url, api, body, deadline_s)
        return Negotiated(plain, None)
    answered = record.id_fields[0] if record.ok and record.id_fields else None
    return Negotiated(record, answered)
