"""HTTP client of another gateway in the Hermes API-server dialect (Backchannel or Hermes alike).

httpx errors are translated here: a connection that fails before the request was sent is
"unreachable" (and safely retried with the same key); one that fails after is "outcome unknown".
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from .. import __version__
from ..errors import PeerError, PeerOutcomeUnknown, PeerRefused
from ..home.peers import Peer

BOT_CHAT = "Bot Chat"
LIST_TIMEOUT = 30.0
CONNECT_RETRIES = 2
REFUSAL_CODES = frozenset(
    {
        "not_allowed",
        "hop_limit",
        "would_deadlock",
        "pair_budget",
        "self_send",
        "invalid_idempotency_key",
        "idempotency_key_conflict",
        "idempotency_conflict",
        "invalid_request",
        "invalid_payload",
        "missing_message",
    }
)
TAKEN_TITLE_RE = re.compile(r"in use by session (\S+)")


@dataclass(frozen=True)
class DmResult:
    result: str  # delivered | receipt | failed | refused | unknown
    peer: str
    agent: str | None
    session_id: str | None
    run_id: str | None
    reply: str | None = None
    error: str | None = None
    state: str | None = None
    queue_position: int | None = None
    idempotency_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def ledger_fields(self) -> dict[str, Any]:
        """What the ledger keeps of this answer (`ledger.update_outbound` keywords)."""
        return {
            "state": self.result,
            "reply": self.reply,
            "error": self.error,
            "key": self.idempotency_key,
            "remote_session_id": self.session_id,
            "remote_run_id": self.run_id,
        }


def derived_key(sender: str, target_profile: str, session_id: str, message: str, *, window: int = 900) -> str:
    """The receipt dialect's content key: the same text to the same Bot Chat within one window is one message."""
    digest = hashlib.sha256(message.encode()).hexdigest()
    raw = "\0".join(("v1", sender, target_profile, session_id, digest))
    return f"auto:{hashlib.sha256(raw.encode()).hexdigest()[:24]}:{int(time.time() // window)}"


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


@functools.cache
def _system_tls() -> ssl.SSLContext:
    """The system's certificate store, loaded once per process (it takes tens of milliseconds)."""
    return ssl.create_default_context()


