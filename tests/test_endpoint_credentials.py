"""Credentials for an OpenAI-compatible server (`user:password@` in --endpoint's URL,
--api-key, $OPENAI_API_KEY) are sent and never printed or stored: not in the output,
the run file, the store, the suite name, the exports or the stored command line.
Against llama.cpp's server (llama-cpp-python's), with and without an API key."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from conftest import LLAMA_API_KEY, cli, dlbench, free_port

from dlbench.measure.openai_auth import (
    AUTHORIZATION_ENV,
    basic_authorization,
    redacted,
    without_credentials,
)
from dlbench.results.store_location import redacted_argv

SMALL = ["--param", "isl=8", "--param", "osl=4", "--min-time", "0", "--min-iters", "2",
         "--warmup", "0"]  # fmt: skip


def everything_kept(tmp_path: Path, proc, run_file: Path) -> str:
    """All a run left: what it printed, its files, its store, and its exports."""
    db = tmp_path / "store.sqlite"
    run_id = json.loads(run_file.read_text())["id"]
    exported = [tmp_path / name for name in ("export.json", "export.csv", "bmf.json")]
    for args in (["--json", str(exported[0]), "--csv", str(exported[1])],
                 ["--format", "bmf", "--out", str(exported[2])]):  # fmt: skip
        made = cli("export", run_id, "--db", str(db), *args)
        assert made.returncode == 0, made.stderr
    shown = cli("show", run_id, "--db", str(db))
    files = [run_file, tmp_path / "run.csv", db, *exported]
    return "\n".join([proc.stdout, proc.stderr, shown.stdout, shown.stderr,
                      *(f.read_bytes().decode("utf-8", "replace") for f in files)])  # fmt: skip


@pytest.mark.integration
def test_credentials_in_the_url_are_sent_and_kept_nowhere(tmp_path, llama_server):
    host = llama_server.removeprefix("http://")
    url = f"http://userKQZ:pwXJ7secret@{host}/v1"
    run_file = tmp_path / "run.json"
    proc = dlbench("run", "--endpoint", url, *SMALL, "--db", str(tmp_path / "store.sqlite"),
                   "--json", str(run_file), "--csv", str(tmp_path / "run.csv"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run = json.loads(run_file.read_text())
    assert run["results"][0]["status"] == "ok"
    assert run["suite"] == f"endpoint:{llama_server}"  # where it ran, without them
    assert run["results"][0]["case"]["endpoint"] == llama_server
    assert f"{llama_server}/v1" in run["command"]
    kept = everything_kept(tmp_path, proc, run_file)
    assert "pwXJ7secret" not in kept and "userKQZ" not in kept
    basic = basic_authorization(url)
    assert basic is not None and basic.split()[1] not in kept


@pytest.mark.integration
def test_an_api_key_is_sent_to_a_server_that_wants_one_and_kept_nowhere(
    tmp_path, keyed_llama_server, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # what the in-process command leaves for its workers goes with the test
    monkeypatch.delenv(AUTHORIZATION_ENV, raising=False)
    # without it: one line, saying how to give it
    refused = cli("run", "--endpoint", keyed_llama_server, *SMALL,
                  "--db", str(tmp_path / "refused.sqlite"))  # fmt: skip
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP 401" in lines[0] and "--api-key KEY" in lines[0], lines
    assert not (tmp_path / "refused.sqlite").exists()
    # a wrong key: the same, and the key tried is not repeated
    wrong = cli("run", "--endpoint", keyed_llama_server, "--api-key", "wrongKEY5", "--dry-run")
    assert wrong.returncode == 2 and "HTTP 401" in wrong.stderr
    assert "wrongKEY5" not in wrong.stderr + wrong.stdout
    # $OPENAI_API_KEY, as OpenAI's clients read it: the check passes (no run: --dry-run)
    monkeypatch.setenv("OPENAI_API_KEY", LLAMA_API_KEY)
    checked = cli("run", "--endpoint", keyed_llama_server, *SMALL, "--dry-run")
    assert checked.returncode == 0, checked.stderr
    monkeypatch.delenv("OPENAI_API_KEY")
    # --api-key: the whole run's requests carry it (the worker's too)
    run_file = tmp_path / "run.json"
    proc = dlbench("run", "--endpoint", keyed_llama_server, "--api-key", LLAMA_API_KEY, *SMALL,
                   "--db", str(tmp_path / "store.sqlite"), "--json", str(run_file),
                   "--csv", str(tmp_path / "run.csv"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run = json.loads(run_file.read_text())
    load = run["results"][0]["details"]["endpoint"]
    assert load["ok"] == load["requests"] >= 2 and not load.get("errors")
    assert run["command"][run["command"].index("--api-key") + 1] == "***"
    assert LLAMA_API_KEY not in everything_kept(tmp_path, proc, run_file)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--endpoint", "http://a:b@127.0.0.1:{port}", "--api-key", "k"],
         "two Authorization headers; give one"),
        (["-w", "mlp", "-f", "null", "--api-key", "k"], "give --endpoint URL"),
        (["--endpoint", "http://userQ:pwQ77@host:99999"], "expected a port from 0 to 65535"),
        (["--endpoint", "http://userQ:pwQ77@[::1"], "expected an http:// or https:// URL"),
    ],
)  # fmt: skip
def test_credentials_given_wrong_are_one_line_that_does_not_repeat_them(args, message):
    args = [arg.format(port=free_port()) for arg in args]
    proc = cli("run", *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert "pwQ77" not in lines[0] and "userQ" not in lines[0]


def test_credentials_are_cut_from_urls_command_lines_and_echoed_words():
    assert (
        without_credentials("https://u:p@h.example:8443/v1?x=1") == "https://h.example:8443/v1?x=1"
    )
    assert without_credentials("http://u:p@[::1") == "http://[::1"  # urlsplit refuses it
    assert without_credentials("http://h:1") == "http://h:1"
    header = basic_authorization("http://ana%40corp:p%3Aw@h:1")
    assert header == "Basic " + base64.b64encode(b"ana@corp:p:w").decode()
    argv = ["dlbench", "run", "--endpoint", "http://u:pw1@h:1", "--endpoint=https://u:pw2@h",
            "--api-key", "key3", "--api-k=key4", "--api", "chat",
            "--db", "postgresql://ana:pw5@db/x"]  # fmt: skip
    shown = " ".join(redacted_argv(argv))
    assert not any(secret in shown for secret in ("pw1", "pw2", "key3", "key4", "pw5", "u:")), shown
    assert "--api chat" in shown and "--endpoint http://h:1" in shown
    environ = {AUTHORIZATION_ENV: header}
    assert redacted("echoed ana@corp:p:w and p:w", environ) == "echoed ana@corp:*** and ***"
    bearer = {"OPENAI_API_KEY": "sk-abc"}
    assert redacted("Bearer sk-abc refused", bearer) == "Bearer *** refused"
