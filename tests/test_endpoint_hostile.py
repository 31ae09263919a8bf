"""The endpoint client against servers that misbehave on purpose (written here: the
point is the misbehaviour): a stream without end, a byte every 2 s, malformed
chunks, a role-only first chunk, tokens of empty text that carry their ids, and a
server that refuses fields it does not know. Nothing a server sends may hang the
check, end a case or lose its measurements."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import cli, dlbench

from dlbench.measure.openai_api import CHAT, COMPLETIONS, request_body
from dlbench.measure.openai_stream import MALFORMED, TIMEOUT, negotiate, stream_request
from dlbench.workloads.requests import LLM_REQUESTS, RequestSet, WordText

MODEL = "hostile"
# What a malformed chunk can be; the server sends them in turn
MALFORMED_CHUNKS = (b"42", b"[1, 2]", b'{"choices": [{"text": "\xff"}]}', b'{"id": "x"}')
MALFORMED_WORDS = ("not a JSON object: 42", "not a JSON object: [1, 2]", "not UTF-8",
                   "without choices")  # fmt: skip


class Hostile(http.server.BaseHTTPRequestHandler):
    """Lists one model and streams each POST as its path's first part says:
    /endless/, /trickle/ (a byte every 0.5 s), /ids/ (tokens of empty text, with their
    ids where asked), /malformed/ (as /ids/, but every third answer after the first two
    has a malformed chunk after its first token), /role/ (chat: a role-only chunk, then
    text 0.2 s later), /strict/ (HTTP 400 for a field it does not know)."""

    server: HostileServer

    def do_GET(self) -> None:
        self._send(200, "application/json", json.dumps({"data": [{"id": MODEL}]}).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        count = next(self.server.counter)
        self.server.bodies.append(body)
        mode = self.path.split("/")[1]
        if mode == "strict" and "return_token_ids" in body:
            self._send(400, "application/json", b'{"error": "unknown field return_token_ids"}')
            return
        self._send(200, "text/event-stream", b"")
        with contextlib.suppress(OSError):  # the client hung up (a deadline, a cancel)
            getattr(self, f"_{mode}", self._normal)(body, count)

    def _send(self, status: int, kind: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if data:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _event(self, data: bytes) -> None:
        self.wfile.write(b"data: " + data + b"\n\n")
        self.wfile.flush()

    def _normal(self, body: dict, count: int) -> None:
        for index in range(body["max_tokens"]):
            last = index == body["max_tokens"] - 1
            self._event(json.dumps({"choices": [{"text": "word ", "index": 0,
                                                 "finish_reason": "length" if last else None}]})
                        .encode())  # fmt: skip
        self._event(b"[DONE]")

    def _endless(self, body: dict, count: int) -> None:
        while True:
            self._event(b'{"choices": [{"text": "more ", "index": 0}]}')
            time.sleep(0.01)

    def _trickle(self, body: dict, count: int) -> None:
        for byte in b'data: {"choices": [{"text": "slow", "index": 0}]}\n\ndata: [DONE]\n\n':
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(0.5)

    def _malformed(self, body: dict, count: int) -> None:
        if count < 2 or count % 3:
            self._ids(body, count)
            return
        self._event(b'{"choices": [{"text": "", "index": 0, "token_ids": [7]}]}')
        self._event(MALFORMED_CHUNKS[self.server.malformed % len(MALFORMED_CHUNKS)])
        self.server.malformed += 1
        self._ids(body, count)

    def _role(self, body: dict, count: int) -> None:
        self._event(b'{"choices": [{"delta": {"role": "assistant"}, "index": 0}]}')
        time.sleep(0.2)
        for _ in range(body["max_tokens"]):
            self._event(b'{"choices": [{"delta": {"content": "hi "}, "index": 0}]}')
        self._event(b"[DONE]")

    def _ids(self, body: dict, count: int) -> None:
        for index in range(body["max_tokens"]):
            choice = {"text": "", "index": 0}
            if body.get("return_token_ids"):
                choice["token_ids"] = [100 + index]
            self._event(json.dumps({"choices": [choice]}).encode())
        self._event(b"[DONE]")

    def log_message(self, *args: object) -> None:
        return


class HostileServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Hostile)
        self.counter = itertools.count()
        self.bodies: list[dict] = []
        self.malformed = 0

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{mode}"


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()


def send(url: str, api: str = COMPLETIONS, osl: int = 4, deadline_s: float | None = None,
         token_ids_field: str | None = None):  # fmt: skip
    async def go():
        async with httpx.AsyncClient(timeout=30) as client:
            body = request_body(api, MODEL, "a prompt", osl, token_ids_field)
            return await stream_request(client, url, api, body, deadline_s)

    return asyncio.run(go())


def test_each_malformed_chunk_is_its_requests_error_by_kind(hostile):
    for words in MALFORMED_WORDS:
        hostile.counter = itertools.count(3)  # the server's next answer is malformed
        record = send(hostile.url("malformed"), token_ids_field="return_token_ids")
        assert not record.ok and record.error_kind == MALFORMED, record.error
        assert words in record.error
        assert len(record.chunk_times_s) == 1 and record.output_ids == [7]  # as far as it got


def test_a_role_only_first_chunk_is_no_token_and_starts_no_clock(hostile):
    record = send(hostile.url("role"), api=CHAT, osl=3)
    assert record.ok, record.error
    assert len(record.chunk_times_s) == 3 and record.text == "hi hi hi "
    assert record.chunk_times_s[0] - record.sent_s >= 0.2  # TTFT: the first text, not the role


def test_tokens_of_empty_text_are_tokens_by_their_ids_and_a_server_is_asked_as_it_answers(
    hostile,
):
    # asked for ids, it sends them: every chunk is a token on time, though none has text
    record = send(hostile.url("ids"), osl=5, token_ids_field="return_token_ids")
    assert record.ok and record.text == "" and record.token_ids == 5
    assert len(record.chunk_times_s) == 5
    # not asked, the same server's chunks carry nothing: no output, an error, not a zero
    bare = send(hostile.url("ids"), osl=5)
    assert not bare.ok and "no output" in bare.error and bare.token_ids is None

    async def negotiated(mode: str):
        async with httpx.AsyncClient(timeout=30) as client:
            body = request_body(COMPLETIONS, MODEL, "a prompt", 2)
            return await negotiate(client, hostile.url(mode), COMPLETIONS, body)

    # the server's answer says which field it answers (here vLLM's, not llama.cpp's)
    assert asyncio.run(negotiated("ids")).token_ids_field == "return_token_ids"
    assert asyncio.run(negotiated("normal")).token_ids_field is None  # ignores both
    strict = asyncio.run(negotiated("strict"))  # refuses them: asked again without
    assert strict.record.ok and strict.token_ids_field is None
    assert "return_token_ids" not in hostile.bodies[-1]


# a deadline above the trickle's gap between bytes: no read timeout of that length fires
@pytest.mark.parametrize("mode", ["endless", "trickle"])
def test_the_check_before_a_run_has_a_deadline_for_the_whole_answer(hostile, mode, tmp_path):
    deadline = 1
    started = time.monotonic()
    proc = cli("run", "--endpoint", hostile.url(mode), "--timeout", str(deadline),
               "--db", str(tmp_path / "store.sqlite"))  # fmt: skip
    took = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"no whole answer within {deadline} s" in lines[0], proc.stderr
    assert "the least of 120 s and --timeout" in lines[0]
    assert deadline <= took < deadline + 5
    assert not (tmp_path / "store.sqlite").exists()
    # the check sent what the run sends: the case's prompt length, a few tokens
    checked = hostile.bodies[0]
    assert len(checked["prompt"].split()) == 128 and checked["max_tokens"] == 4
    # the client's own deadline, as the check uses it: a timeout, by kind
    assert send(hostile.url(mode), deadline_s=0.5).error_kind == TIMEOUT


@pytest.mark.integration
def test_a_run_keeps_its_measurements_through_malformed_chunks_and_counts_tokens_by_id(
    hostile, tmp_path
):
    """Every third answer has a malformed chunk (the case goes on, each counted by
    kind), and the tokens have no text (counted by their ids, which the check found
    this server sends). One user: the server gives the kinds in turn as answers
    arrive, and the run keeps the first errors in its conversations' order, which two
    users' answers need not follow (once a kind fell past the first five)."""
    out = tmp_path / "run.json"
    proc = dlbench("run", "--endpoint", hostile.url("malformed"), "--param", "isl=8",
                   "--param", "osl=4", "--concurrency", "1", "--min-time", "0",
                   "--min-iters", "24", "--warmup", "0", "--json", str(out), "-q")  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    result = json.loads(out.read_text())["results"][0]
    load = result["details"]["endpoint"]
    assert result["status"] == "ok" and "request-errors" in result["flags"]
    assert load["errors"] == {"malformed": hostile.malformed} and hostile.malformed >= 7
    assert load["ok"] == load["requests"] - hostile.malformed and load["requests"] >= 24
    assert {w for w in MALFORMED_WORDS if any(w in e for e in load["first_errors"])} == set(
        MALFORMED_WORDS
    )
    assert result["details"]["generation"]["generations"] == load["ok"]
    assert result["details"]["generation"]["tpot_p50_ms"] > 0
    # tokens of empty text, counted by their ids: the run asked as the server answers
    assert load["tokens_counted_by"] == "token ids" and load["output_tokens_mean"] == 4
    assert load["token_ids_field"] == "return_token_ids"
    # what fixed each answer's length is kept: min_tokens costs a server work
    assert load["length_fields"] == ["max_tokens", "min_tokens", "ignore_eos"]
    assert all(body.get("return_token_ids") for body in hostile.bodies[2:])  # the run's
    # the salt this run drew is recorded, and its prompts are the seed's salted by it
    params = LLM_REQUESTS.resolve_params("cpu", {"isl": 8, "osl": 4})
    salted, plain = (RequestSet(params, 0, WordText(), salt) for salt in (load["salt"], None))
    sent = [json.loads(x) for x in Path(load["dataset_file"]).read_text().splitlines()]
    assert [line["turns"][0]["text"] for line in sent] == [
        salted.conversation(i).turns[0].text for i in range(len(sent))
    ]
    assert all(salted.conversation(i) != plain.conversation(i) for i in range(len(sent)))


