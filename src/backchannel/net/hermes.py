"""A client of a Hermes gateway's API server: its sessions (list, create, the live tip) and one chat turn.

Speaks HERMES-DIALECT.md sections 2.3, 2.7 and 5.1 (Hermes 0.19 and later) through the one transport
(`net.http`); every failure becomes the error class the caller names (the hermes engine: `EngineError`),
with a message that says who was asked and what went wrong.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import BackchannelError
from ..ids import BOT_CHAT_TITLE
from ..messages import Usage
from .http import HttpResponse, Naming, Transport, error_of, quote
from .sse import parse

# After a compression Hermes 0.19 lists a Bot Chat under its tip's title: `Bot Chat #2`, `#3`, ...
_LINEAGE_TITLE = re.compile(r"^Bot Chat #\d+$")
_TITLE_TAKEN = re.compile(r"Title already in use by session (\S+)")
SESSION_KEY_HEADER = "X-Hermes-Session-Key"  # a turn's tool calls see it (HERMES_SESSION_KEY): whose turn it is
MAX_LISTED = 2000  # sessions read when looking for a title (10 pages of Hermes's maximum)
RUN_ENDS = frozenset({"completed", "failed", "cancelled", "interrupted"})  # a Hermes run's last states
RUN_POLL_SECONDS = 0.5

OnText = Callable[[str], None]
# A run's approval: its `approval.request` event (or its status's `approval`) when it starts waiting for its person,
# None once it goes on (answered, or Hermes's own approval timeout denied it).
OnApproval = Callable[["dict[str, Any] | None"], None]
# Events after which a run that waited for its approval is going on: its answer was taken, or it did without.
GOING_ON = frozenset({"approval.responded", "tool.completed", "tool.failed", "message.delta"})
APPROVAL_GONE = frozenset({"approval_not_pending", "approval_not_active"})  # an approval the run no longer waits on


@dataclass(frozen=True)
class HermesSession:
    """A session as a Hermes gateway lists it."""

    id: str
    title: str | None
    last_active: float | None = None

    @property
    def is_bot_chat(self) -> bool:
        title = (self.title or "").strip()
        return title == BOT_CHAT_TITLE or bool(_LINEAGE_TITLE.match(title))


@dataclass(frozen=True)
class ChatReply:
    """What one turn in a Hermes session answered, and the session's id after it (compression rotates it)."""

    content: str
    session_id: str
    usage: Usage | None = None  # what Hermes says the turn's model calls read and wrote (run.completed)


@dataclass(frozen=True)
class HermesMessage:
    """One message of a Hermes session's transcript, as `/messages` lists it (text content only)."""

    role: str
    content: str
    calls_tools: bool = False


@dataclass(frozen=True)
class RunEnd:
    """How a Hermes run ended (`/v1/runs/{id}`, its terminal event): `completed` with its output, or not."""

    status: str  # completed, failed, cancelled, interrupted
    output: str | None = None
    error: str | None = None
    usage: Usage | None = None


class SessionMissing(Exception):
    """The Hermes gateway has no session by that id (404 before any turn ran): safe to map it again."""


class RunKeyTaken(Exception):
    """Hermes holds a run under this idempotency key for a different request (409 idempotency_key_conflict)."""


