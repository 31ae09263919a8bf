"""One streamed request to an OpenAI-compatible server, timed as its chunks arrive.

A request goes to `/v1/completions` or `/v1/chat/completions` with `stream: true`;
the server answers with server-sent events, one `data: {json}` line per chunk and
`data: [DONE]` at the end. The clock is read when each chunk carrying output text
has been received and parsed, the moment a streaming client has it: the first such
chunk is the first token, the gaps between chunks the inter-token latencies (a
chunk may carry more than one token where the server batches them, as every peer
client counts it). The token counts are the server's own (`usage`, asked for with
`stream_options.include_usage`), or left for the caller to count with the model's
tokenizer where the server sends none.

Nothing fails silently: a refused connection, an HTTP error status, a timeout or a
stream cut short ends the request with its `error` set and the times it reached,
and the load generator counts it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from dlbench.measure.openai_api import PATHS, chunk_text

DONE = "[DONE]"
# A server that does not accept a connection within this is down, not slow
CONNECT_TIMEOUT_S = 10.0
# What went wrong with a request, counted apart: the server refused or dropped the
# connection, a read or connect timed out, it answered an HTTP error, its stream was
# not one or broke off, or the client could not read the answer.
CONNECTION, TIMEOUT, HTTP, STREAM, CLIENT = "connection", "timeout", "http", "stream", "client"
ERROR_KINDS = (CONNECTION, TIMEOUT, HTTP, STREAM, CLIENT)


@dataclass
class StreamedRequest:
    """What one request did, on time.perf_counter's clock."""

    sent_s: float
    chunk_times_s: list[float] = field(default_factory=list)  # chunks that carried text
    text: str = ""
    prompt_tokens: int | None = None  # the server's usage report, where it sent one
    output_tokens: int | None = None
    finish_reason: str | None = None
    done_s: float | None = None
    error: str | None = None  # None: the stream ended with [DONE]
    error_kind: str | None = None  # one of ERROR_KINDS, beside the words
    max_tokens: int | None = None  # as asked

    @property
    def ran_to_length(self) -> bool:
        """The server says it stopped at max_tokens: it gave exactly that many."""
        return self.finish_reason == "length" and self.max_tokens is not None

    def fail(self, kind: str, error: str) -> None:
        self.error_kind, self.error = kind, error

    @property
    def ok(self) -> bool:
        return self.error is None


def _take_chunk(api: str, chunk: dict[str, Any], record: StreamedRequest) -> None:
    text = chunk_text(api, chunk)
    if text:
        record.chunk_times_s.append(time.perf_counter())
        record.text += text
    for choice in chunk.get("choices") or ():
        record.finish_reason = choice.get("finish_reason") or record.finish_reason
    usage = chunk.get("usage")
    if usage:
        record.prompt_tokens = usage.get("prompt_tokens", record.prompt_tokens)
        record.output_tokens = usage.get("completion_tokens", record.output_tokens)


async def stream_request(
    client: httpx.AsyncClient, base_url: str, api: str, body: dict[str, Any]
) -> StreamedRequest:
    """Send one streaming request and read its chunks to the end (or to its error)."""
    record = StreamedRequest(sent_s=time.perf_counter(), max_tokens=body.get("max_tokens"))
    try:
        async with client.stream("POST", base_url.rstrip("/") + PATHS[api], json=body) as reply:
            if reply.status_code != 200:
                detail = (await reply.aread()).decode("utf-8", "replace")[:200]
                record.fail(HTTP, f"HTTP {reply.status_code}: {detail}")
                return record
            await _read_events(api, reply, record)
    except httpx.TimeoutException as exc:
        record.fail(TIMEOUT, f"timeout ({type(exc).__name__})")
    except httpx.TransportError as exc:
        record.fail(CONNECTION, f"connection: {type(exc).__name__}: {exc}")
    except httpx.HTTPError as exc:  # a body it cannot decode, redirects without end
        record.fail(CLIENT, f"client: {type(exc).__name__}: {exc}")
    finally:
        record.done_s = time.perf_counter()
    return record


async def _read_events(api: str, reply: httpx.Response, record: StreamedRequest) -> None:
    if not reply.headers.get("content-type", "").startswith("text/event-stream"):
        record.fail(STREAM, f"not a stream: content-type {reply.headers.get('content-type')!r}")
        return
    async for line in reply.aiter_lines():
        if not line.startswith("data:"):
            continue  # comments, event names, keep-alives
        data = line[len("data:") :].strip()
        if data == DONE:
            if not record.chunk_times_s:
                record.fail(STREAM, "the stream ended with no output text")
            return
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            record.fail(STREAM, f"a chunk that is not JSON: {data[:80]!r}")
            return
        if "error" in chunk:
            record.fail(HTTP, f"server error in the stream: {str(chunk['error'])[:200]}")
            return
        _take_chunk(api, chunk, record)
    record.fail(STREAM, "the stream ended without [DONE]")
