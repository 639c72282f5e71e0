"""The `hermes` engine: a turn is one turn of the Hermes agent in the mapped session of a Hermes gateway.

The Hermes agent answers with its own SOUL.md, memories, skills, tools and the session's history (its
`/chat/stream` loads them), so this engine sends only the turn's framed message; Backchannel's tools reach
that agent through the Backchannel plugin, not through this engine. Session mapping (`SessionLink`):

    a Backchannel session with a known remote id    -> that Hermes session (moved along to its tip)
    the profile's Bot Chat                          -> Hermes's `Bot Chat` (or `Bot Chat #N` tip), else made
    any other session                               -> the Hermes session of the same id, made if missing

A stop cancels the step: the request is abandoned and the text streamed so far stays with the run.
Hermes 0.19 does not stop the turn itself when its stream closes (observed): the agent runs on in its
thread and saves the message and its answer in the session when the turn ends.

That is what a turn cut by a dead or stopped Backchannel gateway relies on (`SessionLink.interrupted_copies`
set): before sending, the engine reads the Hermes session. The turn's message there, beyond the copies
Backchannel holds, is the cut attempt's: its answer, once Hermes saved it, is the reply, and nothing is
sent again (one user message, one turn over there). Seen without an answer, it is awaited up to
`timeout_seconds`, then the run fails naming the session, never sending it twice. Not seen within that
time, the cut attempt never reached Hermes (or is a longer turn still running, the one case that can run
twice): it is sent.

A Hermes that keeps runs of its own (from 0.21: `/v1/runs` replays an `Idempotency-Key`, `/v1/runs/{id}/stop`;
its capabilities say so) is asked differently, because it interrupts a turn whose stream client is gone: the turn
is started as a run keyed by Backchannel's run (`backchannel-<run id>`), and its events are read. A gateway that
dies or stops mid-turn leaves that run going; the attempt after a restart asks under the same key, Hermes answers
with the same run, and its events (or its saved status) give the answer: one turn over there, never a resend.
Only a run that ended unanswered there (cancelled, or cut by Hermes's own shutdown) is asked again, under the
next key. A stop asks Hermes to stop the run. Hermes's keepalives keep the read alive while its turn waits for
the session (another surface's turn holds it) or thinks past `timeout_seconds`.

A run that waits for its person's approval of a dangerous command (`approval.request`, the run
`waiting_for_approval`) asks Backchannel's person the same question (`SessionLink.person`: an in-turn question, its
choices Hermes's, its default `deny` at `approval_seconds`), and the answer goes back to the same run (`POST
/v1/runs/{id}/approval`), which goes on to its reply: the same turn here. Hermes keys the request (`request_id`);
the question is named by it, so the attempt after a restart, reading the run's events again, finds the same question
(answered meanwhile, or still open) and never asks twice. A run that went on without it (Hermes's own timeout denied
it) closes the question. Hermes's `clarify` tool is not on its API server (left out of its toolset, no callback), and
0.19's session chat (`/chat/stream`, the way turns reach it) has no approval: a dangerous command is refused there
without asking, the model told it waits for an approval nobody can give.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import Any

from ...errors import BackchannelError, EngineError, HermesPluginAbsent
from ...ids import BOT_CHAT_TITLE
from ...messages import Message
from ...net.hermes import HermesClient, HermesMessage, RunKeyTaken, SessionMissing
from .base import ChatPath, ModelRequest, OnDelta, PersonLine, SessionLink, TurnQuestion

RECOVER_POLL_SECONDS = 0.5
RUN_KEY_PREFIX = "backchannel-"  # the Idempotency-Key of a turn asked as a Hermes run: backchannel-<run id>[.<n>]
MAX_ASKED_AGAIN = 3  # times a turn is asked anew after Hermes ended its earlier runs unanswered
STOP_SECONDS = 5.0  # how long a stopped step waits for the far side to take the stop
LEASED_SINCE = (0, 21, 3)  # Hermes orders every surface's turns on a session (a durable lease) from this version
# Where a session is driven from, as Hermes records it, when no person's chat drives it: the API server, the
# terminal and desktop clients (their own processes: nothing to hand a turn to), scheduled and webhook turns.
NOT_CHATS = frozenset({"", "api_server", "cli", "local", "tui", "desktop", "acp", "cron", "webhook", "msgraph_webhook"})
TAG_PREFIX = "backchannel:"  # a turn Backchannel asks of Hermes is tagged `backchannel:<profile>/<session id>`
log = logging.getLogger("backchannel.engines")


def author_of(sender: str | None) -> dict[str, Any] | None:
    """Who speaks in a turn's message, as Hermes records it (its `author`): another agent, never the person; None
    for the person's own message (Hermes takes its user)."""
    if sender is None or sender.startswith("human:"):
        return None
    return {"id": f"{TAG_PREFIX}{sender}", "name": sender, "is_bot": True}