def test_a_failed_answers_body_is_one_readable_line():
    from dlbench.measure.openai_api import error_summary

    page = b'<!DOCTYPE HTML>\n<html>\n<head><title>Error response</title></head>\n<body>\n' \
        b"<h1>Error response</h1>\n<p>Error code: 501</p>\n</body></html>"  # fmt: skip
    assert error_summary(page, "text/html") == "an HTML page: Error response; Error code: 501"
    api = json.dumps({"error": {"message": "model 'x' not found", "code": 404}}).encode()
    assert error_summary(api, "application/json") == "model 'x' not found"
    assert error_summary(b"  plain\n  words  ") == "plain words"
    assert len(error_summary(b"x" * 5000)) == 200


def test_a_plain_web_server_as_an_endpoint_is_named_so_in_one_line(tmp_path):
    """Python's own HTTP server, no OpenAI API: the model list's 404 says so, and with
    --served-model its 501 page is summed up, not dumped with literal newlines."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return None  # its access log would share stderr with the command's

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        listed = cli("run", "--endpoint", url, "--dry-run")
        assert listed.returncode == 2 and listed.stderr.count("\n") == 1
        assert "no OpenAI-compatible API lists its models at this URL" in listed.stderr
        named = cli("run", "--endpoint", url, "--served-model", "x", "--dry-run")
        assert named.returncode == 2 and named.stderr.count("\n") == 1
        assert "HTTP 501: an HTML page: Error response" in named.stderr
        assert "<html" not in named.stderr.lower() and "\\n" not in named.stderr
    finally:
        server.shutdown()
