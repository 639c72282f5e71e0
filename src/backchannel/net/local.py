"""The CLI's client of its own home's gateway, on the one transport (no redirects: the key stays on this port)."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from .. import keys
from ..errors import (
    BackchannelError,
    BodyTooLarge,
    Conflict,
    Forbidden,
    GatewayError,
    NotFound,
    PeerRefused,
    Refused,
    UsageError,
)
from . import sse, wire
from .http import Naming, Transport, error_of, json_object, quote

PROBE_TIMEOUT = 0.5
TIMEOUT = 30.0


@dataclass(frozen=True)
class Answer:
    """A JSON-object answer of the gateway below 400 (errors are raised)."""

    status: int
    body: dict[str, Any]


class GatewayClient:
    """Requests to this home's gateway as the person, with the home's API key."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.features: dict[str, Any] = {}  # what the gateway's capabilities said it does (read by `probe`)
        self._naming = Naming(
            who=f"the gateway at {self.base_url}",
            not_sent=GatewayError,
            maybe_sent=functools.partial(GatewayError, code="outcome_unknown"),
        )
        self._http = Transport(
            self.base_url,
            api_key,
            naming=self._naming,
            follow_redirects=False,
            timeout=timeout,
            user_agent="backchannel-cli",
        )

    @classmethod
    def at(cls, host: str, port: int, api_key: str) -> GatewayClient:
        """The gateway listening at `host`:`port` (a wildcard address: reached on loopback)."""
        host = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return cls(f"http://{host}:{port}", api_key)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def probe(self, gateway_id: str, instance: str) -> bool:
        """True when the gateway of this home answers: first `/health`, without the key, must name `instance`
        (the fingerprint its runtime file holds); only then is the key sent (same gateway id, key accepted)."""
        if not instance or not await self._names(instance):
            return False
        try:
            r = await self._http.request("GET", "/v1/capabilities", timeout=PROBE_TIMEOUT, retries=0)
        except GatewayError:
            return False
        body = r.json_object() if r.status == 200 else None
        own = wire.backchannel_facts(body) if body is not None else None
        if own is None or own.get("gateway_id") != gateway_id:
            return False
        features = own.get("features")
        self.features = features if isinstance(features, dict) else {}
        return True

    async def _names(self, instance: str) -> bool:
        """Whether whatever listens at the base URL says it is `instance`, asked with no credentials at all."""
        anonymous = Transport(
            self.base_url, None, naming=self._naming, follow_redirects=False, timeout=PROBE_TIMEOUT, retries=0
        )
        try:
            r = await anonymous.request("GET", "/health")
        except GatewayError:
            return False
        finally:
            await anonymous.aclose()
        body = (r.json_object() if r.status == 200 else None) or {}
        own = wire.backchannel_facts(body)
        return own is not None and (own.get("instance") or body.get("instance")) == instance

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Answer:
        r = await self._http.request(method, path, json=json, headers=headers, timeout=timeout)
        body = r.json_object()
        if body is None:
            raise GatewayError(f"the gateway answered {method} {path} with non-JSON or a non-object (HTTP {r.status})")
        if r.status >= 400:
            raise _error(r.status, body)
        return Answer(r.status, body)

    async def chat(
        self,
        profile: str,
        session_id: str,
        message: str,
        *,
        wait: float,
        idempotency_key: str | None = None,
        sender: str = "human:cli",
        steer: bool = False,
    ) -> Answer:
        headers = _chat_headers(idempotency_key or keys.cli(), wait, sender, steer=steer)
        path = f"/p/{quote(profile)}/api/sessions/{quote(session_id)}/chat"
        return await self.request("POST", path, json={"message": message}, headers=headers, timeout=wait + 30)

    async def resolve(self, address: str) -> Answer:
        """The session a local address names (`POST /v1/addresses/resolve`)."""
        return await self.request("POST", "/v1/addresses/resolve", json={"address": address})

    async def peer_message(self, peer: str, agent: str | None, message: str, *, wait: float, key: str) -> Answer:
        """The person's message to `agent` (its default one when None) on peer gateway `peer`, its reply waited
        for up to `wait` seconds (`POST /v1/peers/{peer}/messages`)."""
        body = {"message": message, **({"agent": agent} if agent else {})}
        headers = _chat_headers(key, wait, "human:cli")
        path = f"/v1/peers/{quote(peer)}/messages"
        return await self.request("POST", path, json=body, headers=headers, timeout=wait + 30)

    async def group(self, name: str, message: str, *, wait: float, idempotency_key: str, sender: str) -> Answer:
        """The person's message to every member of group `name` (each waited for up to `wait` seconds)."""
        path = f"/v1/groups/{quote(name)}/messages"
        headers = _chat_headers(idempotency_key, wait, sender)
        return await self.request("POST", path, json={"message": message}, headers=headers, timeout=wait + 30)

    async def chat_stream(
        self,
        profile: str,
        session_id: str,
        message: str,
        *,
        wait: float,
        idempotency_key: str,
        sender: str,
        steer: bool = False,
    ) -> AsyncGenerator[sse.Event, None]:
        """The message delivered and its run's named events as they happen (`run.waiting`, `assistant.delta`,
        `assistant.completed`, `error`, `run.queued` when `wait` runs out, then `done`)."""
        path = f"/p/{quote(profile)}/api/sessions/{quote(session_id)}/chat/stream"
        headers = _chat_headers(idempotency_key, wait, sender, steer=steer)
        async with self._http.stream(
            "POST", path, json={"message": message}, headers=headers, read_timeout=wait + 30
        ) as stream:
            if stream.status >= 400:
                raise _error(stream.status, json_object(await stream.read()) or {})
            async for event in sse.parse(stream.chunks()):
                yield event

    async def events(self, run_id: str) -> AsyncIterator[dict[str, Any]]:
        """A run's events from the gateway, past and future, until its end (any profile's: run ids are unique)."""
        async with self._http.stream("GET", f"/v1/runs/{quote(run_id)}/events", read_timeout=None) as stream:
            if stream.status >= 400:
                raise _error(stream.status, json_object(await stream.read()) or {})
            async for event in sse.json_objects(stream.chunks()):
                yield event


