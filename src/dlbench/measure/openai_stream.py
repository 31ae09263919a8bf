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

COMPLETIONS, CHAT = "completions", "chat"
PATHS = {COMPLETIONS: "/v1/completions", CHAT: "/v1/chat/completions"}
DONE = "[DONE]"


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

    @property
    def ok(self) -> bool:
        return self.error is None


def request_body(api: str, model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    """Greedy, exactly `max_tokens` tokens where the server honours min_tokens and
    ignore_eos (vLLM, SGLang, llama.cpp's servers), usage in the stream."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if api == CHAT:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def chunk_text(api: str, chunk: dict[str, Any]) -> str:
    """The output text a chunk carries ('' for a usage-only or role-only chunk)."""
    parts = []
    for choice in chunk.get("choices") or ():
        if api == CHAT:
            parts.append((choice.get("delta") or {}).get("content") or "")
        else:
            parts.append(choice.get("text") or "")
    return "".join(parts)


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
    record = StreamedRequest(sent_s=time.perf_counter())
    try:
        async with client.stream("POST", base_url.rstrip("/") + PATHS[api], json=body) as reply:
            if reply.status_code != 200:
                detail = (await reply.aread()).decode("utf-8", "replace")[:200]
                record.error = f"HTTP {reply.status_code}: {detail}"
                return record
            await _read_events(api, reply, record)
    except httpx.TimeoutException as exc:
        record.error = f"timeout ({type(exc).__name__})"
    except httpx.TransportError as exc:
        record.error = f"connection: {type(exc).__name__}: {exc}"
    except httpx.HTTPError as exc:  # a body it cannot decode, redirects without end
        record.error = f"client: {type(exc).__name__}: {exc}"
    finally:
        record.done_s = time.perf_counter()
    return record


async def _read_events(api: str, reply: httpx.Response, record: StreamedRequest) -> None:
    if not reply.headers.get("content-type", "").startswith("text/event-stream"):
        record.error = f"not a stream: content-type {reply.headers.get('content-type')!r}"
        return
    async for line in reply.aiter_lines():
        if not line.startswith("data:"):
            continue  # comments, event names, keep-alives
        data = line[len("data:") :].strip()
        if data == DONE:
            if not record.chunk_times_s:
                record.error = "the stream ended with no output text"
            return
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            record.error = f"a chunk that is not JSON: {data[:80]!r}"
            return
        if "error" in chunk:
            record.error = f"server error in the stream: {str(chunk['error'])[:200]}"
            return
        _take_chunk(api, chunk, record)
    record.error = "the stream ended without [DONE]"
