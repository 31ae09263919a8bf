"""Where the store is: an SQLite file (the embedded default) or a PostgreSQL URL.

`--db` and $DLBENCH_DB take either. A URL's credentials (its password, in the
URL or its query) go to libpq and nowhere else: what dlbench prints or stores
is `without_password(url)`, and libpq reads the password from $PGPASSWORD or
~/.pgpass when the URL has none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from dlbench.measure.openai_auth import API_KEY_OPTION, without_credentials

DB_ENV_VAR = "DLBENCH_DB"
POSTGRES_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class PostgresUrl:
    """A PostgreSQL connection URL; printed (str, repr) without its password."""

    url: str

    def __str__(self) -> str:
        return without_password(self.url)

    def __repr__(self) -> str:
        return f"PostgresUrl({without_password(self.url)!r})"


StoreLocation = Path | PostgresUrl


def is_postgres_url(text: str) -> bool:
    # by its prefix, not urlsplit: a malformed URL must still be known for one, and so
    # have its password cut out of what is printed
    return text.strip().lower().startswith(tuple(f"{s}://" for s in POSTGRES_SCHEMES))


def store_location(text: str | Path) -> StoreLocation:
    """What `--db` or $DLBENCH_DB names: a postgresql:// URL, else a store file's path."""
    if isinstance(text, Path):
        return text
    return PostgresUrl(text.strip()) if is_postgres_url(text) else Path(text)


def default_location() -> StoreLocation:
    """$DLBENCH_DB, else dlbench.sqlite in the user's data directory."""
    if os.environ.get(DB_ENV_VAR):
        return store_location(os.environ[DB_ENV_VAR])
    return user_data_folder() / "dlbench.sqlite"


def user_data_folder() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("dlbench", appauthor=False))


def without_password(url: str) -> str:
    """The URL with any password removed, from its user part and from its query
    (libpq takes `password=` there too); everything else is kept, so the result
    still connects where the password comes from $PGPASSWORD or ~/.pgpass."""
    try:
        parts = urlsplit(url)
    except ValueError:  # malformed (a bad IPv6 host): cut what could be a password
        bare = _QUERY_PASSWORD.sub(lambda m: m.group(1), url).rstrip("?&")
        return _USERINFO_PASSWORD.sub(r"\1@", bare)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, hosts = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}@{hosts}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# `scheme://user:password@` and a `password=` query term, for a URL urlsplit refuses
_USERINFO_PASSWORD = re.compile(r"(://[^:/@?#]*):[^@]*@")
_QUERY_PASSWORD = re.compile(r"([?&])password=[^&#]*&?")


def redacted_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line as stored with a run: every PostgreSQL URL in it without its
    password (`--db URL` and `--db=URL` alike), every http(s) URL without its
    credentials (--endpoint's), and --api-key's value hidden."""
    words: list[str] = []
    for word in argv:
        option, equals, _ = word.partition("=")
        if words and _is_api_key_option(words[-1]):  # the word after --api-key: its value
            words.append(HIDDEN)
        elif _is_api_key_option(option):
            words.append(f"{option}={HIDDEN}" if equals else option)
        else:
            words.append(_redacted_word(word))
    return tuple(words)


HIDDEN = "***"


def _is_api_key_option(word: str) -> bool:
    # argparse takes any unambiguous prefix of an option: --api-k is --api-key
    return len(word) > len("--api-") and API_KEY_OPTION.startswith(word)


def _redacted_word(word: str) -> str:
    option, equals, value = word.partition("=")
    if equals and option.startswith("--") and _has_secret(value):
        return f"{option}={_redacted_word(value)}"
    if is_postgres_url(word):
        return without_password(word)
    return without_credentials(word) if _is_http_url(word) else word


def _has_secret(text: str) -> bool:
    return is_postgres_url(text) or _is_http_url(text)


def _is_http_url(text: str) -> bool:
    return text.strip().lower().startswith(("http://", "https://"))