def _chat_headers(key: str, wait: float, sender: str, *, steer: bool = False) -> dict[str, str]:
    headers = {"Idempotency-Key": key, "X-Hermes-Wait-Seconds": f"{max(wait, 0.001):g}", "X-Backchannel-Sender": sender}
    if steer:
        headers["X-Backchannel-Mode"] = "steer"
    return headers


class GatewayAnswered(BackchannelError):
    """An error answer of the gateway's that is none of the usage errors below (a refused key, a limit, a
    failed run, an engine down …): its code, message and status passed on, exit code 1."""

    def __init__(self, message: str, *, status: int, code: str | None, details: dict[str, object]) -> None:
        super().__init__(message, code=code, details=details)
        self.http_status = status


# The gateway's answers that are the caller's doing, by status: the CLI exits 2 on them, as for its own.
_USAGE: dict[int, type[BackchannelError]] = {400: UsageError, 404: NotFound, 409: Conflict, 413: BodyTooLarge}


def _error(status: int, body: dict[str, Any]) -> BackchannelError:
    """The gateway's own error, as the CLI reports it: the class its status (and code) names, code and message
    kept, the run it concerns (`run_id`) too."""
    err = error_of(status, body)
    details: dict[str, object] = {k: v for k, v in err.details.items() if k == "run_id"}
    if status == 403:
        cls: type[BackchannelError] = Forbidden if err.code == Forbidden.code else Refused
    elif err.type == PeerRefused.type:  # a peer refused the message the gateway sent for us: change it, do not retry
        cls = PeerRefused
    else:
        cls = _USAGE.get(status, BackchannelError)
    if cls is BackchannelError:
        return GatewayAnswered(err.message, status=status, code=err.code, details=details)
    return cls(err.message, code=err.code, details=details)
