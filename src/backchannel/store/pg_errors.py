"""The PostgreSQL store's error boundary: asyncpg's and the network's errors leave as StoreError, and URLs lose
their passwords before they name a database anywhere.

Every asyncpg call of the store goes through `map_pg_errors(name, secrets)`, which turns each error into a
StoreError naming the database (its URL without the password), the error as its cause:

    asyncpg.PostgresError                            -> StoreError store_unavailable (503)
     ├── SQLSTATE 53100 disk_full                    -> DiskFull store_full (503)
     ├── class 08, 57P01-57P03 (connection, shutdown) -> StoreError: the connection was lost / is refused
     ├── class 28 (InvalidPasswordError, …)          -> StoreError: the server refused the login
     ├── UniqueViolationError                        -> StoreError (`violates_unique` tells it apart)
     └── anything else                               -> StoreError naming the SQLSTATE
    asyncpg.InterfaceError, InternalClientError      -> StoreError naming the database
    TimeoutError (a statement, a connection)         -> StoreError: did not answer in time
    OSError (refused, no such host, TLS)             -> StoreError: the server cannot be reached

A message never holds the password: it is cut from the URL, and scrubbed from the driver's own text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import asyncpg

from ..errors import DiskFull, StoreError

SECRET_PARAMS = frozenset({"password", "sslpassword"})  # query parameters of a URL that hold a secret
_KEYWORD_SECRET = re.compile(r"((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
LOST = frozenset({"57P01", "57P02"})  # admin_shutdown, crash_shutdown: the server ended the connection
REFUSING = frozenset({"57P03", "53300"})  # cannot_connect_now (starting, stopping), too_many_connections


def redact_url(url: str) -> str:
    """The URL without its password (in the user part or the query): how the database is named everywhere."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unparsable PostgreSQL URL>"
    if parts.scheme not in ("postgres", "postgresql"):  # not a URL (asyncpg refuses it): cut `password=…` alone
        return _KEYWORD_SECRET.sub(r"\1***", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hosts}" if user else hosts
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(key, value) for key, value in pairs if key.lower() not in SECRET_PARAMS], safe="/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets a URL holds, as written and decoded: what no message may repeat."""
    found: list[str] = []
    try:
        parts = urlsplit(url)
        if "@" in parts.netloc:
            userinfo = parts.netloc.rpartition("@")[0]
            if ":" in userinfo:
                found.append(userinfo.split(":", 1)[1])
        found += [value for key, value in parse_qsl(parts.query) if key.lower() in SECRET_PARAMS]
    except ValueError:
        pass
    found += [match.group(2).strip("'") for match in _KEYWORD_SECRET.finditer(url)]
    return tuple(sorted({form for secret in found if secret for form in (secret, unquote(secret))}, key=len)[::-1])


def scrub(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret replaced by ***."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


class map_pg_errors:
    """Translate every asyncpg, timeout and network error raised inside the block into a StoreError about the
    database `name` (cause attached), with `secrets` scrubbed from its message."""

    __slots__ = ("name", "secrets")

    def __init__(self, name: str, secrets: Sequence[str] = ()) -> None:
        self.name = name
        self.secrets = secrets

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | asyncpg.InternalClientError | OSError):
            raise translate(exc, self.name, self.secrets) from exc


def translate(exc: BaseException, name: str, secrets: Sequence[str] = ()) -> StoreError:
    """The StoreError an asyncpg, timeout or network error is reported as (see the module's docstring)."""
    text = scrub(str(exc) or type(exc).__name__, secrets)
    where = repr(name)
    if isinstance(exc, asyncpg.PostgresError):
        state = exc.sqlstate or ""
        if state == "53100":
            return DiskFull(f"{where} is full (the database server's disk): {text}; nothing was saved")
        if state.startswith("08") or state in LOST:
            return StoreError(f"{where}: the connection to the server was lost ({text}); nothing was saved")
        if state in REFUSING:
            return StoreError(f"{where}: the server refuses connections now ({text})")
        if state.startswith("28"):
            return StoreError(f"{where}: the server refused the login (check the user and its password): {text}")
        return StoreError(f"{where}: {type(exc).__name__} ({state}): {text}")
    if isinstance(exc, TimeoutError):
        return StoreError(f"{where}: the server did not answer in time ({text})")
    if isinstance(exc, OSError):
        return StoreError(f"{where}: the server cannot be reached: {text}")
    return StoreError(f"{where}: {type(exc).__name__}: {text}")


def violates_unique(exc: BaseException, index: str | None = None) -> bool:
    """Whether `exc` (a StoreError from this module, or asyncpg's own) is a unique violation, of the index or
    constraint `index` when named: e.g. another gateway claimed the session's run first (`runs_one_running`)."""
    cause = exc if isinstance(exc, asyncpg.UniqueViolationError) else exc.__cause__
    if not isinstance(cause, asyncpg.UniqueViolationError):
        return False
    return index is None or cause.constraint_name == index
