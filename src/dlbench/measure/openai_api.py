"""The OpenAI-compatible API's shapes: its two streaming endpoints, the request body
dlbench sends, and what a streamed chunk carries.

Plain data and functions, no HTTP client: the parent checks a case's `--api`
against these names without importing one (measure.openai_stream sends them).

A chunk carries output when it has text, token ids or log-probabilities: a server
streams a token whose text is empty (a special token, or a byte that does not yet
complete a UTF-8 character) as a chunk with no text, and that chunk is still a
token on time. A role-only or usage-only chunk carries none.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from dlbench.untyped import JSONObject

COMPLETIONS, CHAT = "completions", "chat"
PATHS = {COMPLETIONS: "/v1/completions", CHAT: "/v1/chat/completions"}
APIS = tuple(PATHS)
MODELS_PATH = "/v1/models"
# The request fields that ask a server for each streamed token's id, and where its
# answer puts them: vLLM's in each choice, llama.cpp's server's in the chunk (its own
# /completion shape). Asked only where the server has shown that it answers them
# (measure.openai_stream.negotiate): a strict server refuses fields it does not know,
# and a field nobody asked for may mean something else.
IN_CHOICE, IN_CHUNK = "choice", "chunk"
TOKEN_ID_FIELDS = {"return_token_ids": (IN_CHOICE, "token_ids"),
                   "return_tokens": (IN_CHUNK, "tokens")}  # fmt: skip

Message = dict[str, str]


class MalformedChunk(ValueError):
    """A streamed chunk that is not what the API defines (its words say what it is)."""


class ChunkOutput(NamedTuple):
    """What one chunk carries (a named tuple: one is made per token, on the clock's
    path)."""

    text: str = ""
    token_ids: int | None = None  # ids it carries in the fields asked (None: none sent)
    logprob_tokens: int = 0  # tokens its log-probabilities name
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # the server's usage report, where this chunk has it
    completion_tokens: int | None = None
    id_fields: tuple[str, ...] = ()  # the TOKEN_ID_FIELDS whose answers it holds
    ids: tuple[int, ...] = ()  # the ids themselves, in order

    @property
    def carries_output(self) -> bool:
        return bool(self.text) or bool(self.token_ids) or self.logprob_tokens > 0


# The request fields that fix an answer's length, as a result records those it sent:
# min_tokens costs vLLM 2-4% of its decode rate (docs/validation.md)
LENGTH_FIELDS = ("max_tokens", "max_completion_tokens", "min_tokens", "ignore_eos")


def length_fields(body: JSONObject) -> list[str]:
    """The LENGTH_FIELDS `body` holds."""
    return [name for name in LENGTH_FIELDS if name in body]


def request_body(api: str, model: str, prompt: str | list[Message], max_tokens: int,
                 token_ids_field: str | None = None) -> JSONObject:  # fmt: skip
    """Greedy, exactly `max_tokens` tokens where the server honours min_tokens and
    ignore_eos (vLLM, SGLang, llama.cpp's servers), usage in the stream, and each
    token's id where `token_ids_field` (of TOKEN_ID_FIELDS) asks for it. `prompt`: the
    text, or for chat the conversation's messages so far."""
    body: JSONObject = {
        "model": model,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if token_ids_field is not None:
        body[token_ids_field] = True
    if api == CHAT:
        # max_tokens is deprecated for chat in OpenAI's API, which reads this one
        body["max_completion_tokens"] = max_tokens
        body["messages"] = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        )
    else:
        body["prompt"] = (
            prompt
            if isinstance(prompt, str)
            else "\n".join(message["content"] for message in prompt)
        )
    return body


def read_chunk(api: str, chunk: object, id_fields: Collection[str] = ()) -> ChunkOutput:
    """What a parsed chunk carries (token ids read where `id_fields` asked for them),
    or MalformedChunk: not a JSON object, neither choices nor usage, or a field of the
    wrong type. A chunk with an `error` is the caller's to see first."""
    if not isinstance(chunk, dict):
        raise MalformedChunk(f"a chunk that is not a JSON object: {_shown(chunk)}")
    choices = chunk.get("choices")
    if choices is None and "usage" not in chunk:
        raise MalformedChunk(f"a chunk without choices: {_shown(chunk)}")
    if not isinstance(choices, _LIST_OR_NONE):
        raise MalformedChunk(f"choices that are not a list: {_shown(choices)}")
    ids = _TokenIds(id_fields, chunk) if id_fields else None
    text, logprobs, finish = "", 0, None
    for choice in choices or ():
        if not isinstance(choice, dict):
            raise MalformedChunk(f"a choice that is not a JSON object: {_shown(choice)}")
        text += _choice_text(api, choice)
        if ids is not None:
            ids.read(choice, IN_CHOICE)
        if choice.get("logprobs") is not None:
            logprobs += _logprob_tokens(choice["logprobs"])
        finish = _text_or_none(choice.get("finish_reason"), "finish_reason") or finish
    prompt, completion = _usage(chunk.get("usage"))
    if ids is None:
        return ChunkOutput(text, None, logprobs, finish, prompt, completion)
    return ChunkOutput(text, ids.count, logprobs, finish, prompt, completion, tuple(ids.answered),
                       tuple(ids.values))  # fmt: skip


_LIST_OR_NONE = (list, type(None))
_TEXT_OR_NONE = (str, type(None))
_DICT_OR_NONE = (dict, type(None))


class _TokenIds:
    """The token ids of one chunk, from the fields asked."""

    def __init__(self, asked: Collection[str], chunk: JSONObject) -> None:
        self.where = [(name, TOKEN_ID_FIELDS[name]) for name in asked]
        self.count: int | None = None
        self.values: list[int] = []
        self.answered: list[str] = []
        self.read(chunk, IN_CHUNK)

    def read(self, holder: JSONObject, level: str) -> None:
        for name, (at, key) in self.where:
            if at != level or holder.get(key) is None:
                continue
            ids = holder[key]
            if not isinstance(ids, list) or not all(type(i) is int for i in ids):
                raise MalformedChunk(f"{key} that are not token ids: {_shown(ids)}")
            self.count = (self.count or 0) + len(ids)
            self.values += ids
            if name not in self.answered:
                self.answered.append(name)


def _choice_text(api: str, choice: JSONObject) -> str:
    if api == CHAT:
        delta = choice.get("delta")
        if not isinstance(delta, _DICT_OR_NONE):
            raise MalformedChunk(f"a delta that is not a JSON object: {_shown(delta)}")
        return _text_or_none((delta or {}).get("content"), "content") or ""
    return _text_or_none(choice.get("text"), "text") or ""


def _text_or_none(value: object, name: str) -> str | None:
    if not isinstance(value, _TEXT_OR_NONE):
        raise MalformedChunk(f"{name} that is not text: {_shown(value)}")
    return value


def _logprob_tokens(logprobs: object) -> int:
    """The tokens log-probabilities name: completions' `tokens`, chat's `content`."""
    if not isinstance(logprobs, dict):
        return 0
    named = logprobs.get("tokens", logprobs.get("content"))
    return len(named) if isinstance(named, list) else 0


def _usage(usage: object) -> tuple[int | None, int | None]:
    if usage is None:
        return None, None
    if not isinstance(usage, dict):
        raise MalformedChunk(f"usage that is not a JSON object: {_shown(usage)}")
    counts = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not all(value is None or type(value) is int for value in counts):
        raise MalformedChunk(f"usage counts that are not integers: {_shown(usage)}")
    return counts


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


# An error's detail in a request's record or a message: one line, this long at most.
ERROR_DETAIL_CHARS = 200


def error_summary(body: bytes, content_type: str = "") -> str:
    """A failed answer's body as one line a person reads: the API's error message where
    it is JSON, an HTML page's title or first heading (a plain web server's 501 page,
    not its markup with literal newlines), else its first text, cut short."""
    import html
    import json
    import re

    text = body.decode("utf-8", "replace").strip()
    if "json" in content_type or text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            found = data.get("error", data.get("detail", data.get("message")))
            if isinstance(found, dict):
                found = found.get("message", found)
            if found is not None:
                text = str(found)
    elif "html" in content_type or text.lower().startswith(("<!doctype html", "<html")):
        heading = re.search(r"<(title|h1)[^>]*>(.*?)</\1>", text, re.I | re.S)
        paragraph = re.search(r"<p[^>]*>(.*?)</p>", text, re.I | re.S)
        parts = [m for m in (heading and heading.group(2), paragraph and paragraph.group(1)) if m]
        text = "; ".join(html.unescape(re.sub(r"<[^>]+>", "", part)) for part in parts)
        text = f"an HTML page: {text}" if text else "an HTML page"
    return " ".join(text.split())[:ERROR_DETAIL_CHARS]