def turn_tag(profile: str, session_id: str) -> str:
    """How the turns Backchannel asks of a Hermes session are tagged (Hermes's X-Hermes-Session-Key, which the
    plugin hands back with each tool call): the session here, stable across turns (Hermes also scopes its memory
    providers by it), so a call is bound to the turn running in that session, and to nothing else."""
    return f"{TAG_PREFIX}{profile}/{session_id}"


class HermesEngine:
    """Runs turns in the sessions of one Hermes gateway (optionally one of its profiles, `/p/<profile>/`)."""

    name = "hermes"
    uses_context = False  # Hermes keeps the history and the persona itself
    keeps_session = True
    offers_tools = False  # the Hermes agent has its own tools, and ours through the plugin

    def __init__(
        self,
        *,
        profile: str,
        base_url: str,
        api_key: str | None,
        api_key_env: str | None,
        hermes_profile: str | None = None,
        timeout_seconds: float = 120.0,
        approval_seconds: float = 240.0,
    ) -> None:
        self.profile = profile
        self.approval_seconds = approval_seconds
        self.url = base_url.rstrip("/") + (f"/p/{hermes_profile}" if hermes_profile else "")
        self.where = f"Hermes gateway {self.url!r} for profile {profile!r}"
        self.recover_seconds = timeout_seconds if timeout_seconds > 0 else 120.0
        self._missing_key: str | None = None
        self._client: HermesClient | None = None
        self._runs: bool | None = None  # whether the gateway keeps runs (asked once)
        if not api_key:
            variable = api_key_env or "model.api_key_env"
            self._missing_key = (
                f"{self.where} needs its API server key: set {variable} in the home's .env or the environment"
            )
        else:
            self._client = HermesClient(
                base_url,
                api_key,
                who=self.where,
                error=EngineError,
                timeout=timeout_seconds,
                profile=hermes_profile,
            )

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message:
        if self._client is None:
            raise EngineError(self._missing_key or f"{self.where} is not configured")
        link = request.session
        if link is None:
            raise EngineError(f"{self.where}: a hermes turn needs the session it runs in")
        incoming = next((m for m in reversed(request.messages) if m.role == "user"), None)
        if incoming is None:
            raise EngineError(f"{self.where}: nothing to send in session {link.id!r}")
        for attempt in range(2):
            if link.remote_id is None:
                link.remote_id = await self._map(link)
            try:
                if link.chat is not None and await self._client.source(link.remote_id) not in NOT_CHATS:
                    answer = await self._through_chat(link, link.chat, incoming.content)
                    if answer is not None:
                        if on_delta is not None:
                            on_delta(answer)
                        return Message(role="assistant", content=answer)
                if link.run_id is not None and await self._keeps_runs():
                    return await self._as_run(link, link.remote_id, incoming.content, on_delta)
                if link.interrupted_copies is not None:
                    recovered = await self._recover(link, incoming.content, link.interrupted_copies)
                    link.interrupted_copies = None
                    if recovered is not None:
                        if on_delta is not None:
                            on_delta(recovered)
                        return Message(role="assistant", content=recovered)
                reply = await self._client.chat(
                    link.remote_id,
                    incoming.content,
                    on_text=on_delta,
                    session_key=turn_tag(self.profile, link.id),
                    author=author_of(link.sender),
                )
            except SessionMissing:  # gone over there (deleted, or a new Hermes home): map it again, once
                if attempt:
                    raise EngineError(f"{self.where} has no session {link.remote_id!r}") from None
                link.remote_id = None
                continue
            link.remote_id = reply.session_id
            return Message(role="assistant", content=reply.content, usage=reply.usage)
        raise AssertionError("unreachable")

    async def _keeps_runs(self) -> bool:
        assert self._client is not None
        if self._runs is None:
            self._runs = await self._client.runs_replay()
        return self._runs

    async def _as_run(self, link: SessionLink, remote_id: str, message: str, on_delta: OnDelta | None) -> Message:
        """The turn as a Hermes run keyed by this run: started, or found again when an earlier attempt started it."""
        assert self._client is not None and link.run_id is not None
        for asked in range(MAX_ASKED_AGAIN + 1):
            key = f"{RUN_KEY_PREFIX}{link.run_id}" + (f".{asked}" if asked else "")
            try:
                run_id, replayed = await self._client.start_run(
                    remote_id,
                    message,
                    key=key,
                    session_key=turn_tag(self.profile, link.id),
                    author=author_of(link.sender),
                )
            except RunKeyTaken:
                raise EngineError(
                    f"{self.where}: an earlier attempt of this turn reached Hermes under key {key!r} with another"
                    f" request (the session moved?); not sent again (read session {remote_id!r} there)"
                ) from None
            link.remote_run = run_id  # its tools' calls say it: they are this turn's
            approvals = Approvals(self._client, link.person, run_id, self.approval_seconds, self.where)
            try:
                end = await self._client.follow_run(
                    run_id, on_text=on_delta, on_approval=approvals.seen if link.person is not None else None
                )
            except asyncio.CancelledError:
                if self._stopping(link):
                    await self._shielded(self._client.stop_run(run_id), f"Hermes run {run_id} was not stopped there")
                raise
            finally:
                link.remote_run = None
                await approvals.close()
            if end.status == "completed":
                return Message(role="assistant", content=end.output or "", usage=end.usage)
            if replayed and end.status in ("cancelled", "interrupted"):
                continue  # that run was an earlier attempt's, ended unanswered over there: this one asks anew
            said = f": {end.error}" if end.error else ""
            raise EngineError(f"{self.where}: Hermes run {run_id!r} in session {remote_id!r} {end.status}{said}")
        raise EngineError(
            f"{self.where}: Hermes ended {MAX_ASKED_AGAIN + 1} runs of this turn unanswered in session {remote_id!r}"
        )

    @staticmethod
    def _stopping(link: SessionLink) -> bool:
        """Whether the step is cancelled by a stop of its run (not by the gateway going away)."""
        return link.stopped is not None and link.stopped()

    async def _shielded(self, done: Awaitable[Any], failed: str) -> None:
        """What a stopped step still asks of the far side, shielded from the cancellation that carries the stop."""
        try:
            await asyncio.wait_for(asyncio.shield(done), STOP_SECONDS)
        except (BackchannelError, TimeoutError) as exc:
            log.warning("%s: %s: %s", self.where, failed, exc)

    async def _through_chat(self, link: SessionLink, chat: ChatPath, message: str) -> str | None:
        """The turn run by the Hermes gateway's own chat pipeline (the plugin there hands it in behind the person's
        turn); None: reach the session through the API server. Without the plugin, a Hermes that orders every
        surface's turns itself (a lease in its state.db, since 0.21.3) is asked through its API server all the
        same, the reply then missing from the person's chat; an older one, which would run the turn beside the
        person's, is not asked at all."""
        assert link.remote_id is not None
        try:
            return await chat.deliver(link.remote_id, message)
        except asyncio.CancelledError:
            if self._stopping(link):
                await self._shielded(chat.withdraw(), f"the turn handed to {link.remote_id!r} was not withdrawn")
            raise
        except HermesPluginAbsent as exc:
            assert self._client is not None
            if await self._client.version() >= LEASED_SINCE:
                log.warning("%s: %s; asked through its API server instead", self.where, exc.message)
                return None
            raise

    async def _recover(self, link: SessionLink, message: str, copies_here: int) -> str | None:
        """The answer Hermes saved for a cut attempt of this turn; None when that attempt never reached it."""
        assert self._client is not None and link.remote_id is not None
        deadline = time.monotonic() + self.recover_seconds
        while True:
            link.remote_id, transcript = await self._client.messages(link.remote_id)
            seen, answer = answer_to(transcript, message, copies_here)
            if answer is not None:
                return answer
            if time.monotonic() >= deadline:
                if seen:
                    raise EngineError(
                        f"{self.where}: this turn's message reached Hermes session {link.remote_id!r} before the"
                        f" gateway stopped, and no answer appeared there within {self.recover_seconds:g}s; not"
                        " sent again (read the session there)"
                    )
                return None
            await asyncio.sleep(RECOVER_POLL_SECONDS)

    async def _map(self, link: SessionLink) -> str:
        assert self._client is not None
        if (link.title or "").strip() == BOT_CHAT_TITLE:
            return await self._client.bot_chat(link.id)
        try:
            return await self._client.tip(link.id)
        except SessionMissing:
            return await self._client.create(link.id, title=link.title)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


