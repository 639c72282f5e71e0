"""The CLI's client of its own home's gateway, on the one transport (no redirects: the key stays on this port)."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import __version__, deadlines
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

if TYPE_CHECKING:
    from .in_process import App

PROBE_TIMEOUT = 0.5
USER_AGENT = "backchannel-cli"  # every request of the CLI's says so (the probe with no key too)
TIMEOUT = 30.0


@dataclass(frozen=True)
class Answer:
    """A JSON-object answer of the gateway below 400 (errors are raised)."""

    status: int
    body: dict[str, Any]


class GatewayClient:
    """Requests to this home's gateway as the person, with the home's API key."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = TIMEOUT, app: App | None = None) -> None:
        """`app`: the gateway's ASGI app in this process, answering through no socket (`in_process`)."""
        self.base_url = base_url.rstrip("/")
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
            user_agent=USER_AGENT,
            app=app,
        )

    @classmethod
    def at(cls, host: str, port: int, api_key: str) -> GatewayClient:
        """The gateway listening at `host`:`port` (a wildcard address: reached on loopback)."""
        host = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return cls(f"http://{host}:{port}", api_key)

    @classmethod
    def in_process(cls, app: App, api_key: str) -> GatewayClient:
        """This home's gateway built in this process (none runs), reached through its own app: the same requests
        and answers as over the network."""
        return cls("http://gateway.in-process", api_key, app=app)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def probe(self, instance: str) -> bool:
        """True when whatever listens at the base URL is this home's gateway: its `/health`, asked with no
        credentials at all, names `instance` (the fingerprint its runtime file holds). The key is sent only after.
        A gateway of another version than this command's is refused: restart it."""
        anonymous = Transport(
            self.base_url,
            None,
            naming=self._naming,
            follow_redirects=False,
            timeout=PROBE_TIMEOUT,
            retries=0,
            user_agent=USER_AGENT,
        )
        try:
            r = await anonymous.request("GET", "/health")
        except GatewayError:
            return False
        finally:
            await anonymous.aclose()
        body = (r.json_object() if r.status == 200 else None) or {}
        own = wire.backchannel_facts(body)
        if own is None or (own.get("instance") or body.get("instance")) != instance:
            return False
        if own.get("version") != __version__:
            raise GatewayError(
                f"the running gateway is Backchannel {own.get('version') or 'of an earlier version'}, this command"
                f" {__version__}: restart the gateway (backchannel gateway stop, then backchannel gateway)",
                code="gateway_version",
            )
        return True

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

    async def send(
        self,
        to: str,
        message: str,
        *,
        wait: float,
        key: str,
        sender: str = "human:cli",
        steer: bool = False,
        deadline: float | None = None,
    ) -> Answer:
        """The person's message to any address, its outcome waited for up to `wait` seconds (`POST /v1/messages`)."""
        headers = _send_headers(key, wait, sender, steer=steer, deadline=deadline)
        body = {"to": to, "message": message}
        return await self.request("POST", "/v1/messages", json=body, headers=headers, timeout=wait + 30)

    async def send_stream(
        self,
        to: str,
        message: str,
        *,
        wait: float,
        key: str,
        sender: str = "human:cli",
        steer: bool = False,
        deadline: float | None = None,
    ) -> AsyncGenerator[sse.Event, None]:
        """The same to a session of this home, and its run's named events as they happen (`run.waiting`,
        `assistant.delta`, `assistant.completed`, `error`, `run.queued` when `wait` runs out, then `done`)."""
        headers = _send_headers(key, wait, sender, steer=steer, deadline=deadline)
        body = {"to": to, "message": message, "stream": True}
        async with self._http.stream(
            "POST", "/v1/messages", json=body, headers=headers, read_timeout=wait + 30
        ) as stream:
            if stream.status >= 400:
                raise _error(stream.status, json_object(await stream.read()) or {})
            async for event in sse.parse(stream.chunks()):
                yield event

    async def events(self, run_id: str) -> AsyncIterator[dict[str, Any]]:
        """A run's events from the gateway, past and future, until its end (any profile's: run ids are unique)."""
        async for event in self.stream(f"/v1/runs/{quote(run_id)}/events"):
            yield event

    async def stream(self, path: str) -> AsyncIterator[dict[str, Any]]:
        """The events of a stream the gateway answers at `path` (GET), each a JSON object, until it ends; a last
        `stream.failed` (what went wrong once the stream had begun) is raised as the error it carries."""
        async with self._http.stream("GET", path, read_timeout=None) as stream:
            if stream.status >= 400:
                raise _error(stream.status, json_object(await stream.read()) or {})
            async for event in sse.json_objects(stream.chunks()):
                if event.get("event") == "stream.failed":
                    status = event.get("status")
                    raise _error(status if isinstance(status, int) else 502, event)
                yield event


def _send_headers(
    key: str, wait: float, sender: str, *, steer: bool = False, deadline: float | None = None
) -> dict[str, str]:
    headers = {"Idempotency-Key": key, "X-Hermes-Wait-Seconds": f"{max(wait, 0.001):g}", "X-Backchannel-Sender": sender}
    if steer:
        headers["X-Backchannel-Mode"] = "steer"
    if deadline is not None:
        headers[deadlines.HEADER] = deadlines.wire(deadline)
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
