"""The client of another gateway in the Hermes API-server dialect (Backchannel or Hermes alike).

It runs on the one transport (`net.http`): a request that failed before it was sent is
`PeerUnreachable` (safe to send again with the same key); one that failed after is
`PeerOutcomeUnknown`. It is a `net.link.PeerLink`: its answers are read into typed values by `net.wire`.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from .. import addresses, deadlines
from ..errors import PeerAuthRefused, PeerError, PeerOutcomeUnknown, PeerRefused, PeerUnreachable
from ..events import Event, event_of
from ..home.peers import Peer
from ..ids import BOT_CHAT_TITLE as BOT_CHAT
from ..outcome import CONSUMED_HEADER, Result, Run, failed, refused, unknown
from ..states import RunState
from . import sse, wire
from .http import ErrorBody, HttpResponse, Naming, OverTransport, Transport, error_of, json_object, quote
from .link import PLAIN, UNREACHABLE, Envelope, PeerAbout, key_refused

REFUSAL_CODES = frozenset(
    {
        "not_allowed",
        "hop_limit",
        "would_deadlock",
        "pair_budget",
        "budget_exhausted",
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


class PeerClient(OverTransport):
    """One peer gateway (or one of its agents, under `/p/AGENT`), spoken to in the Hermes dialect."""

    def __init__(self, peer: Peer, agent: str | None = None, *, gateway_id: str = "") -> None:
        if not peer.key:
            raise PeerError(f"peer {peer.name!r} has no key: set one with `backchannel peer add {peer.name} --url ...`")
        self.peer = peer
        self.agent = agent
        self.base = peer.url + (f"/p/{quote(agent)}" if agent else "")
        self.to = addresses.remote(peer.name, agent)
        self.who = f"peer {peer.name!r} at {self.base}"
        self.gateway_id = gateway_id
        naming = Naming(
            who=self.who,
            not_sent=PeerUnreachable,
            maybe_sent=PeerOutcomeUnknown,
            unreachable=UNREACHABLE,
        )
        self.timeout = peer.timeout_seconds  # each answer's bound; a chat waits its wait plus this
        self._http = Transport(self.base, peer.key, naming=naming, follow_redirects=True, timeout=self.timeout)
        self._caps: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"PeerClient({self.to!r}, {self.base!r})"

    # --- answers -------------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> HttpResponse:
        bound = self.timeout if timeout is None else timeout
        return await self._http.request(method, path, json=body, headers=headers, timeout=bound, retries=retries)

    def _json(self, response: HttpResponse, what: str) -> dict[str, Any]:
        data = response.json_object()
        if response.status >= 400:
            raise self._error(error_of(response.status, data), what)
        if data is None:
            kind = response.headers.get("content-type", "no content type").split(";")[0]
            raise PeerError(
                f"{self.who} answered {what} with something that is not a JSON object (HTTP {response.status}, "
                f"{kind}): is this the URL of a Backchannel or Hermes gateway?"
            )
        return data

    def _error(self, err: ErrorBody, what: str) -> PeerError:
        status, code = err.status, err.code
        err = dataclasses.replace(err, message=self._http.scrub(err.message))
        if status == 401 or code in ("invalid_api_key", "gateway_auth_failed"):
            said = "" if code == "invalid_api_key" else err.said  # a gateway's words to its own HTTP clients
            return PeerAuthRefused(
                f"{self.who} refused our key (HTTP {status}){said}: {key_refused(self.peer.name, self.peer.url)}"
            )
        if code in REFUSAL_CODES or status in (403, 409):
            detail = f"{self.who} refused {what} (HTTP {status}, {code}){err.said}"
            return PeerRefused(detail, code=code or "refused")
        return PeerError(f"{self.who} rejected {what} (HTTP {status}){err.said}", code=code or "peer_error")

    # --- discovery -----------------------------------------------------------------------------

    async def capabilities(
        self, *, timeout: float = 10, strict: bool = False, retries: int | None = None
    ) -> dict[str, Any]:
        """The peer's /v1/capabilities, or {} when it has none (any failure is tolerated unless `strict`)."""
        if self._caps is None:
            try:
                response = await self._request(
                    "GET", "/v1/capabilities", timeout=min(timeout, self.timeout), retries=retries
                )
                self._caps = self._json(response, "the capabilities request")
            except PeerError:
                if strict:
                    raise
                self._caps = {}
        return self._caps

    async def about(self, *, timeout: float = 10, strict: bool = False) -> PeerAbout:
        """What the peer's /v1/capabilities says it is (an empty answer on any failure unless `strict`)."""
        return wire.about_of(await self.capabilities(timeout=timeout, strict=strict))

    async def health(self) -> PeerAbout:
        """The peer's /health (`platform`, `version`), or an empty answer (any failure is tolerated)."""
        try:
            answer = await self._request("GET", "/health", timeout=min(10, self.timeout))
            return wire.about_of(self._json(answer, "the health request"))
        except PeerError:
            return PeerAbout()

    async def dedups_chat(self) -> bool:
        """True when asking the chat route again with the same key replays the first answer."""
        caps = await self.capabilities()
        own = wire.backchannel_facts(caps)
        return own is not None or bool((caps.get("features") or {}).get("chat_idempotency"))

    async def bot_chat(self) -> str:
        """Find the target's session titled Bot Chat, or create it (never a second one)."""
        query = urllib.parse.urlencode({"limit": 200, "title": BOT_CHAT, "include_hidden": 1})
        answer = await self._request("GET", f"/api/sessions?{query}")
        if answer.status == 404 and self.agent:  # the peer has no such agent: a request to change, not to retry
            err = error_of(answer.status, answer.json_object())
            raise PeerRefused(
                f"{self.who} has no agent {self.agent!r} ({err.code or 'not_found'}): {self._http.scrub(err.message)}",
                code=err.code or "not_found",
            )
        listing = self._json(answer, "the session list")
        rows = [r for r in listing.get("data") or [] if isinstance(r, dict) and isinstance(r.get("title"), str)]
        for row in rows:  # exact title first, then a compressed Bot Chat's tip (Hermes 0.19 lists "Bot Chat #2")
            if row["title"].strip() == BOT_CHAT and row.get("id"):
                return str(row["id"])
        for row in rows:
            if re.fullmatch(r"Bot Chat #\d+", row["title"].strip()) and row.get("id"):
                return str(row["id"])
        response = await self._request("POST", "/api/sessions", body={"title": BOT_CHAT, "source": "bot_peer_dm"})
        if response.status == 400:
            taken = TAKEN_TITLE_RE.search(response.text)
            if taken:  # a Bot Chat exists but was not listed: follow it to its live tip
                found = self._json(
                    await self._request("GET", f"/api/sessions/{quote(taken.group(1))}/messages"), "the Bot Chat lookup"
                )
                return str(found.get("session_id") or taken.group(1))
        created = self._json(response, "the Bot Chat creation")
        session = created.get("session")
        sid = (
            (session.get("id") if isinstance(session, dict) else None) or created.get("id") or created.get("session_id")
        )
        if not sid:
            raise PeerError(f"{self.who} did not return a session id for the new Bot Chat")
        return str(sid)

    # --- verbs ---------------------------------------------------------------------------------

    def _delivery_headers(self, key: str, envelope: Envelope, *, wait: float | None) -> dict[str, str]:
        headers = {
            "Idempotency-Key": key,
            "X-Hermes-Sender-Profile": envelope.sender,
            "X-Backchannel-Hops": str(envelope.hops),
        }
        if wait is not None:
            headers["X-Hermes-Wait-Seconds"] = f"{max(wait, 0.001):g}"
        if envelope.chain:
            headers["X-Backchannel-Chain"] = ",".join(envelope.chain)
        if envelope.exchange:
            headers["X-Backchannel-Exchange"] = envelope.exchange
        if envelope.deadline is not None:
            headers[deadlines.HEADER] = deadlines.wire(envelope.deadline)
        if self.gateway_id:
            headers["X-Backchannel-Gateway"] = self.gateway_id
        return headers

    async def dm(
        self,
        message: str,
        *,
        wait: float,
        key: str,
        envelope: Envelope = PLAIN,
    ) -> Result:
        """Deliver into the Bot Chat and wait up to `wait` seconds: the reply, a receipt, or why not.

        Raises PeerError when nothing was delivered for certain (unreachable, no Bot Chat, wrong key).
        """
        session_id = await self.bot_chat()
        # Known before the message leaves: a peer killed mid-request cannot say afterwards whether it deduplicates.
        dedups = await self.dedups_chat()
        path = f"/api/sessions/{quote(session_id)}/chat"
        headers = self._delivery_headers(key, envelope, wait=wait)
        try:
            response = await self._request(
                "POST", path, body={"message": message}, headers=headers, timeout=wait + self.timeout
            )
        except PeerOutcomeUnknown as exc:
            if not dedups:
                return self._unknown(
                    session_id,
                    key,
                    f"{exc.message}; the message may be in its Bot Chat (session {session_id}): read that session's "
                    "messages to check before sending it again (this peer does not deduplicate)",
                    deduplicated=False,
                )
            try:  # a Backchannel peer deduplicates on the key: asking again tells what happened
                headers["X-Hermes-Wait-Seconds"] = "1"
                response = await self._request("POST", path, body={"message": message}, headers=headers)
            except PeerError:  # down now, or still not answering: what happened to the message is not known
                return self._unknown(session_id, key, f"{exc.message}, and asking again got no answer")
        try:
            body = self._json(response, "the message")
        except PeerRefused as exc:
            return refused(self.to, exc.code, exc.message, session_id=session_id, idempotency_key=key)
        except PeerAuthRefused:
            raise
        except PeerError as exc:
            return failed(self.to, exc.code, exc.message, session_id=session_id, idempotency_key=key)
        consumed = response.headers.get(CONSUMED_HEADER.lower())
        result = wire.chat_result(body, to=self.to, session_id=session_id, key=key, consumed=consumed)
        if result is None:
            raise PeerError(f"{self.who} answered the message with an unknown shape")
        return await self._with_question(result)

    async def _with_question(self, result: Result) -> Result:
        """A chat's receipt for a run that asks its sender (input_required) carries no question: read from the run,
        for our sender to answer (unchanged when the run cannot be read just now)."""
        if result.state != RunState.INPUT_REQUIRED.value or result.question is not None or result.run_id is None:
            return result
        try:
            found = await self.status(result.run_id)
        except PeerError:
            return result
        if found is None or found.question is None:
            return result
        return dataclasses.replace(result, question=found.question)

    def _unknown(self, session_id: str, key: str, error: str, *, deduplicated: bool = True) -> Result:
        return unknown(self.to, error, session_id=session_id, idempotency_key=key, deduplicated=deduplicated)

    async def start(
        self,
        message: str,
        *,
        key: str,
        envelope: Envelope = PLAIN,
    ) -> Result:
        """Start a turn in the Bot Chat and return at once: a receipt with the run id (or a refusal, a failure)."""
        session_id = await self.bot_chat()
        headers = self._delivery_headers(key, envelope, wait=None)
        body = self._json(
            await self._request("POST", "/v1/runs", body={"input": message, "session_id": session_id}, headers=headers),
            "the run",
        )
        return wire.start_result(body, to=self.to, session_id=session_id, key=key, who=self.who)

    async def status(self, run_id: str) -> Run | None:
        """The run, or None when the peer does not know it (expired, restarted, never)."""
        response = await self._request("GET", f"/v1/runs/{quote(run_id)}")
        if response.status == 404:
            return None
        return wire.run_of(self._json(response, "the status request"), coded=True)

    async def stop(self, run_id: str) -> Run:
        answer = await self._request("POST", f"/v1/runs/{quote(run_id)}/stop", body={})
        return wire.run_of(self._json(answer, "the stop request"), coded=True)

    async def answer(self, run_id: str, session_id: str | None, text: str, *, key: str) -> None:
        """Our sender's answer to the question the run asks (a Backchannel gateway's `/v1/runs/{id}/answer`)."""
        headers = {"Idempotency-Key": key}
        answer = await self._request("POST", f"/v1/runs/{quote(run_id)}/answer", body={"answer": text}, headers=headers)
        self._json(answer, "the answer")

    async def events(self, run_id: str) -> AsyncIterator[Event]:
        """The run's server-sent events (JSON objects in `data:`), until the stream ends."""
        async with self._http.stream("GET", f"/v1/runs/{quote(run_id)}/events", read_timeout=None) as stream:
            if stream.status >= 400:
                raise self._error(error_of(stream.status, json_object(await stream.read())), "the event stream")
            async for data in sse.json_objects(stream.chunks()):
                yield event_of(data)