class Approvals:
    """The approvals one Hermes run waits for, each asked of the run's person as it comes (`seen`), the answer sent
    back to the run; closed with the step."""

    def __init__(
        self, client: HermesClient, person: PersonLine | None, run_id: str, expires_in: float, where: str
    ) -> None:
        self.client = client
        self.person = person
        self.run_id = run_id
        self.expires_in = expires_in if expires_in > 0 else None
        self.where = where
        self.asking: dict[str, asyncio.Task[None]] = {}  # by the request's key: each asked once
        self.done: set[str] = set()
        self.after: set[asyncio.Task[None]] = set()  # questions closed because the run went on without them

    def seen(self, approval: dict[str, Any] | None) -> None:
        if self.person is None:
            return
        if approval is None:  # the run went on: a question still asked is moot
            for key, task in list(self.asking.items()):
                if not task.done():
                    task.cancel()
                    withdrawn = asyncio.ensure_future(self.person.withdraw(key, by="hermes"))
                    self.after.add(withdrawn)
                del self.asking[key]
                self.done.add(key)
            return
        request = approval.get("request_id")
        key = f"{self.run_id}/{request}" if isinstance(request, str) and request else f"{self.run_id}/approval"
        if key in self.asking or key in self.done:
            return
        request_id = request if isinstance(request, str) else None
        self.asking[key] = asyncio.ensure_future(self._ask(key, approval, request_id))

    async def _ask(self, key: str, approval: dict[str, Any], request_id: str | None) -> None:
        assert self.person is not None
        offered = approval.get("choices")
        choices = tuple(c for c in offered if isinstance(c, str)) if isinstance(offered, list) else ()
        choices = choices or ("once", "deny")
        choice = await self.person.ask(
            TurnQuestion(
                key=key,
                question=approval_question(approval, choices),
                choices=choices,
                default=DENY if DENY in choices else choices[-1],
                expires_in=self.expires_in,
            )
        )
        try:
            taken = await self.client.approve(self.run_id, choice, request_id=request_id)
        except BackchannelError as exc:
            log.warning(
                "%s: the answer %r to Hermes run %s's approval was not taken: %s",
                self.where,
                choice,
                self.run_id,
                exc.message,
            )
            return
        if not taken:
            log.info("%s: Hermes run %s went on before the answer %r came", self.where, self.run_id, choice)

    async def close(self) -> None:
        """The step ends (or is cancelled): what is still asked is left (a stop closes it; a gateway going away
        leaves it open for the next attempt), what was withdrawn is finished."""
        for task in self.asking.values():
            task.cancel()
        for task in [*self.asking.values(), *self.after]:
            with contextlib.suppress(asyncio.CancelledError, BackchannelError):
                await asyncio.shield(task)
        self.asking.clear()