class HermesClient:
    """One Hermes API server (optionally one of its profiles, under /p/<profile>/) reached with one key."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        who: str,
        error: type[BackchannelError],
        timeout: float = 120.0,
        profile: str | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + (f"/p/{quote(profile)}" if profile else "")
        self.who = who
        self.error = error
        self.timeout = timeout
        self._http = Transport(
            self.url,
            key,
            naming=Naming(who=who, not_sent=error, maybe_sent=error),
            follow_redirects=False,  # DESIGN 5: never send the key after a redirect
            timeout=min(timeout, 30.0) if timeout > 0 else 30.0,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- sessions ------------------------------------------------------------------------------

    async def sessions(self, *, limit: int = MAX_LISTED) -> list[HermesSession]:
        """The sessions the gateway lists (most recently active first), page by page."""
        found: list[HermesSession] = []
        offset = 0
        while len(found) < limit:
            path = f"/api/sessions?limit=200&offset={offset}"
            body = self._object(await self._http.request("GET", path), "GET", path)
            data = body.get("data")
            if not isinstance(data, list):
                raise self.error(f"{self.who} answered GET {path} without a list of sessions")
            for item in data:
                if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]:
                    title = item.get("title")
                    active = item.get("last_active")
                    found.append(
                        HermesSession(
                            item["id"],
                            title if isinstance(title, str) else None,
                            float(active) if isinstance(active, int | float) else None,
                        )
                    )
            if not data or not body.get("has_more"):
                break
            offset += len(data)
        return found[:limit]

    async def create(self, session_id: str, *, title: str | None) -> str:
        """Creates session `session_id` (the id kept when it exists already); returns its id.

        Hermes titles are unique: a taken `Bot Chat` is answered with the session holding it, another taken
        title makes the session without one."""
        body: dict[str, Any] = {"id": session_id}
        if title:
            body["title"] = title
        resp = await self._http.request("POST", "/api/sessions", json=body)
        if resp.status == 409:
            return session_id  # session_exists: ours from an earlier turn
        if resp.status == 400:
            err = error_of(resp.status, resp.json_object())
            taken = _TITLE_TAKEN.search(err.message)
            if err.code == "invalid_title" and taken and title == BOT_CHAT_TITLE:
                return await self.tip(taken.group(1))  # the gateway's own Bot Chat
            if err.code == "invalid_title" and taken:
                return await self.create(session_id, title=None)  # another session holds the title
        created = self._object(resp, "POST", "/api/sessions")
        session = created.get("session")
        got = session.get("id") if isinstance(session, dict) else created.get("id")
        return got if isinstance(got, str) and got else session_id

    async def source(self, session_id: str) -> str:
        """Where a session is driven from, as Hermes records it (`api_server`, `cli`, or a chat platform such as
        `weixin`, `telegram`); empty when it does not say."""
        path = f"/api/sessions/{quote(session_id)}"
        resp = await self._http.request("GET", path)
        if resp.status == 404:
            raise SessionMissing(session_id)
        session = self._object(resp, "GET", path).get("session")
        source = session.get("source") if isinstance(session, dict) else None
        return source if isinstance(source, str) else ""

    async def version(self) -> tuple[int, ...]:
        """The gateway's Hermes version as numbers (`/health`: 0.19.0 is (0, 19, 0)); () when it does not say."""
        resp = await self._http.request("GET", "/health")
        said = resp.json_object() if resp.status < 400 else None
        version = said.get("version") if said is not None else None
        numbers: list[int] = []
        for part in str(version or "").split("."):
            digits = "".join(itertools.takewhile(str.isdigit, part))
            if not digits:
                break
            numbers.append(int(digits))
        return tuple(numbers)

    async def tip(self, session_id: str) -> str:
        """The live id of a session: `/messages` follows a compression chain forward to its tip."""
        path = f"/api/sessions/{quote(session_id)}/messages"
        resp = await self._http.request("GET", path)
        if resp.status == 404:
            raise SessionMissing(session_id)
        tip = self._object(resp, "GET", path).get("session_id")
        return tip if isinstance(tip, str) and tip else session_id

    async def messages(self, session_id: str) -> tuple[str, list[HermesMessage]]:
        """The session's live id (its tip) and its transcript there, oldest first."""
        path = f"/api/sessions/{quote(session_id)}/messages"
        resp = await self._http.request("GET", path)
        if resp.status == 404:
            raise SessionMissing(session_id)
        body = self._object(resp, "GET", path)
        data = body.get("data")
        if not isinstance(data, list):
            raise self.error(f"{self.who} answered GET {path} without a list of messages")
        tip = body.get("session_id")
        return (tip if isinstance(tip, str) and tip else session_id), [
            HermesMessage(str(item.get("role")), _text(item.get("content")), bool(item.get("tool_calls")))
            for item in data
            if isinstance(item, dict)
        ]

    async def bot_chat(self, new_id: str) -> str:
        """The id of the gateway's Bot Chat (the exact title first, then a `Bot Chat #N` tip), created as
        `new_id` when there is none."""
        listed = [s for s in await self.sessions() if s.is_bot_chat]
        exact = [s for s in listed if (s.title or "").strip() == BOT_CHAT_TITLE]
        if exact or listed:
            return (exact or listed)[0].id
        return await self.create(new_id, title=BOT_CHAT_TITLE)

    # --- one turn ------------------------------------------------------------------------------

    async def chat(
        self,
        session_id: str,
        message: str,
        *,
        on_text: OnText | None = None,
        session_key: str | None = None,
        author: dict[str, Any] | None = None,
    ) -> ChatReply:
        """One agent turn in `session_id` through `/chat/stream`: text as it streams, the final answer.
        `session_key`: Hermes's `X-Hermes-Session-Key`, which the turn's tool calls carry (who they come from);
        `author`: who speaks (`{id, name, is_bot}`: Hermes from 0.22 records it; 0.19 reads nothing of it)."""
        path = f"/api/sessions/{quote(session_id)}/chat/stream"
        tip = session_id
        headers = {SESSION_KEY_HEADER: session_key} if session_key else None
        sent: dict[str, Any] = {"message": message}
        if author is not None:
            sent["author"] = author
        async with self._http.stream(
            "POST", path, json=sent, headers=headers, read_timeout=self.timeout or None
        ) as resp:
            if resp.status == 404:
                body = HttpResponse(resp.status, resp.headers, await resp.read())
                if error_of(404, body.json_object()).code == "session_not_found":
                    raise SessionMissing(session_id)
            if resp.status >= 400:
                self._object(HttpResponse(resp.status, resp.headers, await resp.read()), "POST", path)
            kind = resp.headers.get("content-type", "")
            if "text/event-stream" not in kind:
                snippet = (await resp.read())[:200].decode("utf-8", "replace")
                raise self.error(
                    f"{self.who} answered POST {path} with {kind or 'no content type'}, not an event stream"
                    f" (body: {snippet!r})"
                )
            tip = resp.headers.get("x-hermes-session-id") or tip
            content: str | None = None
            usage: Usage | None = None
            streamed: list[str] = []
            async for event in parse(resp.chunks()):
                data = _payload(event.data)
                if data is None:
                    continue
                moved = data.get("session_id")  # every event names the id asked for; the end ones the tip
                if event.event in ("assistant.completed", "run.completed") and isinstance(moved, str) and moved:
                    tip = moved
                if event.event == "run.completed":
                    usage = Usage.of(data.get("usage")) or usage
                if event.event == "assistant.delta" and isinstance(data.get("delta"), str):
                    streamed.append(data["delta"])
                    if on_text is not None:
                        on_text(data["delta"])
                elif event.event == "assistant.completed":
                    content = data.get("content") if isinstance(data.get("content"), str) else "".join(streamed)
                elif event.event == "error":
                    raise self.error(f"{self.who} failed the turn in session {session_id!r}: {data.get('message')}")
                elif event.event == "done":
                    break
        if content is None:
            raise self.error(f"{self.who} ended the turn in session {session_id!r} without an answer")
        return ChatReply(content, tip, usage)

    # --- one turn as a run (Hermes 0.21 and later: durable, not tied to the client's connection) --------------

    async def runs_replay(self) -> bool:
        """Whether the gateway runs a turn as a run of its own that a client may leave and find again: `/v1/runs`
        replays an `Idempotency-Key` and is stopped by `/v1/runs/{id}/stop` (its `/v1/capabilities` say so)."""
        resp = await self._http.request("GET", "/v1/capabilities")
        said = resp.json_object() if resp.status < 400 else None
        features = said.get("features") if said is not None else None
        if not isinstance(features, dict):
            return False
        replay = features.get("runs_idempotency")
        return isinstance(replay, dict) and replay.get("supported") is True and features.get("run_stop") is True

    async def start_run(
        self,
        session_id: str,
        message: str,
        *,
        key: str,
        session_key: str | None = None,
        author: dict[str, Any] | None = None,
    ) -> tuple[str, bool]:
        """A turn in `session_id` started as a run under idempotency `key`: its run id, and whether Hermes had
        started it already for an earlier request under that key (replayed). The same key and body always
        name the same run, however often it is asked."""
        headers = {"Idempotency-Key": key}
        if session_key:
            headers[SESSION_KEY_HEADER] = session_key
        sent: dict[str, Any] = {"input": message, "session_id": session_id}
        if author is not None:
            sent["author"] = author
        resp = await self._http.request("POST", "/v1/runs", json=sent, headers=headers)
        if resp.status == 409 and error_of(409, resp.json_object()).code == "idempotency_key_conflict":
            raise RunKeyTaken(key)
        body = self._object(resp, "POST", "/v1/runs")
        run_id = body.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            raise self.error(f"{self.who} answered POST /v1/runs without a run id")
        return run_id, body.get("replayed") is True

    async def follow_run(
        self, run_id: str, *, on_text: OnText | None = None, on_approval: OnApproval | None = None
    ) -> RunEnd:
        """The run's text as it streams (`/v1/runs/{id}/events`, from its start) until it ends; a run whose events
        are gone (kept a few minutes) is read from its status until it ends. Keepalives keep the read alive (a
        run waiting for its approval sends them too). `on_approval` is told when the run waits for its person's
        approval (`approval.request`) and when it goes on."""
        path = f"/v1/runs/{quote(run_id)}/events"
        async with self._http.stream("GET", path, read_timeout=self.timeout or None) as resp:
            if resp.status == 404:
                await resp.read()
                return await self._poll_run(run_id, on_approval)
            if resp.status >= 400:
                self._object(HttpResponse(resp.status, resp.headers, await resp.read()), "GET", path)
            async for event in parse(resp.chunks()):
                data = _payload(event.data)
                name = data.get("event") if data is not None else None
                if data is None or not isinstance(name, str):
                    continue
                if on_approval is not None and name == "approval.request":
                    on_approval(data)
                elif on_approval is not None and (name in GOING_ON or name.startswith("run.")):
                    on_approval(None)
                if name == "message.delta" and isinstance(data.get("delta"), str) and on_text is not None:
                    on_text(data["delta"])
                elif name.startswith("run.") and name[4:] in RUN_ENDS:
                    return _run_end(name[4:], data)
        return await self._poll_run(run_id, on_approval)  # the stream closed before the run's end was seen

    async def _poll_run(self, run_id: str, on_approval: OnApproval | None = None) -> RunEnd:
        path = f"/v1/runs/{quote(run_id)}"
        while True:
            status = self._object(await self._http.request("GET", path), "GET", path)
            if status.get("status") in RUN_ENDS:
                if on_approval is not None:
                    on_approval(None)
                return _run_end(str(status["status"]), status)
            if on_approval is not None:
                waits = status.get("status") == "waiting_for_approval" and isinstance(status.get("approval"), dict)
                on_approval(status["approval"] if waits else None)
            await asyncio.sleep(RUN_POLL_SECONDS)

    async def approve(self, run_id: str, choice: str, *, request_id: str | None = None) -> bool:
        """The person's answer to the run's pending approval (`once`, `session`, `always` or `deny`); False when
        the run no longer waits for it (answered already, or Hermes's own timeout denied it)."""
        path = f"/v1/runs/{quote(run_id)}/approval"
        body: dict[str, Any] = {"choice": choice}
        if request_id:
            body["request_id"] = request_id
        resp = await self._http.request("POST", path, json=body)
        if resp.status == 409 and error_of(409, resp.json_object()).code in APPROVAL_GONE:
            return False
        self._object(resp, "POST", path)
        return True

    async def approvals(self) -> bool:
        """Whether the gateway's runs wait for their person's approval of a dangerous command and take it by
        `POST /v1/runs/{id}/approval` (its capabilities: `approval_events`, `run_approval_response`)."""
        resp = await self._http.request("GET", "/v1/capabilities")
        said = resp.json_object() if resp.status < 400 else None
        features = said.get("features") if said is not None else None
        return (
            isinstance(features, dict)
            and features.get("approval_events") is True
            and features.get("run_approval_response") is True
        )

    async def stop_run(self, run_id: str) -> None:
        """Asks Hermes to interrupt the run (it keeps what the turn saved so far)."""
        path = f"/v1/runs/{quote(run_id)}/stop"
        self._object(await self._http.request("POST", path, json={}), "POST", path)

    def _object(self, resp: HttpResponse, method: str, path: str) -> dict[str, Any]:
        if resp.status >= 400:
            err = error_of(resp.status, resp.json_object())
            code = f" ({err.code})" if err.code else ""
            raise self.error(f"{self.who} answered HTTP {resp.status}{code} to {method} {path}{err.said}")
        body = resp.json_object()
        if body is None:
            raise self.error(
                f"{self.who} answered {method} {path} with something that is not a JSON object"
                f" (body: {resp.text[:200]!r})"
            )
        return body


def _run_end(status: str, said: dict[str, Any]) -> RunEnd:
    output, error = said.get("output"), said.get("error")
    return RunEnd(
        status,
        output if isinstance(output, str) else None,
        error if isinstance(error, str) else None,
        Usage.of(said.get("usage")),
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _payload(raw: str) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
