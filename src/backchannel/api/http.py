"""Reading requests: auth, the profile prefix, a size-limited JSON body, and the delivery headers."""

from __future__ import annotations

import asyncio
import math
import re
import secrets
import urllib.parse
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request

from .. import deadlines
from ..errors import AuthError, BodyTooLarge, RequestTimeout, UsageError
from ..home.profiles import DEFAULT_PROFILE
from ..ids import MAX_EXCHANGE_CHARS, check_exchange
from ..keys import check_external
from . import jsonbody

SENDER_PROFILE_RE = re.compile(r"[^A-Za-z0-9_.@-]")
MAX_HOPS_HEADER = 1000


REALM = "backchannel"


def challenge(exc: AuthError) -> str:
    """The `WWW-Authenticate` value of a 401 (RFC 6750): a Bearer key is what is asked for, and when one was
    sent, that it is not valid here (so a client can say "wrong key" rather than start a login of its own)."""
    if not exc.key_sent:
        return f'Bearer realm="{REALM}"'
    return f'Bearer realm="{REALM}", error="invalid_token", error_description="the API key is not valid here"'


def bearer(request: Request) -> str:
    """The request's bearer token; AuthError when it has none."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("Invalid API key: send Authorization: Bearer <API_SERVER_KEY or a peer key>")
    return token.strip()


def profile_of(request: Request) -> str:
    return str(request.path_params.get("profile", DEFAULT_PROFILE))


class _Profiles(Protocol):
    def check_profile(self, profile: str) -> str: ...


def run_scope(request: Request, profiles: _Profiles) -> str | None:
    """Which profile's runs a run route sees: the named one under /p/<profile>, any at the root (run ids
    are unique across the home, so a run sent to another agent is found without naming it)."""
    named = request.path_params.get("profile")
    if named is None:
        return None
    return profiles.check_profile(str(named))


async def read_body(request: Request, limit: int, *, timeout: float | None = None) -> bytes:
    """The raw body: at most `limit` bytes (declared or streamed), all of it within `timeout` seconds (a slow
    sender gets 408 instead of holding the request)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"the request body has {declared} bytes; the limit is {limit}")
    try:
        async with asyncio.timeout(timeout):
            raw = await _read(request, limit)
    except TimeoutError:
        raise RequestTimeout(f"the request body did not arrive within {timeout:g} s") from None
    return raw


async def json_body(request: Request, limit: int, *, timeout: float | None = None) -> dict[str, Any]:
    """The body as a JSON object (see `read_body`), parsed within jsonbody's bounds."""
    raw = await read_body(request, limit, timeout=timeout)
    if not raw.strip():
        return {}
    data = jsonbody.parse(raw)
    if not isinstance(data, dict):
        raise UsageError("the request body must be a JSON object", code="invalid_json")
    return data