DENY = "deny"


CHOICES_SAID = {
    "once": "run it this once",
    "session": "allow such commands for the rest of this Hermes session",
    "always": "allow such commands from now on",
    "deny": "refuse it",
}


def approval_question(approval: dict[str, Any], choices: Sequence[str]) -> str:
    """The person's question for a Hermes approval: the command, why Hermes stopped it, what each choice does."""
    command = approval.get("command")
    why = approval.get("description")
    text = "Hermes asks to run a command it flags as dangerous"
    if isinstance(why, str) and why:
        text += f" ({why})"
    if isinstance(command, str) and command:
        text += f":\n{command}"
    said = "; ".join(f"{c}: {CHOICES_SAID[c]}" for c in choices if c in CHOICES_SAID)
    return f"{text}\n{said}" if said else text


def answer_to(transcript: Sequence[HermesMessage], message: str, copies_here: int) -> tuple[bool, str | None]:
    """Whether `message` is in the transcript more often than the `copies_here` Backchannel holds, and the
    final answer after its last copy (the first assistant text without tool calls before the next user
    message), if Hermes saved one."""
    copies = [i for i, m in enumerate(transcript) if m.role == "user" and m.content == message]
    if len(copies) <= copies_here:
        return False, None
    for later in transcript[copies[-1] + 1 :]:
        if later.role == "user":
            break
        if later.role == "assistant" and later.content and not later.calls_tools:
            return True, later.content
    return True, None
