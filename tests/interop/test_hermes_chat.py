"""A person's weixin chat in Hermes beside Backchannel (issue 39: Hermes as its users run it), on each Hermes version.

One Backchannel gateway; one Hermes gateway with the weixin stand-in (hermes_plugins/loopchat, driven by Hermes's
own gateway runner) and the Backchannel plugin; the hermes-engine profile `builds` mapped to that Hermes, whose
target session is the person's weixin chat session, addressed by its Hermes id (imported on first use).

    the person --weixin--> Hermes (session agent:main:weixin:dm:1001) <--/chat-- Backchannel (builds/<hermes id>)
                               \\--send_to_session (plugin)--> Backchannel --> research (echo)

A turn of Backchannel's for that session is handed to the plugin, which gives it to the chat behind the person's
turn (items 1-2); a late reply to the person's chat turn reaches the chat the same way (item 3).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hermes_gateway import HOME_CHAT, HermesGateway, HermesPython, each_hermes
from test_hermes_sessions import allow, call, ledger, send, text_of

from conftest import GatewayThread, api_key, run_cli
from polling import eventually
from scripted_model import ScriptedModel

pytestmark = pytest.mark.interop
pytest_generate_tests = each_hermes  # hermes_python: each test on each Hermes version
KEY = "interop-hermes-chat-key-0123456789"
CHAT = HOME_CHAT  # the person's weixin chat


@dataclass
class Builds:
    """The scripted model of builds' Hermes. A turn's last user message holds one command line (the person's
    first message ever also carries Hermes's first-contact note, which is ignored):

        person: slow <text>                 the person's question, answered after `person_delay` seconds
        bc: <text>                          a Backchannel message, answered after `bc_delay` seconds
        person: ask research <message>      send_to_session("research", message, wait_seconds=`wait`) once
                                            `gate` is open (` | ` in the message: a new line)
        anything else (a wake-up)           relayed: `builds relays: <the whole text>`

    An answer is `builds answers <line>`; after a tool result, `builds got: <result>`. Each request is kept, and
    how many model calls ran at once."""

    person_delay: float = 0.0
    bc_delay: float = 0.0
    wait: float = 5.0
    gate: threading.Event = field(default_factory=threading.Event)  # open unless a test closes it
    calls: list[dict[str, Any]] = field(default_factory=list)  # the request bodies
    active: int = 0
    most_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.gate.set()

    def __call__(self, body: dict[str, Any]) -> Any:
        with self.lock:
            self.calls.append(body)
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            return self._decide(body)
        finally:
            with self.lock:
                self.active -= 1

    def _decide(self, body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return f"builds got: {text_of(last['content'])}"
        text = text_of(last["content"])
        line = command(text)
        if line.startswith("person: slow "):
            time.sleep(self.person_delay)
            return f"builds answers {line}"
        if line.startswith("bc: "):
            time.sleep(self.bc_delay)
            return f"builds answers {line}"
        if line.startswith("person: ask research "):
            self.gate.wait(60)
            message = line.removeprefix("person: ask research ").replace(" | ", "\n")
            return call("send_to_session", session_id="research", message=message, wait_seconds=self.wait)
        return f"builds relays: {text}"

    def turn_inputs(self) -> list[str]:
        """The new user message of each model call that started a turn (not the calls after a tool result)."""
        return [text_of(body["messages"][-1]["content"]) for body in self.calls if is_turn(body)]


def is_turn(body: dict[str, Any]) -> bool:
    return bool(body["messages"]) and body["messages"][-1]["role"] == "user"


def command(text: str) -> str:
    """The command line of a user message: the first line naming a command, else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    found = [ln for ln in lines if ln.startswith(("person: ", "bc: "))]
    return found[0] if found else (lines[-1] if lines else "")


@contextlib.contextmanager
def builds_with_weixin(
    model: Builds, backchannel: GatewayThread, hermes_python: HermesPython
) -> Iterator[HermesGateway]:
    """builds' Hermes gateway with the person's weixin chat and the Backchannel plugin (as profile builds), and
    the Backchannel profile builds mapped to it."""
    env = (
        f"BACKCHANNEL_URL={backchannel.url}\nBACKCHANNEL_API_KEY={api_key(backchannel.root)}\n"
        "BACKCHANNEL_PROFILE=builds\n"
    )
    with (
        ScriptedModel(model) as scripted,
        HermesGateway(
            scripted.base_url,
            api_key=KEY,
            python=hermes_python,
            plugins=["backchannel"],
            chat=True,
            files={"SOUL.md": "You are builds.", ".env": env},
        ) as hermes,
    ):
        made = run_cli(
            "profile", "create", "builds", "--engine", "hermes", "--base-url", hermes.url,
            "--api-key-env", "HERMES_KEY",
        )  # fmt: skip
        assert made.exit_code == 0, made.stderr
        yield hermes


def echo_profile(name: str) -> None:
    made = run_cli("profile", "create", name)
    assert made.exit_code == 0, made.stderr


def wait_for(what: str, check: Callable[[], Any], within: float, detail: Callable[[], Any] = lambda: "") -> Any:
    return eventually(check, within=within, what=lambda _: f"{what}: {detail()}", every=0.1)


@pytest.fixture
def key_in_env(initialised: Path) -> Path:
    with (initialised / ".env").open("a") as fh:
        fh.write(f"HERMES_KEY={KEY}\n")
    return initialised


def test_a_persons_weixin_message_is_a_turn_of_hermes_whose_reply_goes_back_to_the_chat(
    key_in_env: Path, gateway: GatewayThread, hermes_python: HermesPython
) -> None:
    """The stand-in as Hermes's runner drives a platform: the session (source weixin), the reply through the
    adapter's send, the transcript in state.db; the plugin's tools offered to the chat's turn by name."""
    model = Builds()
    with builds_with_weixin(model, gateway, hermes_python) as hermes:
        assert hermes.chat is not None
        taken = hermes.chat.person_says(CHAT, "person: slow what is the build status?")
        assert taken["accepted"] in (True, None), taken  # 0.22 marks what its runner took; 0.19 has no mark
        replies = hermes.chat.wait_sent(CHAT, lambda texts: bool(texts), within=60)
        assert replies == ["builds answers person: slow what is the build status?"], replies

        session = hermes.chat.session_id(CHAT)
        said = [(m.role, m.content) for m in hermes.transcript(session)]
        assert said == [
            ("user", "person: slow what is the build status?"),
            ("assistant", "builds answers person: slow what is the build status?"),
        ], said
        offered = {t["function"]["name"] for t in model.calls[0].get("tools", [])}
        assert {"send_to_session", "check_message"} <= offered, sorted(offered)  # by name: tool search is off

        # The person's chat session is one Backchannel can address by its Hermes id (imported on first use).
        listed = httpx.get(f"{hermes.url}/api/sessions?limit=50", headers=hermes.headers).json()["data"]
        assert [(s["id"], s["source"]) for s in listed] == [(session, "weixin")], listed


def test_a_backchannel_message_waits_for_the_persons_turn_on_their_chat_session(
    key_in_env: Path, gateway: GatewayThread, hermes_python: HermesPython
) -> None:
    """Two writers on one Hermes session: the person's weixin turn (3 s) and, a second into it, a Backchannel
    message to the same session. One turn at a time, each with its own message: Hermes's transcript
    alternates, no model call holds the other turn's message, Backchannel's reply answers its own message,
    and Backchannel says its message was queued (landed: queued) rather than started beside the person's."""
    model = Builds(person_delay=3.0)
    with builds_with_weixin(model, gateway, hermes_python) as hermes:
        assert hermes.chat is not None
        hermes.chat.person_says(CHAT, "person: slow is the release blocked?")
        session = hermes.chat.session_id(CHAT)
        wait_for("the person's turn at the model", lambda: model.calls, 30, hermes.log)
        time.sleep(1.0)
        assert model.active == 1, "the person's turn ended too soon to be a writer beside Backchannel's"

        sent = send(f"builds/{session}", "bc: what changed since yesterday?")
        hermes.chat.wait_sent(CHAT, lambda texts: any("is the release blocked?" in t for t in texts), within=60)

        wrong = []
        rows = [(m.role, m.content) for m in hermes.transcript(session) if m.role in ("user", "assistant")]
        roles = [role for role, _ in rows]
        if any(a == b == "user" for a, b in itertools.pairwise(roles)):
            wrong.append(f"Hermes's transcript has two user messages in a row: {rows}")
        if any("release blocked" in c and "what changed" in c for _, c in rows):
            wrong.append(f"Hermes's transcript has the two messages merged: {rows}")
        for seen in model.turn_inputs():
            if "release blocked" in seen and "what changed" in seen:
                wrong.append(f"a model call holds both turns' messages as its own: {seen!r}")
        for body in model.calls:  # each turn's model call sees the other's message only as answered history
            messages = body["messages"]
            pending = [
                text_of(m["content"]) for m in messages[messages_since_answer(messages) :] if m["role"] == "user"
            ]
            if any("release blocked" in p for p in pending) and any("what changed" in p for p in pending):
                wrong.append(f"a model call holds both unanswered messages: {pending}")
        reply = str(sent.get("reply") or "")
        if "what changed since yesterday?" not in reply or "release blocked" in reply:
            wrong.append(f"Backchannel's run was answered {reply!r}, not the answer to its own message")
        if sent.get("landed") != "queued":
            wrong.append(f"Backchannel said landed: {sent.get('landed')} while the person's turn ran")
        assert not wrong, "\n".join(wrong)
        assert model.most_active == 1


def messages_since_answer(messages: list[dict[str, Any]]) -> int:
    """The index after the last assistant message: what the model is asked to answer now."""
    answered = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return answered[-1] + 1 if answered else 0


def test_the_persons_own_chat_turn_sends_as_itself_whatever_backchannel_turn_runs_on_the_session(
    key_in_env: Path, gateway: GatewayThread, hermes_python: HermesPython
) -> None:
    """research (echo) asks builds' weixin session (by its Hermes id) and waits: a Backchannel turn on that
    session, hop 1, research waiting on it. Meanwhile the person's own chat turn there calls
    send_to_session("research", wait 5 s). That call is the person's chat turn's, not the Backchannel turn's:
    hop 1 of an exchange of its own, delivered (research answers it later), never refused would_deadlock as
    hop 2 of research's chain.

    Reachable on both versions: the person's turn starts first; the Backchannel turn is live in Backchannel
    from the moment research's send is admitted, on 0.19 beside the person's turn in Hermes, on 0.22 waiting
    for Hermes's lease on the session, which the person's turn holds."""
    model = Builds(bc_delay=5.0, wait=5.0)
    with builds_with_weixin(model, gateway, hermes_python) as hermes:
        assert hermes.chat is not None
        echo_profile("research")
        hermes.chat.person_says(CHAT, "person: slow hello")  # the chat's session, before anyone addresses it
        hermes.chat.wait_sent(CHAT, lambda texts: bool(texts), within=60)
        session = hermes.chat.session_id(CHAT)
        allow(key_in_env, "research", f"builds/{session}")
        allow(key_in_env, "builds", "research")

        model.gate.clear()  # the person's turn calls send_to_session once research's message to it is in
        hermes.chat.person_says(CHAT, "person: ask research hello from the person's chat")
        wait_for("the person's turn at the model", lambda: model.active, 30, hermes.log)
        research = threading.Thread(  # research's turn waits on builds' session until it answers
            target=lambda: send("research", f"/send builds/{session} bc: please check the build"),
            name="research-asks-builds",
        )
        research.start()
        try:

            def research_to_builds() -> dict[str, Any] | None:
                return next((e for e in ledger(gateway) if e["message"] == "bc: please check the build"), None)

            wait_for("research's message to the person's chat session", research_to_builds, 30, hermes.log)
            with contextlib.suppress(AssertionError):  # its turn taken up here (still queued: the gate opens anyway)
                wait_for("its turn", lambda: (research_to_builds() or {}).get("state") == "running", 3)
            model.gate.set()
            entry = wait_for(
                "the person's send_to_session in Backchannel's ledger",
                lambda: next((e for e in ledger(gateway) if "from the person's chat" in e["message"]), None),
                60,
                lambda: ledger(gateway),
            )
            assert entry["sender"] == f"builds/{session}" and entry["target"].startswith("research"), entry
            assert entry["hops"] == 1, f"the person's own call was charged to another turn: {entry}"
            assert not entry["state"].startswith("refused"), entry
            done = wait_for(
                "research's answer to the person's message",
                lambda: next(
                    (
                        e
                        for e in ledger(gateway)
                        if "from the person's chat" in e["message"] and e["state"] == "completed"
                    ),
                    None,
                ),
                90,
                lambda: ledger(gateway),
            )
            assert done["hops"] == 1, done
        finally:
            research.join(120)


def test_a_late_reply_to_the_persons_chat_turn_reaches_the_persons_chat(
    key_in_env: Path, gateway: GatewayThread, hermes_python: HermesPython
) -> None:
    """The person's chat turn asks research (slow: 8 s) with a short wait (2 s): the tool gets a receipt and
    the turn ends. research's answer comes later, as a wake-up of the person's chat session; it must reach the
    person's weixin chat (the adapter's send), not only Backchannel and Hermes's transcript."""
    model = Builds(wait=2.0)
    with builds_with_weixin(model, gateway, hermes_python) as hermes:
        assert hermes.chat is not None
        echo_profile("research")
        hermes.chat.person_says(CHAT, "person: slow hello")
        hermes.chat.wait_sent(CHAT, lambda texts: bool(texts), within=60)
        session = hermes.chat.session_id(CHAT)
        allow(key_in_env, "builds", "research")

        hermes.chat.person_says(CHAT, "person: ask research /sleep 8 | the late answer")
        receipt = hermes.chat.wait_sent(CHAT, lambda texts: any("builds got:" in t for t in texts), within=60)
        assert not any("research (echo): the late answer" in t for t in receipt), receipt  # not answered in time
        entry = wait_for(
            "research's late answer in Backchannel",
            lambda: next(
                (e for e in ledger(gateway) if e["state"] == "completed" and "late answer" in e["message"]), None
            ),
            60,
            lambda: ledger(gateway),
        )
        assert entry["sender"] == f"builds/{session}", entry
        try:
            hermes.chat.wait_sent(
                CHAT, lambda texts: any("research (echo): the late answer" in t for t in texts), within=20
            )
        except AssertionError as missing:  # say where the answer went instead
            there = [(m.role, m.content) for m in hermes.transcript(session) if "the late answer" in m.content]
            raise AssertionError(f"{missing}\nHermes's transcript of the chat's session has it as: {there}") from None
