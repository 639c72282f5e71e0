"""One HTTP transport for the Hermes dialect: auth, timeouts, retries before sending, redirects, httpx errors mapped.

Every httpx exception is turned into a Backchannel error in `map_httpx_errors`, with the cause
attached; nothing from httpx leaves this module. The mapping sorts failures in two:

    not sent     connect error, connect or pool timeout, a URL or header that could not go out:
                 nothing reached the other side, so the same request (the same key) may be sent again
    maybe sent   read or write timeout, a connection that broke, an answer that could not be read,
                 too many redirects: the request may have arrived, the outcome is unknown

Each client says, in a `Naming`, what the other side is called and which error each kind becomes.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import math
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from .. import __version__, tracing
from ..errors import BackchannelError, ConfigError

if TYPE_CHECKING:  # httpx loads with the first client made: a command that sends nothing never pays for it
    import httpx

    from .checked_network import AddressCheck
    from .in_process import App

DEFAULT_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
RETRIES = 2  # after the first attempt, only when nothing was sent (or the answer was 429/503)
RETRY_AFTER_CAP = 5.0
RETRY_AFTER_DEFAULT = 1.0
USER_AGENT = f"backchannel/{__version__}"

MakeError = Callable[[str], BackchannelError]


@dataclass(frozen=True)
class _Kinds:
    """httpx's exceptions, sorted as the module docstring says."""

    not_sent: tuple[type[Exception], ...]  # nothing left this machine: the request can go again unchanged
    retried: tuple[type[Exception], ...]  # of those, the ones worth a second attempt: the other side was not there
    every: tuple[type[Exception], ...]


@functools.cache
def _kinds() -> _Kinds:
    import httpx

    return _Kinds(
        not_sent=(
            httpx.ConnectError,
            httpx.ConnectTimeout,
            httpx.PoolTimeout,
            httpx.UnsupportedProtocol,
            httpx.LocalProtocolError,
            httpx.ProxyError,
            httpx.InvalidURL,
            httpx.CookieConflict,
        ),
        retried=(httpx.ConnectError, httpx.ConnectTimeout),
        every=(httpx.HTTPError, httpx.InvalidURL, httpx.CookieConflict, httpx.StreamError),
    )


@dataclass(frozen=True)
class Naming:
    """How one client's transport errors are worded and what they mean: who is at the other end, and the errors."""

    who: str  # "peer 'spark' at http://…", "the gateway at http://…"
    not_sent: MakeError  # nothing was sent: trying again with the same key is safe
    maybe_sent: MakeError  # the request may have arrived: the outcome is unknown
    unreachable: str = ""  # what to look at when nothing answers ("is its gateway running?"), after the error


@dataclass(frozen=True)
class HttpResponse:
    """A whole answer: status, headers (lower-case names) and body."""

    status: int
    headers: Mapping[str, str] = field(repr=False)
    content: bytes = field(repr=False)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json_object(self) -> dict[str, Any] | None:
        """The body as a JSON object, or None when it is not one."""
        return json_object(self.content)


@dataclass(frozen=True)
class ErrorBody:
    """What an error answer says, read from `{"error": {"message", "type", "code"}}` or one of its looser forms."""

    status: int
    message: str
    code: str | None = None
    type: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)  # the error object's other fields (e.g. run_id)

    @property
    def said(self) -> str:
        """`: <message>` to follow a line that names the status already; empty when the body said nothing more."""
        return "" if self.message == f"HTTP {self.status}" else f": {self.message}"


def quote(part: str) -> str:
    """One URL path segment, quoted whole (a `/` in it is data, not a separator)."""
    return urllib.parse.quote(part, safe="")


def with_query(path: str, **params: object) -> str:
    """`path` with these query parameters (None left out; a tuple or list repeats its name)."""
    given = {name: value for name, value in params.items() if value is not None}
    return f"{path}?{urllib.parse.urlencode(given, doseq=True)}" if given else path


