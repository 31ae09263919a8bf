"""The credentials a request to an OpenAI-compatible server carries, kept out of
everything dlbench prints or stores.

A server started with an API key (vLLM's and llama.cpp's `--api-key`) wants
`Authorization: Bearer KEY`: `--api-key`, else $OPENAI_API_KEY, as OpenAI's own
clients read it. A gateway may want HTTP Basic credentials, written in the URL
(`http://user:password@host:port`). Either is a secret: the URL a case keeps (its
`endpoint`, the suite's name, the result, the exports) is the one without them, and
the header is handed to the processes that send requests in their environment
(AUTHORIZATION_ENV), which a worker inherits and nothing stores. results.
store_location.redacted_argv cuts both out of the command line stored with a run.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

API_KEY_ENV = "OPENAI_API_KEY"
# The Authorization header's value the parent resolved, for the processes it starts
AUTHORIZATION_ENV = "DLBENCH_ENDPOINT_AUTHORIZATION"
API_KEY_OPTION = "--api-key"
# `scheme://userinfo@`, for a URL urlsplit refuses (a bad port, a bad IPv6 host)
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


def without_credentials(url: str) -> str:
    """The URL without its `user:password@` (the user too: half of a credential);
    everything else as it was written."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.sub(r"\1", url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def basic_authorization(url: str) -> str | None:
    """The HTTP Basic Authorization value the URL's `user:password@` make (None without)."""
    parts = urlsplit(url)
    if parts.username is None:
        return None
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


def bearer_authorization(api_key: str) -> str:
    return f"Bearer {api_key}"


def auth_headers(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The Authorization header requests carry: the one the parent resolved, else the
    $OPENAI_API_KEY of this process's environment, else none."""
    if environ.get(AUTHORIZATION_ENV):
        return {"Authorization": environ[AUTHORIZATION_ENV]}
    if environ.get(API_KEY_ENV):
        return {"Authorization": bearer_authorization(environ[API_KEY_ENV])}
    return {}


def redacted(text: str, environ: Mapping[str, str] = os.environ) -> str:
    """`text` with the secrets a request carries (the API key, the Basic credentials)
    cut out: for words that come from elsewhere (a server's error that echoes them)."""
    for secret in _secrets(environ):
        text = text.replace(secret, "***")
    return text


def _secrets(environ: Mapping[str, str]) -> list[str]:
    header = auth_headers(environ).get("Authorization", "")
    scheme, _, value = header.partition(" ")
    found = [value] if value else []
    if scheme == "Basic" and value:
        pair = base64.b64decode(value).decode("utf-8", "replace")
        found += [part for part in pair.split(":", 1)[1:] if part]
    return found
