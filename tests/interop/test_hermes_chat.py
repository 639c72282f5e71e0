"""A person's weixin chat in Hermes beside Backchannel (issue 39: Hermes as its users run it), on each Hermes version.

One Backchannel gateway; one Hermes gateway with the weixin stand-in (hermes_plugins/loopchat, driven by Hermes's
own gateway runner) and the Backchannel plugin; the hermes-engine profile `builds` mapped to that Hermes, whose
target session is the person's weixin chat session, addressed by its Hermes id (imported on first use).

    the person --weixin--> Hermes (session agent:main:weixin:dm:1001) <--/chat-- Backchannel (builds/<hermes id>)
                               \\--send_to_session (plugin)--> Backchannel --> research (echo)
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hermes_gateway import HOME_CHAT, HermesGateway, HermesPython, each_hermes

from conftest import GatewayThread, api_key, run_cli
from scripted_model import ScriptedModel

pytestmark = pytest.mark.interop
pytest_generate_tests = each_hermes  # hermes_python: each test on each Hermes version
KEY = "interop-hermes-chat-key-0123456789"
CHAT = HOME_CHAT  # the person's weixin chat


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@dataclass
class Builds:
    """The scripted model of builds' Hermes. A turn's last user message holds one command line (the person's
    first message ever also carries Hermes's first-contact note, which is ignored):

        person: slow <text>                 the person's question, answered after `person_delay` seconds
        bc: <text>                          a Backchannel message, answered after `bc_delay` seconds
        person: ask research <message>      send_to_session("research", message, wait_seconds=`wait`) after
                                            `person_delay` seconds (` | ` in the message: a new line)
        anything else (a wake-up)           relayed: `builds relays: <the whole text>`

    An answer is `builds answers <line>`; after a tool result, `builds got: <result>`. Each model call is kept
    with its start and end, and how many ran at once."""

    person_delay: float = 0.0
    bc_delay: float = 0.0
    wait: float = 5.0
    calls: list[dict[str, Any]] = field(default_factory=list)
    active: int = 0
    most_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Any:
        record: dict[str, Any] = {"body": body, "started": time.monotonic()}
        with self.lock:
            self.calls.append(record)
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            return self._decide(body)
        finally:
            record["ended"] = time.monotonic()
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
            time.sleep(self.person_delay)
            message = line.removeprefix("person: ask research ").replace(" | ", "\n")
            return call("send_to_session", session_id="research", message=message, wait_seconds=self.wait)
        return f"builds relays: {text}"

    def turn_inputs(self) -> list[str]:
        """The new user message of each model call that started a turn (not the calls after a tool result)."""
        return [text_of(c["body"]["messages"][-1]["content"]) for c in self.calls if is_turn(c["body"])]


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
        offered = {t["function"]["name"] for t in model.calls[0]["body"].get("tools", [])}
        assert {"send_to_session", "check_message"} <= offered, sorted(offered)  # by name: tool search is off

        # The person's chat session is one Backchannel can address by its Hermes id (imported on first use).
        listed = httpx.get(f"{hermes.url}/api/sessions?limit=50", headers=hermes.headers).json()["data"]
        assert [(s["id"], s["source"]) for s in listed] == [(session, "weixin")], listed