def json_object(raw: bytes) -> dict[str, Any] | None:
    """`raw` as a JSON object, or None when it is not one."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def error_of(status: int, body: Mapping[str, Any] | None) -> ErrorBody:
    """The error in an answer: `error` as an object or a string; the code also from `error.reason`, `code`, `reason`."""
    body = body or {}
    err = body.get("error")
    if isinstance(err, dict):
        message = err.get("message")
        code = err.get("code") or err.get("reason")
        kind = err.get("type")
        details = {k: v for k, v in err.items() if k not in ("message", "code", "type")}
    else:
        message, code, kind, details = err, None, None, {}
    code = code or body.get("code") or body.get("reason")
    return ErrorBody(
        status,
        str(message) if message else f"HTTP {status}",
        str(code) if code else None,
        str(kind) if kind else None,
        details,
    )


def retry_after(value: str | None, *, now: float | None = None) -> float:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), at most `RETRY_AFTER_CAP`."""
    if not value or not value.strip():
        return RETRY_AFTER_DEFAULT
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return RETRY_AFTER_DEFAULT
        seconds = when.timestamp() - (time.time() if now is None else now)  # a date without a zone is UTC
    if not math.isfinite(seconds):
        return RETRY_AFTER_DEFAULT
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


@functools.cache
def system_tls() -> ssl.SSLContext:
    """The system's certificate store, loaded once per process (it takes tens of milliseconds)."""
    return ssl.create_default_context()


def _detail(exc: Exception, secret: str) -> str:
    text = str(exc) or type(exc).__name__
    return text.replace(secret, "[key]") if secret else text


def _without_query(path: str) -> str:
    try:
        parts = urllib.parse.urlsplit(path)
    except ValueError:
        return path.partition("?")[0][:80]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


@contextlib.contextmanager
def map_httpx_errors(
    naming: Naming, method: str, path: str, *, timeout: float | None, secret: str = ""
) -> Iterator[None]:
    """Turns any httpx exception raised inside into the client's error for it, the cause attached. The
    request is named without its query (it may hold a secret: a push receiver's URL, say)."""
    path = _without_query(path)
    try:
        yield
    except _kinds().every as exc:
        import httpx

        detail = _detail(exc, secret)
        if isinstance(exc, _kinds().not_sent):
            if detail == "All connection attempts failed":  # httpx's words for a refused or impossible connection
                detail = "nothing accepted the connection"
            advice = f"; {naming.unreachable}" if naming.unreachable else ""
            raise naming.not_sent(f"could not reach {naming.who}: {detail}{advice}") from exc
        if isinstance(exc, httpx.TimeoutException):
            within = f"within {timeout:g}s" if timeout is not None else "in time"
            raise naming.maybe_sent(f"{naming.who} did not answer {method} {path} {within}") from exc
        if isinstance(exc, httpx.TooManyRedirects):
            raise naming.maybe_sent(f"{naming.who} redirected {method} {path} too many times") from exc
        if isinstance(exc, httpx.DecodingError):
            raise naming.maybe_sent(f"{naming.who} sent an undecodable answer to {method} {path}: {detail}") from exc
        raise naming.maybe_sent(f"the connection to {naming.who} broke during {method} {path}: {detail}") from exc


