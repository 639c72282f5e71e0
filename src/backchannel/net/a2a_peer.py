"""The client of an A2A agent as a peer: the verbs of `net.peer` (dm, run, status, stop, events) over A2A JSON-RPC.

    dm       SendMessage, blocking, bounded by the wait: the task back (terminal: the reply; not: a receipt)
    run      SendMessage with returnImmediately: a receipt with the task id as the run id
    status   GetTask          stop   CancelTask          events   SubscribeToTask (when the card says streaming)

Plain JSON-RPC on the one transport (`net.http`), not the a2a-sdk client: the transport tells a request
that was never sent from one that may have arrived (the SDK's client folds both into one error), cuts the
key out of errors, and costs no SDK import. Our idempotency key is the `messageId`. A request that may
have arrived is asked again only of an agent that deduplicates on `messageId`: one that declares the
Backchannel extension (a Backchannel gateway); of any other, the outcome is `unknown` and nothing is resent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

from .. import a2a_extension, addresses, tracing
from ..errors import (
    NoEventStream,
    NotAnAgentCard,
    PeerAuthRefused,
    PeerError,
    PeerOutcomeUnknown,
    PeerRefused,
    PeerUnreachable,
)
from ..events import Chunk, Event, event_of
from ..home.peers import Peer
from ..outcome import Consumed, Outcome, Result, Run, failed, of_run, of_state, refused, unknown
from ..states import RunState
from . import a2a_card, sse
from .a2a_card import AgentCard
from .http import HttpResponse, Naming, OverTransport, Transport, error_of
from .link import PLAIN, UNREACHABLE, Envelope, PeerAbout, key_refused

VERSION_HEADER = {"A2A-Version": "1.0"}
POLL_SECONDS = 0.1
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
REFUSING_CODES = {-32600, -32602, -32005, -32004, -32006, -32009}  # the request was wrong: resending will not help

AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"
# A2A task states in our words (a run state; where none says it, the outcome).
STATES: dict[str, RunState | Outcome] = {
    "TASK_STATE_SUBMITTED": RunState.QUEUED,
    "TASK_STATE_WORKING": RunState.RUNNING,
    "TASK_STATE_COMPLETED": RunState.COMPLETED,
    # The agent asks its sender a question: the task waits for the answer, a message naming the task (`answer`).
    "TASK_STATE_INPUT_REQUIRED": RunState.INPUT_REQUIRED,
    "TASK_STATE_FAILED": RunState.FAILED,
    "TASK_STATE_CANCELED": RunState.CANCELLED,
    "TASK_STATE_REJECTED": Outcome.REFUSED,  # by the agent's policy: no run of ours names it
}


def _text(message: Any) -> str | None:
    if not isinstance(message, dict):
        return None
    texts = [p["text"] for p in message.get("parts") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "".join(texts) if texts else None


class A2APeerClient(OverTransport):
    """One A2A agent, found by its card, spoken to as a peer with `net.peer.PeerClient`'s interface."""

    def __init__(self, peer: Peer, agent: str | None = None, *, gateway_id: str = "") -> None:
        if not peer.key:
            raise PeerError(f"peer {peer.name!r} has no key: set one with `backchannel peer add {peer.name} --url ...`")
        if agent:
            raise PeerRefused(
                f"peer {peer.name!r} is an A2A agent, one agent at its card's URL: address it as {peer.name!r}, "
                f"not {peer.name}/{agent} (add another agent's card as a peer of its own)",
                code="invalid_request",
            )
        self.peer = peer
        self.agent = None
        self.to = addresses.remote(peer.name)
        self.rpc_url = peer.a2a_url or peer.url
        self.who = f"A2A peer {peer.name!r} at {self.rpc_url}"
        self.gateway_id = gateway_id
        self.timeout = peer.timeout_seconds
        naming = Naming(
            who=self.who,
            not_sent=PeerUnreachable,
            maybe_sent=PeerOutcomeUnknown,
            unreachable=UNREACHABLE,
        )
        self._http = Transport("", peer.key, naming=naming, follow_redirects=True, timeout=self.timeout)
        self._card: AgentCard | None = None
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"A2APeerClient({self.to!r}, {self.rpc_url!r})"

    # --- the card ---------------------------------------------------------------------------------

    async def card(self, *, strict: bool = False, timeout: float | None = None) -> AgentCard | None:
        """The agent's card (read once per client); None when it cannot be read, unless `strict`."""
        if self._card is None:
            url = a2a_card.card_url(self.peer.url)
            try:
                response = await self._http.request("GET", url, timeout=min(timeout or self.timeout, self.timeout))
                data = response.json_object()
                if response.status in (401, 403):
                    raise self._http_error(response, "the agent card request")
                if response.status >= 400 or data is None:
                    kind = response.headers.get("content-type", "no content type").split(";")[0]
                    raise NotAnAgentCard(f"{url} answered HTTP {response.status} ({kind}), not an agent card")
                self._card = a2a_card.parse(data, url)
            except PeerError:
                if strict:
                    raise
                return None
        return self._card

    async def health(self) -> PeerAbout:
        card = await self.card()
        return PeerAbout(answered=True, platform="a2a", version=card.version) if card else PeerAbout()

    async def about(self, *, timeout: float = 10, strict: bool = False) -> PeerAbout:
        """The card as what the peer is (an A2A agent replays by messageId only with our extension declared)."""
        card = await self.card(strict=strict, timeout=timeout)
        if card is None:
            return PeerAbout()
        return PeerAbout(answered=True, platform="a2a", version=card.version, durable_replay=card.extension)

    async def capabilities(
        self, *, timeout: float = 10, strict: bool = False, retries: int | None = None
    ) -> dict[str, Any]:
        """What `net.peer` reads from /v1/capabilities, from the card (runs are replayed by messageId only
        where the agent deduplicates on it: a Backchannel gateway, which declares our extension)."""
        card = await self.card(strict=strict, timeout=timeout)
        if card is None:
            return {}
        replay = {"supported": card.extension, "durable": card.extension}
        return {**card.about(), "streaming": card.streaming, "features": {"runs_idempotency": replay}}

    async def dedups_chat(self) -> bool:
        card = await self.card()
        return card is not None and card.extension

    # --- JSON-RPC --------------------------------------------------------------------------------

    def _http_error(self, response: HttpResponse, what: str) -> PeerError:
        """An answer that is no JSON-RPC: our key refused (401, 403), or not an A2A agent; what its error
        envelope says (read as every client in net/ reads one) follows, without our key."""
        err = error_of(response.status, response.json_object())
        said = self._http.scrub(err.said)
        if err.status in (401, 403):
            advice = key_refused(self.peer.name, self.peer.url)
            return PeerAuthRefused(f"{self.who} refused our key (HTTP {err.status}){said}: {advice}")
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        return PeerError(
            f"{self.who} answered {what} with HTTP {err.status} ({kind}){said}, not A2A JSON-RPC: "
            "is this the URL of an A2A agent?",
            code="peer_error",
        )

    def _rpc_error(self, error: Any, what: str) -> PeerError:
        error = error if isinstance(error, dict) else {}
        number = error.get("code")
        message = self._http.scrub(str(error.get("message") or "no message"))
        ours = next(
            (
                d["metadata"]["code"]
                for d in error.get("data") or []
                if isinstance(d, dict) and isinstance(d.get("metadata"), dict) and d["metadata"].get("code")
            ),
            None,
        )
        detail = f"{self.who} refused {what} (A2A error {number}{', ' + ours if ours else ''}): {message}"
        if number in REFUSING_CODES:
            return PeerRefused(detail, code=str(ours or "invalid_request"))
        return PeerError(detail, code=str(ours or "peer_error"))

    def _body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    async def _headers(self) -> dict[str, str]:
        card = await self.card()
        if card is not None and card.extension:
            return {**VERSION_HEADER, a2a_extension.HEADER: a2a_extension.URI}
        return dict(VERSION_HEADER)

    async def _call(
        self,
        method: str,
        params: dict[str, Any],
        what: str,
        *,
        timeout: float | None = None,
        tolerate: frozenset[int] = frozenset(),
    ) -> Any:
        """The `result` of one JSON-RPC call; PeerError (PeerRefused for a wrong request) for an error, but
        for an error number in `tolerate`, which is returned (an int) instead."""
        headers = await self._headers()
        with tracing.span_of(_client_span, method) as span:
            response = await self._http.request(
                "POST", self.rpc_url, json=self._body(method, params), headers=headers, timeout=timeout
            )
            data = response.json_object()
            if span is not None:
                _told(span, data)
        if response.status in (401, 403) or data is None or not ("result" in data or "error" in data):
            raise self._http_error(response, what)
        if "error" in data:
            number = data["error"].get("code") if isinstance(data["error"], dict) else None
            if isinstance(number, int) and number in tolerate:
                return number
            raise self._rpc_error(data["error"], what)
        return data["result"]

    async def _message(
        self, message: str, *, key: str, carried: a2a_extension.HopsChain, immediately: bool, timeout: float
    ) -> dict[str, Any]:
        card = await self.card()
        sent: dict[str, Any] = {"messageId": key, "role": "ROLE_USER", "parts": [{"text": message}]}
        if card is not None and card.extension:
            sent["metadata"] = a2a_extension.metadata(carried)
        params = {"message": sent, "configuration": {"returnImmediately": immediately}}
        result = await self._call("SendMessage", params, "the message", timeout=timeout)
        task = result.get("task") if isinstance(result, dict) else None
        if isinstance(task, dict):
            return task
        reply = result.get("message") if isinstance(result, dict) else None
        if isinstance(reply, dict):  # an agent may answer with a message and no task
            return {"id": None, "status": {"state": "TASK_STATE_COMPLETED", "message": reply}}
        raise PeerError(f"{self.who} answered the message with neither a task nor a message")

    # --- verbs -----------------------------------------------------------------------------------

    async def dm(
        self,
        message: str,
        *,
        wait: float,
        key: str,
        envelope: Envelope = PLAIN,
    ) -> Result:
        """SendMessage and its task within `wait` seconds: the reply, a receipt (the task goes on), or why not.

        An agent that deduplicates on messageId is sent a blocking SendMessage bounded by the wait, and asked
        again with the same messageId when the wait runs out; any other gets returnImmediately, then GetTask
        until the task ends or the wait does (so nothing is ever sent twice)."""
        blocking = wait > 0 and await self.dedups_chat()
        carried = _carried(envelope)
        started = time.monotonic()
        try:
            task = await self._message(
                message,
                key=key,
                carried=carried,
                immediately=not blocking,
                timeout=max(wait, 0.001) if blocking else self.timeout,
            )
        except PeerOutcomeUnknown as exc:
            if not blocking:
                return self._unknown(
                    key,
                    f"{exc.message}; the task may be running there: look for it there before sending it again "
                    "(this agent does not deduplicate)",
                    deduplicated=False,
                )
            try:  # it deduplicates: the same messageId answers with the task it has
                task = await self._message(message, key=key, carried=carried, immediately=True, timeout=10)
            except PeerError:  # down now, or still not answering: what happened to the message is not known
                return self._unknown(key, f"{exc.message}, and asking again got no answer")
        except PeerRefused as exc:
            return refused(self.to, exc.code, exc.message, idempotency_key=key)
        except (PeerAuthRefused, PeerUnreachable):
            raise
        except PeerError as exc:
            return failed(self.to, exc.code, exc.message, idempotency_key=key)
        while not blocking and task.get("id") and not _paused(self._state(task)):
            left = wait - (time.monotonic() - started)
            if left <= 0:
                break
            await asyncio.sleep(min(POLL_SECONDS, left))
            found = await self._get(str(task["id"]))
            if found is None:
                break
            task = found
        return self._of_task(task, key)

    async def start(
        self,
        message: str,
        *,
        key: str,
        envelope: Envelope = PLAIN,
    ) -> Result:
        """SendMessage with returnImmediately: a receipt with the task id (or a refusal, a failure)."""
        try:
            carried = _carried(envelope)
            task = await self._message(message, key=key, carried=carried, immediately=True, timeout=self.timeout)
        except PeerRefused as exc:
            return refused(self.to, exc.code, exc.message, idempotency_key=key)
        result = self._of_task(task, key)
        if result.outcome in (Outcome.REFUSED, Outcome.FAILED):
            return result
        if not result.run_id:
            raise PeerError(f"{self.who} answered with a message, not a task: there is no run to follow")
        return dataclasses.replace(result, outcome=Outcome.RECEIPT)

    async def answer(self, run_id: str, session_id: str | None, text: str, *, key: str) -> None:
        """Our sender's answer to the task's question: a message naming the task (and its context), which the
        agent reads as the answer and goes on with the same task."""
        sent: dict[str, Any] = {"messageId": key, "role": "ROLE_USER", "parts": [{"text": text}], "taskId": run_id}
        if session_id:
            sent["contextId"] = session_id
        params = {"message": sent, "configuration": {"returnImmediately": True}}
        await self._call("SendMessage", params, "the answer", timeout=self.timeout)

    async def status(self, run_id: str) -> Run | None:
        """GetTask as a run; None for a task not found."""
        task = await self._get(run_id)
        return None if task is None else self._run(task)

    async def stop(self, run_id: str) -> Run:
        """CancelTask; a task that cannot be cancelled (it has ended) is shown as it is."""
        task = await self._call(
            "CancelTask", {"id": run_id}, "the stop request", tolerate=frozenset({TASK_NOT_FOUND, TASK_NOT_CANCELABLE})
        )
        if task == TASK_NOT_CANCELABLE:
            task = await self._get(run_id)
        if not isinstance(task, dict):
            raise PeerError(f"{self.who} does not know task {run_id!r}", code="run_not_found")
        return self._run(task)

    async def events(self, run_id: str) -> AsyncIterator[Event]:
        """SubscribeToTask's events as run events (`run.<state>`, `message.delta`) while the card says streaming;
        NoEventStream when it does not (the caller polls GetTask instead)."""
        card = await self.card()
        if card is None or not card.streaming:
            raise NoEventStream(f"{self.who} does not stream (its card says streaming: false)")
        body = self._body("SubscribeToTask", {"id": run_id})
        headers = {**await self._headers(), "Accept": "text/event-stream"}
        async with self._http.stream("POST", self.rpc_url, json=body, headers=headers, read_timeout=None) as stream:
            if stream.status >= 400:
                await stream.read()
                raise PeerError(f"{self.who} answered SubscribeToTask with HTTP {stream.status}")
            async for data in sse.json_objects(stream.chunks()):
                if "error" in data:
                    raise self._rpc_error(data["error"], "the subscription")
                for event in self._events(run_id, data.get("result")):
                    yield event

    # --- tasks as runs -----------------------------------------------------------------------------

    async def _get(self, run_id: str) -> dict[str, Any] | None:
        task = await self._call("GetTask", {"id": run_id}, "the status request", tolerate=frozenset({TASK_NOT_FOUND}))
        return task if isinstance(task, dict) else None

    @staticmethod
    def _state(task: dict[str, Any]) -> RunState | Outcome:
        """The task's state in our words (`Outcome.UNKNOWN` for one none of them names)."""
        given = task.get("status")
        status: dict[str, Any] = given if isinstance(given, dict) else {}
        return STATES.get(str(status.get("state")), Outcome.UNKNOWN)

    def _auth_required(self, task: dict[str, Any]) -> bool:
        given = task.get("status")
        return isinstance(given, dict) and given.get("state") == AUTH_REQUIRED

    def _events(self, run_id: str, result: Any) -> list[Event]:
        if not isinstance(result, dict):
            return []
        if isinstance(result.get("artifactUpdate"), dict):
            artifact = result["artifactUpdate"].get("artifact") or {}
            return [Chunk(run_id, _text(artifact) or "")]
        found = result.get("statusUpdate") or result.get("task")
        if isinstance(found, dict):
            if self._auth_required(found):
                raise PeerAuthRefused(f"{self.who} asks for other credentials (auth-required)")
            state = self._state(found)
            return [event_of({"event": f"run.{state.value}", "run_id": run_id, "status": state.value})]
        return []

    def _run(self, task: dict[str, Any]) -> Run:
        if self._auth_required(task):
            raise PeerAuthRefused(f"{self.who} asks for other credentials for task {task.get('id')!r}")
        state = self._state(task)
        status = task.get("status") or {}
        if state is RunState.QUEUED and self._code(status) == "held":  # a Backchannel gateway's held message
            state = RunState.HELD
        said = _text(status.get("message"))
        artifacts = [t for t in (_text(a) for a in task.get("artifacts") or [] if isinstance(a, dict)) if t]
        run_id, session_id = task.get("id"), task.get("contextId")
        body: dict[str, Any] = {"run_id": run_id, "status": state.value, "session_id": session_id}
        receipt, says = a2a_extension.read_consumed(task.get("metadata"))
        if says:
            body["consumed"] = receipt
        if state is RunState.INPUT_REQUIRED:
            body["question"] = {"question": said or "", **_asked(status.get("message"))}
        elif state is RunState.COMPLETED:
            body["output"] = said if said is not None else "\n".join(artifacts)
        elif of_state(state).settled:
            body["error"] = said or state.value
            body["code"] = self._code(status) or state.value
            if artifacts:
                body["output"] = "\n".join(artifacts)
        return Run(
            state,
            run_id=str(run_id) if run_id else None,
            session_id=str(session_id) if session_id else None,
            output=body.get("output"),
            error=body.get("error"),
            code=body.get("code"),
            said=body,
            question=(said or "") if state is RunState.INPUT_REQUIRED else None,
            consumed=Consumed.of(receipt),
            says_consumed=says,
        )

    @staticmethod
    def _code(status: dict[str, Any]) -> str | None:
        message = status.get("message")
        meta = message.get("metadata") if isinstance(message, dict) else None
        code = meta.get("code") if isinstance(meta, dict) else None
        return str(code) if code else None

    def _of_task(self, task: dict[str, Any], key: str) -> Result:
        run = self._run(task)
        if run.outcome.settled:
            return of_run(self.to, run, key=key)
        pending = Outcome.HELD if run.outcome is Outcome.HELD else Outcome.RECEIPT  # a state of its own: a receipt
        return dataclasses.replace(of_run(self.to, run, key=key), outcome=pending)

    def _unknown(self, key: str, error: str, *, deduplicated: bool = True) -> Result:
        return unknown(self.to, error, idempotency_key=key, deduplicated=deduplicated)


