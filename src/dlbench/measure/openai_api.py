"""The OpenAI-compatible API's shapes: its two streaming endpoints, the request body
dlbench sends, and the text a streamed chunk carries.

Plain data and functions, no HTTP client: the parent checks a case's `--api`
against these names without importing one (measure.openai_stream sends them).
"""

from __future__ import annotations

from typing import Any

COMPLETIONS, CHAT = "completions", "chat"
PATHS = {COMPLETIONS: "/v1/completions", CHAT: "/v1/chat/completions"}
APIS = tuple(PATHS)
MODELS_PATH = "/v1/models"

Message = dict[str, str]


def request_body(api: str, model: str, prompt: str | list[Message],
                 max_tokens: int) -> dict[str, Any]:  # fmt: skip
    """Greedy, exactly `max_tokens` tokens where the server honours min_tokens and
    ignore_eos (vLLM, SGLang, llama.cpp's servers), usage in the stream. `prompt`:
    the text, or for chat the conversation's messages so far."""
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


def chunk_text(api: str, chunk: dict[str, Any]) -> str:
    """The output text a chunk carries ('' for a usage-only or role-only chunk)."""
    parts = []
    for choice in chunk.get("choices") or ():
        if api == CHAT:
            parts.append((choice.get("delta") or {}).get("content") or "")
        else:
            parts.append(choice.get("text") or "")
    return "".join(parts)