async def _read(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def form_body(request: Request, limit: int) -> dict[str, str]:
    """An HTML form's fields (application/x-www-form-urlencoded); the last value of a repeated field."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise UsageError(f"a form must be sent as application/x-www-form-urlencoded, not {kind or 'no type'!r}")
    raw = await read_body(request, limit)
    try:
        return dict(urllib.parse.parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
    except UnicodeDecodeError as exc:
        raise UsageError(f"the form is not valid UTF-8: {exc.reason}", code="invalid_payload") from exc


def text_field(body: dict[str, Any], *names: str, required: bool = False) -> str | None:
    """The first present field among `names`; a list of content parts or messages yields its text."""
    for name in names:
        if name in body and body[name] is not None:
            return _as_text(body[name], name)
    if required:
        raise UsageError(f"missing field {names[0]!r}", code="missing_message")
    return None


def _as_text(value: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        last = value[-1]
        if isinstance(last, dict) and isinstance(last.get("content"), str | list):
            return _as_text(last["content"], name)
        if all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in value):
            return "".join(p["text"] for p in value)
    raise UsageError(f"field {name!r} must be a string", code="invalid_payload")


def optional_str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise UsageError(f"field {name!r} must be a string", code="invalid_request")
    return value


def str_list(body: dict[str, Any], name: str) -> list[str]:
    """A field that is a list of strings (absent: none)."""
    value = body.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"field {name!r} must be a list of strings", code="invalid_request")
    return value


def flag(body: dict[str, Any], name: str) -> bool:
    """A true-or-false field (absent: false)."""
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise UsageError(f"field {name!r} must be true or false", code="invalid_request")
    return value


@dataclass(frozen=True)
class DeliveryHeaders:
    idempotency_key: str | None
    sender_profile: str | None
    wait_seconds: float | None
    hops: int
    chain: tuple[str, ...]
    exchange: str | None = None
    steer: bool = False  # X-Backchannel-Mode: steer (into the session's running turn); queue is the default
    deadline: float | None = None  # X-Backchannel-Deadline: when the sender stops waiting (backchannel.deadlines)

    def wait_or(self, default: float) -> float:
        """How long to wait for the reply: the request's `X-Hermes-Wait-Seconds`, else the gateway's `default`."""
        return self.wait_seconds if self.wait_seconds is not None else default

    def key_or_new(self) -> str:
        """The request's idempotency key (refused when it is one of the gateway's own), else a new one: a request
        without a key is a new message."""
        return check_external(self.idempotency_key) or "http-" + secrets.token_hex(16)

    @property
    def wants_envelope(self) -> bool:
        """The receipt dialect: both a key and a sender profile ask for the send_result envelope."""
        return bool(self.idempotency_key) and bool(self.sender_profile)


def delivery_headers(request: Request) -> DeliveryHeaders:
    # The request's headers by name, read once (the first of a repeated one, as `Request.headers` gives it):
    # `Request.headers.get` scans them all for each of the eight asked here.
    h = {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(request.scope["headers"])}
    key = h.get("idempotency-key") or None
    sender = h.get("x-hermes-sender-profile") or None
    if sender:
        sender = SENDER_PROFILE_RE.sub("_", sender)[:64]
    return DeliveryHeaders(
        idempotency_key=key,
        sender_profile=sender,
        wait_seconds=_wait(h.get("x-hermes-wait-seconds")),
        hops=_hops(h.get("x-backchannel-hops")),
        chain=tuple(e.strip() for e in (h.get("x-backchannel-chain") or "").split(",") if e.strip()),
        exchange=_exchange(h.get("x-backchannel-exchange")),
        steer=_mode(h.get("x-backchannel-mode")) == "steer",
        deadline=_deadline(h.get(deadlines.HEADER.lower())),
    )


def _deadline(raw: str | None) -> float | None:
    if raw is None or not raw.strip():
        return None
    try:
        return deadlines.absolute(raw)
    except UsageError as exc:
        raise UsageError(
            f"{deadlines.HEADER} must be an RFC 3339 time or seconds since the epoch, got {raw[:60]!r}",
            code=exc.code,
        ) from None


def _mode(raw: str | None) -> str:
    mode = (raw or "queue").strip().lower()
    if mode not in ("queue", "steer"):
        raise UsageError(f"X-Backchannel-Mode must be queue or steer, got {(raw or '')[:40]!r}")
    return mode


def _exchange(raw: str | None) -> str | None:
    if raw is None or not raw.strip():
        return None
    if not check_exchange(raw.strip()):
        raise UsageError(
            f"X-Backchannel-Exchange must be '<gateway-id>:<id>' (visible ASCII, no commas, at most"
            f" {MAX_EXCHANGE_CHARS}), got {raw[:80]!r}"
        )
    return raw.strip()


def _wait(raw: str | None) -> float | None:
    # As Hermes: absent, unreadable or 0 means the server default.
    try:
        value = float(raw) if raw else 0.0
    except ValueError:
        return None
    return value if value > 0 and value == value else None


def _hops(raw: str | None) -> int:
    if raw is None or raw == "":
        return 0
    if not (raw.strip().isascii() and raw.strip().isdigit()) or int(raw) > MAX_HOPS_HEADER:
        raise UsageError(f"X-Backchannel-Hops must be a small non-negative integer, got {raw!r}")
    return int(raw)


def int_param(request: Request, name: str, default: int, *, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise UsageError(f"query parameter {name!r} must be an integer, got {raw!r}") from exc
    if not low <= value <= high:
        raise UsageError(f"query parameter {name!r} must be between {low} and {high}, got {value}")
    return value


def float_param(request: Request, name: str) -> float | None:
    """A finite number given as a query parameter; None when it is absent."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"query parameter {name!r} must be a number, got {raw!r}")
    return value


def sender_of(request: Request) -> str:
    """The surface a person's request names (`X-Backchannel-Sender: human:<surface>`), else `human:api`.

    A request made with the person's key is the person's, whatever its other headers say: who sends is
    the key's to say (a peer has a key of its own), not `X-Backchannel-Gateway` or a sender profile."""
    declared = request.headers.get("x-backchannel-sender", "")
    if re.fullmatch(r"human:[a-z0-9_-]{1,32}", declared):
        return declared
    return "human:api"