def _client_span(method: str) -> tuple[str, str, dict[str, Any]]:
    """An A2A request's client span, named by its method (its context goes out with the request)."""
    return method, "client", {"a2a.method.name": method, "rpc.system.name": "a2a"}


def _told(span: Any, data: dict[str, Any] | None) -> None:
    """The task an A2A answer names, on the client span of its request."""
    result = data.get("result") if data is not None else None
    task = result.get("task", result) if isinstance(result, dict) else None
    if isinstance(task, dict) and isinstance(task.get("id"), str):
        status = task.get("status")
        state = status.get("state") if isinstance(status, dict) else None
        context = task.get("contextId")
        tracing.annotate(
            span,
            {
                "a2a.task.id": task["id"],
                "a2a.task.state": state if isinstance(state, str) else None,
                "gen_ai.conversation.id": context if isinstance(context, str) else None,
            },
        )
    elif data is not None and isinstance(data.get("error"), dict):
        tracing.annotate(span, {"error.type": str(data["error"].get("code"))})


def _carried(envelope: Envelope) -> a2a_extension.HopsChain:
    """A message's envelope as the A2A extension carries it in the message's metadata."""
    return a2a_extension.HopsChain(
        hops=envelope.hops,
        chain=envelope.chain,
        profile=envelope.sender,
        exchange=envelope.exchange,
        deadline=envelope.deadline,
    )


def _paused(state: RunState | Outcome) -> bool:
    """Whether a task waits no longer for its agent: it ended, or it asks its sender (input-required)."""
    return state is RunState.INPUT_REQUIRED or of_state(state).settled


def _asked(message: Any) -> dict[str, Any]:
    """What a Backchannel agent says of its question in the status message (id, choices, default, expiresAt)."""
    meta = message.get("metadata") if isinstance(message, dict) else None
    ours = meta.get(a2a_extension.URI) if isinstance(meta, dict) else None
    said = ours.get("question") if isinstance(ours, dict) else None
    return dict(said) if isinstance(said, dict) else {}