class Stream:
    """An answer whose body is read as it arrives; reading it maps httpx errors like the request did."""

    def __init__(self, response: httpx.Response, mapped: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        self._response = response
        self._mapped = mapped
        self.status = response.status_code
        self.headers: Mapping[str, str] = dict(response.headers)

    async def read(self) -> bytes:
        with self._mapped():
            return await self._response.aread()

    async def chunks(self) -> AsyncIterator[bytes]:
        with self._mapped():
            async for chunk in self._response.aiter_bytes():
                yield chunk

    async def head(self, limit: int) -> bytes:
        """At most `limit` bytes of the body as sent (not decompressed), the rest never read."""
        kept = b""
        with self._mapped():
            async for chunk in self._response.aiter_raw():
                kept += chunk[: limit - len(kept)]
                if len(kept) >= limit:
                    break
        return kept


class Transport:
    """One client's connection pool to one base URL, with its key, its naming and its redirect rule.

    Timeouts are on by default; a request is sent again only when nothing was sent (connect failures)
    or when the answer was 429/503 (after Retry-After, capped). `trust_env` is off: no proxy or netrc
    from the environment. httpx drops the Authorization header when a redirect leaves the origin.
    """

    def __init__(
        self,
        base_url: str,
        key: str | None,
        *,
        naming: Naming,
        follow_redirects: bool,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        retries: int = RETRIES,
        user_agent: str = USER_AGENT,
        keep_alive: bool = True,
        max_connections: int | None = None,
        check_address: AddressCheck | None = None,
        app: App | None = None,
    ) -> None:
        """`key` None: no Authorization header (a local model server needs none). `keep_alive` False: each
        request on a fresh connection, closed after its answer (a server that closes idle connections as it
        likes then never races a request sent on one). `check_address`: called with the host and each address
        it resolves to when a connection is made, raising to refuse it (push receivers are screened so).
        `connect_timeout`: the part of any timeout that making a connection may take. `app`: an ASGI app in this
        process answers, through no socket (the CLI's own gateway when none runs)."""
        if key is not None and (not key or not all("!" <= c <= "~" for c in key)):
            raise ConfigError(f"the key for {naming.who} must be visible ASCII characters (no spaces)")
        import httpx

        self.base_url = base_url.rstrip("/")
        self.naming = naming
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retries = retries
        self._key = key or ""
        headers = {"User-Agent": user_agent}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if not keep_alive:
            headers["Connection"] = "close"  # and the server hears it: no idle connection kept on either side
        if check_address:
            from .checked_network import checked_transport
        if app is not None:
            from .in_process import InProcessTransport
        limits = httpx.Limits(max_connections=max_connections or 100, max_keepalive_connections=20 if keep_alive else 0)
        self._http = httpx.AsyncClient(
            headers=headers,
            timeout=self._timeout(timeout, read=timeout),
            follow_redirects=follow_redirects,
            verify=system_tls(),
            trust_env=False,
            limits=limits,
            transport=(
                InProcessTransport(app)
                if app is not None
                else checked_transport(check_address, limits=limits, tls=system_tls())
                if check_address
                else None
            ),
        )

    def __repr__(self) -> str:
        return f"Transport({self.base_url!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    def _timeout(self, seconds: float, *, read: float | None) -> httpx.Timeout:
        import httpx

        return httpx.Timeout(seconds, connect=min(seconds, self.connect_timeout), read=read)

    def scrub(self, text: str) -> str:
        """`text` (an answer's error message, say) with this client's key cut out: a server may echo it back."""
        return text.replace(self._key, "[key]") if self._key else text

    def mapped(
        self, method: str, path: str, timeout: float | None, naming: Naming | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return map_httpx_errors(naming or self.naming, method, path, timeout=timeout, secret=self._key)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any,
        headers: Mapping[str, str] | None,
        timeout: httpx.Timeout,
        shown_timeout: float | None,
        retries: int,
        stream: bool,
        content: bytes | None = None,
        naming: Naming | None = None,
    ) -> httpx.Response:
        sent = dict(headers or {})
        tracing.inject(sent)  # the current span's context (W3C traceparent), when tracing is on
        for attempt in range(retries + 1):
            last = attempt == retries
            request = self._http.build_request(
                method,
                self.base_url + path,
                json=json,
                content=content,
                headers=sent,
                timeout=timeout,
            )
            with self.mapped(method, path, shown_timeout, naming):
                try:
                    response = await self._http.send(request, stream=stream)
                except _kinds().retried:
                    if last:
                        raise
                    await asyncio.sleep(0.2 * (attempt + 1))  # nothing was sent: the same request again is safe
                    continue
            if response.status_code in (429, 503) and not last:
                wait = retry_after(response.headers.get("retry-after"))
                with self.mapped(method, path, shown_timeout, naming):
                    await response.aclose()
                await asyncio.sleep(wait)
                continue
            return response
        raise AssertionError("unreachable")

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> HttpResponse:
        """`method` on base URL + `path` (already quoted), the whole answer read; any status is returned."""
        seconds = self.timeout if timeout is None else timeout
        response = await self._send(
            method,
            path,
            json=json,
            headers=headers,
            timeout=self._timeout(seconds, read=seconds),
            shown_timeout=seconds,
            retries=self.retries if retries is None else retries,
            stream=False,
        )
        return HttpResponse(response.status_code, dict(response.headers), response.content)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        read_timeout: float | None = None,
        json: Any = None,
        content: bytes | None = None,
        naming: Naming | None = None,
    ) -> AsyncIterator[Stream]:
        """An answer read as it arrives (`read_timeout` None: the body may pause for as long as it likes).
        `content`: a body sent as it is; `naming`: who this one request's errors name (one pool, many hosts)."""
        response = await self._send(
            method,
            path,
            json=json,
            content=content,
            headers=headers,
            timeout=self._timeout(self.timeout, read=read_timeout),
            shown_timeout=read_timeout,
            retries=self.retries,
            stream=True,
            naming=naming,
        )
        try:
            yield Stream(response, lambda: self.mapped(method, path, read_timeout, naming))
        finally:
            with self.mapped(method, path, read_timeout, naming):
                await response.aclose()


class OverTransport:
    """A client that speaks over one Transport (`self._http`) and closes with it: an async context manager."""

    _http: Transport

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