class PeerClient:
    def __init__(self, peer: Peer, agent: str | None = None, *, gateway_id: str = "") -> None:
        if not peer.key:
            raise PeerError(f"peer {peer.name!r} has no key: set one with `backchannel peer add {peer.name} --url ...`")
        self.peer = peer
        self.agent = agent
        self.base = peer.url + (f"/p/{_q(agent)}" if agent else "")
        self.gateway_id = gateway_id
        headers = {"Authorization": f"Bearer {peer.key}", "User-Agent": f"backchannel/{__version__}"}
        # The system's certificates, not a bundled list; httpx drops Authorization on a cross-origin redirect.
        self._http = httpx.AsyncClient(
            headers=headers, timeout=LIST_TIMEOUT, follow_redirects=True, verify=_system_tls(), trust_env=False
        )
        self._caps: dict[str, Any] | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> PeerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- transport -----------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = LIST_TIMEOUT,
    ) -> httpx.Response:
        url = self.base + path
        for attempt in range(CONNECT_RETRIES + 1):
            try:
                response = await self._http.request(method, url, json=body, headers=headers, timeout=timeout)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if attempt < CONNECT_RETRIES:  # nothing was sent: safe to try again with the same key
                    await asyncio.sleep(0.2 * (attempt + 1))
                    continue
                raise PeerError(
                    f"could not reach peer {self.peer.name!r} at {self.peer.url}: {exc or type(exc).__name__}",
                    code="peer_unreachable",
                ) from exc
            except httpx.TimeoutException as exc:
                raise PeerOutcomeUnknown(
                    f"peer {self.peer.name!r} did not answer {method} {path} within {timeout:g}s",
                ) from exc
            except httpx.HTTPError as exc:
                raise PeerOutcomeUnknown(
                    f"the connection to peer {self.peer.name!r} broke during {method} {path}: {exc}"
                ) from exc
            if response.status_code in (429, 503) and attempt < CONNECT_RETRIES:
                await asyncio.sleep(min(float(response.headers.get("retry-after", "1") or 1), 5.0))
                continue
            return response
        raise AssertionError("unreachable")

    def _json(self, response: httpx.Response, what: str) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError as exc:
            raise PeerError(f"peer {self.peer.name!r} answered {what} with non-JSON: {response.text[:200]!r}") from exc
        if not isinstance(data, dict):
            raise PeerError(f"peer {self.peer.name!r} answered {what} with a non-object JSON value")
        if response.status_code >= 400:
            raise self._error(response.status_code, data, what)
        return data

    def _error(self, status: int, data: dict[str, Any], what: str) -> PeerError:
        err = data.get("error")
        message = err.get("message") if isinstance(err, dict) else err
        code = (err.get("code") if isinstance(err, dict) else None) or data.get("code") or data.get("reason")
        detail = str(message or f"HTTP {status}")
        if status == 401 or code in ("invalid_api_key", "gateway_auth_failed"):
            return PeerError(f"peer {self.peer.name!r} refused our key (HTTP {status}): {detail}", code="peer_auth")
        if code in REFUSAL_CODES or status in (403, 409):
            return PeerRefused(
                f"peer {self.peer.name!r} refused {what} (HTTP {status}, {code}): {detail}", code=str(code or "refused")
            )
        return PeerError(
            f"peer {self.peer.name!r} rejected {what} (HTTP {status}): {detail}", code=str(code or "peer_error")
        )

    # --- discovery -----------------------------------------------------------------------------

    async def capabilities(self, *, timeout: float = 10) -> dict[str, Any]:
        """The peer's /v1/capabilities, or {} when it has none (any failure is tolerated)."""
        if self._caps is None:
            try:
                response = await self._request("GET", "/v1/capabilities", timeout=timeout)
                self._caps = self._json(response, "the capabilities request")
            except PeerError:
                self._caps = {}
        return self._caps

    async def health(self) -> dict[str, Any]:
        """The peer's /health (`platform`, `version`), or {} (any failure is tolerated)."""
        try:
            return self._json(await self._request("GET", "/health", timeout=10), "the health request")
        except PeerError:
            return {}

    async def dedups_chat(self) -> bool:
        caps = await self.capabilities()
        return caps.get("platform") == "backchannel" or bool((caps.get("features") or {}).get("chat_idempotency"))

    async def bot_chat(self) -> str:
        """Find the target's session titled Bot Chat, or create it (never a second one)."""
        query = urllib.parse.urlencode({"limit": 200, "title": BOT_CHAT, "include_hidden": 1})
        listing = self._json(await self._request("GET", f"/api/sessions?{query}"), "the session list")
        rows = [r for r in listing.get("data") or [] if isinstance(r, dict) and isinstance(r.get("title"), str)]
        for row in rows:  # exact title first, then a compressed Bot Chat's tip (Hermes 0.19 lists "Bot Chat #2")
            if row["title"].strip() == BOT_CHAT and row.get("id"):
                return str(row["id"])
        for row in rows:
            if re.fullmatch(r"Bot Chat #\d+", row["title"].strip()) and row.get("id"):
                return str(row["id"])
        response = await self._request("POST", "/api/sessions", body={"title": BOT_CHAT, "source": "bot_peer_dm"})
        if response.status_code == 400:
            taken = TAKEN_TITLE_RE.search(response.text)
            if taken:  # a Bot Chat exists but was not listed: follow it to its live tip
                found = self._json(
                    await self._request("GET", f"/api/sessions/{_q(taken.group(1))}/messages"), "the Bot Chat lookup"
                )
                return str(found.get("session_id") or taken.group(1))
        created = self._json(response, "the Bot Chat creation")
        session = created.get("session")
        sid = (
            (session.get("id") if isinstance(session, dict) else None) or created.get("id") or created.get("session_id")
        )
        if not sid:
            raise PeerError(f"peer {self.peer.name!r} did not return a session id for the new Bot Chat")
        return str(sid)

    # --- verbs ---------------------------------------------------------------------------------

    def _delivery_headers(
        self, key: str, *, sender: str, wait: float | None, hops: int, chain: tuple[str, ...]
    ) -> dict[str, str]:
        headers = {"Idempotency-Key": key, "X-Hermes-Sender-Profile": sender, "X-Backchannel-Hops": str(hops)}
        if wait is not None:
            headers["X-Hermes-Wait-Seconds"] = f"{max(wait, 0.001):g}"
        if chain:
            headers["X-Backchannel-Chain"] = ",".join(chain)
        if self.gateway_id:
            headers["X-Backchannel-Gateway"] = self.gateway_id
        return headers

    async def dm(
        self,
        message: str,
        *,
        wait: float,
        key: str | None = None,
        sender: str = "default",
        hops: int = 0,
        chain: tuple[str, ...] = (),
    ) -> DmResult:
        """Deliver into the Bot Chat and wait up to `wait` seconds: the reply, a receipt, or why not."""
        session_id = await self.bot_chat()
        key = key or derived_key(sender, self.agent or sender, session_id, message)
        path = f"/api/sessions/{_q(session_id)}/chat"
        headers = self._delivery_headers(key, sender=sender, wait=wait, hops=hops, chain=chain)
        try:
            response = await self._request("POST", path, body={"message": message}, headers=headers, timeout=wait + 30)
        except PeerOutcomeUnknown as exc:
            if not await self.dedups_chat():
                return self._result(
                    "unknown",
                    session_id,
                    None,
                    key,
                    error=(
                        f"{exc.message}; the message may be in its Bot Chat (session {session_id}): do not resend, "
                        "read the session's messages to check"
                    ),
                )
            try:  # a Backchannel peer deduplicates on the key: asking again tells what happened
                headers["X-Hermes-Wait-Seconds"] = "1"
                response = await self._request("POST", path, body={"message": message}, headers=headers, timeout=30)
            except PeerError as again:
                return self._result(
                    "unknown",
                    session_id,
                    None,
                    key,
                    error=(f"{again.message}; outcome unknown: a resend must reuse idempotency key {key!r}"),
                )
        try:
            body = self._json(response, "the message")
        except PeerRefused as exc:
            return self._result("refused", session_id, None, key, error=exc.message)
        except PeerError as exc:
            if exc.code == "peer_auth":
                raise
            return self._result("failed", session_id, None, key, error=exc.message)
        return self._read_chat(body, session_id, key)

    def _result(
        self, result: str, session_id: str | None, run_id: str | None, key: str | None, **fields: Any
    ) -> DmResult:
        return DmResult(
            result=result,
            peer=self.peer.name,
            agent=self.agent,
            session_id=session_id,
            run_id=run_id,
            idempotency_key=key,
            **fields,
        )

    def _read_chat(self, body: dict[str, Any], session_id: str, key: str) -> DmResult:
        sid = str(body.get("session_id") or session_id)
        if body.get("object") == "hermes.peer.send_result":
            result = str(body.get("result") or "unknown")
            return self._result(
                result,
                sid,
                body.get("delivery_id"),
                key,
                reply=body.get("reply"),
                error=body.get("error") or (body.get("detail") if result == "failed" else None),
                state=body.get("status"),
                queue_position=body.get("queue_position"),
            )
        if body.get("object") == "hermes.session.chat.queued":
            return self._result(
                "receipt",
                sid,
                body.get("run_id") or body.get("delivery_id"),
                key,
                state=str(body.get("status") or "queued"),
                queue_position=body.get("queue_position"),
            )
        message = body.get("message")
        if isinstance(message, dict):
            content = message.get("content")
            return self._result(
                "delivered",
                sid,
                body.get("run_id"),
                key,
                reply=content if isinstance(content, str) else json.dumps(content),
                state="completed",
            )
        raise PeerError(f"peer {self.peer.name!r} answered the message with an unknown shape")

    async def start_run(
        self,
        message: str,
        *,
        key: str | None = None,
        sender: str = "default",
        hops: int = 0,
        chain: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        session_id = await self.bot_chat()
        key = key or derived_key(sender, self.agent or sender, session_id, message)
        headers = self._delivery_headers(key, sender=sender, wait=None, hops=hops, chain=chain)
        body = self._json(
            await self._request("POST", "/v1/runs", body={"input": message, "session_id": session_id}, headers=headers),
            "the run",
        )
        if body.get("object") == "hermes.peer.send_result" and body.get("result") == "receipt":
            body = {"run_id": body.get("delivery_id"), "status": body.get("status"), "replayed": body.get("replayed")}
        run_id = body.get("run_id") or body.get("delivery_id")
        if not run_id:
            raise PeerError(f"peer {self.peer.name!r} did not return a run id")
        return {
            "peer": self.peer.name,
            "agent": self.agent,
            "session_id": session_id,
            "run_id": str(run_id),
            "status": str(body.get("status") or "started"),
            "replayed": bool(body.get("replayed")),
            "idempotency_key": key,
        }

    async def run_status(self, run_id: str) -> dict[str, Any] | None:
        """The run object, or None when the peer does not know the run (expired, restarted, never)."""
        response = await self._request("GET", f"/v1/runs/{_q(run_id)}")
        if response.status_code == 404:
            return None
        return self._json(response, "the status request")

    async def stop(self, run_id: str) -> dict[str, Any]:
        return self._json(await self._request("POST", f"/v1/runs/{_q(run_id)}/stop", body={}), "the stop request")

    async def events(self, run_id: str) -> AsyncIterator[dict[str, Any]]:
        """The run's server-sent events (unnamed `data:` frames), until the stream ends."""
        url = f"{self.base}/v1/runs/{_q(run_id)}/events"
        try:
            async with self._http.stream("GET", url, timeout=httpx.Timeout(30, read=None)) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._error(response.status_code, _safe_json(response), "the event stream")
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        try:
                            event = json.loads(line[5:].strip())
                        except json.JSONDecodeError:
                            continue
                        if isinstance(event, dict):
                            yield event
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise PeerError(
                f"could not reach peer {self.peer.name!r} at {self.peer.url}: {exc}", code="peer_unreachable"
            ) from exc
        except httpx.HTTPError as exc:
            raise PeerOutcomeUnknown(f"the event stream of peer {self.peer.name!r} broke: {exc}") from exc


def _safe_json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
