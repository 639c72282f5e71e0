"""A Hermes session a person drives from a chat platform has one writer (issue 39 items 1-2): Backchannel hands its
turns for such a session to the plugin in that Hermes gateway, through `GET/POST …/v1/handoffs`, and binds a
hosted tool call to its own turn only when the call comes from that turn.

Against a fake Hermes API server (its sessions' `source` says which are driven from weixin) and a real gateway;
the test plays the plugin's part over HTTP with the key `backchannel hermes connect` made for that Hermes home.
Real Hermes gateways with a chat platform run the same in tests/interop.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayThread, run_cli
from fake_hermes import FakeHermes
from gateway_http import gateway_with, set_messaging
from test_hermes_engine import KEY, hermes_profile
from test_steer import shown, until

CHAT = "20261206_101010_ab12cd"  # the person's weixin chat session in Hermes


@pytest.fixture
def hermes(initialised: Path) -> Iterator[FakeHermes]:
    with FakeHermes(key=KEY) as fake:
        fake.sessions[CHAT] = {"title": None, "messages": [], "source": "weixin"}
        hermes_profile(initialised, fake.url)
        yield fake


def plugin_key(root: Path, tmp_path: Path) -> str:
    """The key `hermes connect` writes into the Hermes home for the plugin (an agent key of `research`)."""
    home = tmp_path / "hermes-home"
    home.mkdir()
    (home / "config.yaml").write_text("model: {provider: custom}\n")
    done = run_cli("hermes", "connect", "research", "--hermes-home", str(home), "--json")
    assert done.exit_code == 0, done.stdout + done.stderr
    return config.read_env(home)["BACKCHANNEL_API_KEY"]


class Plugin:
    """The plugin's side of the handoffs, played over HTTP with its key."""

    def __init__(self, gw: GatewayThread, key: str) -> None:
        self.http = httpx.Client(
            base_url=gw.url + "/p/research", headers={"Authorization": f"Bearer {key}"}, timeout=40, trust_env=False
        )

    def take(self, wait: float = 10) -> list[dict[str, Any]]:
        r = self.http.get("/v1/handoffs", params={"taker": "hermes-1", "wait": wait})
        assert r.status_code == 200, r.text
        data: list[dict[str, Any]] = r.json()["data"]
        return data

    def say(self, run_id: str, **fields: Any) -> httpx.Response:
        return self.http.post(f"/v1/handoffs/{run_id}", json=fields)


@pytest.fixture
def plugin(initialised: Path, hermes: FakeHermes, tmp_path: Path) -> Iterator[Plugin]:
    """research's plugin with a gateway running, there: it has asked for work once (and was given none)."""
    key = plugin_key(initialised, tmp_path)
    with gateway_with(initialised) as gw:
        there = Plugin(gw, key)
        assert there.take(wait=0) == []
        yield there


def gw_ledger(gw: GatewayThread) -> list[dict[str, Any]]:
    r = httpx.get(gw.url + "/v1/ledger", params={"limit": 100}, headers=gw.headers(), timeout=10)
    assert r.status_code == 200, r.text
    data: list[dict[str, Any]] = r.json()["data"]
    return data


def send(address: str, text: str, *args: str) -> dict[str, Any]:
    done = run_cli("send", address, text, "--json", *args)
    out: dict[str, Any] = json.loads(done.stdout)
    out["exit_code"] = done.exit_code
    return out


def test_a_turn_for_a_chat_driven_session_is_handed_to_the_plugin_never_run_beside_the_persons(
    hermes: FakeHermes, plugin: Plugin
) -> None:
    sent = send(f"research/{CHAT}", "is the build green?", "--wait", "0")
    assert sent["exit_code"] == 0 and sent["landed"] == "started", sent
    (handoff,) = plugin.take()
    assert handoff["run_id"] == sent["run_id"] and handoff["remote_session"] == CHAT
    assert handoff["message"] == "is the build green?"  # the person's own words are not framed
    assert plugin.say(sent["run_id"], state="waiting", detail="behind the person's turn").status_code == 200
    assert shown(sent["run_id"])["landed"] == "queued"  # it waits behind the person's turn, and says so
    assert plugin.take(wait=0) == [handoff | {"state": "waiting"}]  # still held by this plugin
    assert plugin.say(sent["run_id"], state="answered", reply="yes, green").status_code == 200
    done = until(sent["run_id"], "completed")
    assert done["reply"] == "yes, green"
    assert hermes.chats() == []  # never asked of Hermes's API server, beside the person's chat
    again = plugin.say(sent["run_id"], state="answered", reply="a second answer")
    assert again.status_code == 200 and again.json()["state"] == "answered"
    assert until(sent["run_id"], "completed")["reply"] == "yes, green"  # settled once


def test_a_stopped_run_withdraws_its_handoff_unless_the_plugin_began_handing_it_in(
    hermes: FakeHermes, plugin: Plugin
) -> None:
    early = send(f"research/{CHAT}", "build it", "--wait", "0")
    assert shown(early["run_id"])["state"] == "running"
    assert len(plugin.take()) == 1  # taken, not yet handed in (the plugin says so before it hands one in)
    assert plugin.say(early["run_id"], state="withdrawn").status_code == 400  # the run's word, not the plugin's
    assert "cancelled" in run_cli("runs", "stop", early["run_id"]).stdout
    refused = plugin.say(early["run_id"], state="running")  # what the plugin says before handing it in
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "handoff_withdrawn", refused.text
    assert plugin.take(wait=0) == []  # nothing of it is offered again

    late = send(f"research/{CHAT}", "build it again", "--wait", "0")
    (handed,) = plugin.take()
    assert plugin.say(handed["run_id"], state="running").status_code == 200  # begun: Hermes has it
    assert "cancelled" in run_cli("runs", "stop", late["run_id"]).stdout
    told = plugin.say(handed["run_id"], state="answered", reply="built")  # Hermes ran it; the chat has the reply
    assert told.status_code == 200 and told.json()["state"] == "answered", told.text
    assert hermes.chats() == []


def test_a_session_no_chat_drives_after_all_is_asked_through_the_api_server(hermes: FakeHermes, plugin: Plugin) -> None:
    sent = send(f"research/{CHAT}", "hello", "--wait", "0")
    (handoff,) = plugin.take()
    plugin.say(handoff["run_id"], state="not_a_chat")
    assert until(sent["run_id"], "completed")["reply"] == "fake hermes heard: hello"
    assert [s for s, _ in hermes.chats()] == [CHAT]


@pytest.mark.parametrize(("version", "asked"), [("0.19.0", False), ("0.22.2.post1", True)])
def test_without_the_plugin_only_a_hermes_that_orders_turns_itself_is_asked(
    initialised: Path, hermes: FakeHermes, version: str, asked: bool
) -> None:
    """Hermes 0.19's API server would run the turn beside the person's: the run fails, saying what to do. A Hermes
    with its own lease on each session (0.21.3 on) is asked through its API server all the same."""
    hermes.version = version
    with gateway_with(initialised):
        sent = send(f"research/{CHAT}", "anyone there?")
        if asked:
            assert sent["exit_code"] == 0 and sent["reply"] == "fake hermes heard: anyone there?", sent
        else:
            assert sent["exit_code"] == 1 and sent["error"]["code"] == "hermes_plugin_absent", sent
            assert "backchannel hermes connect research" in sent["error"]["message"]
            assert hermes.chats() == []


def test_the_plugins_key_handles_only_its_own_profiles_handoffs(
    initialised: Path, hermes: FakeHermes, tmp_path: Path
) -> None:
    key = plugin_key(initialised, tmp_path)
    assert run_cli("profile", "create", "builds").exit_code == 0
    with gateway_with(initialised) as gw:
        other = httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {key}"}, timeout=10)
        r = other.get("/p/builds/v1/handoffs", params={"taker": "x", "wait": 0})
        assert r.status_code == 403 and r.json()["error"]["code"] == "agent_key_scope", r.text
        plugin = Plugin(gw, key)
        assert plugin.say("run_nobody", state="answered", reply="x").status_code == 404
        plugin.take(wait=0)
        sent = send(f"research/{CHAT}", "hello", "--wait", "0")
        (handoff,) = plugin.take()
        bad = plugin.say(handoff["run_id"], state="done")
        assert bad.status_code == 400 and "state" in bad.json()["error"]["message"]
        assert shown(sent["run_id"])["state"] == "running"  # a bad word changes nothing
        assert plugin.http.get("/v1/handoffs", params={"taker": "no spaces"}).status_code == 400


def test_a_hosted_call_is_a_step_of_a_turn_only_when_it_comes_from_that_turn(
    initialised: Path, hermes: FakeHermes, tmp_path: Path
) -> None:
    """While Backchannel's turn runs in a Hermes session, a call tagged as that turn is its step (its exchange);
    the person's own chat turn calling the same tool there is a new exchange of the session's own, whatever
    Backchannel turn runs beside it (it was refused would_deadlock at hop 2 before)."""
    key = plugin_key(initialised, tmp_path)
    assert run_cli("profile", "create", "builds").exit_code == 0
    set_messaging(initialised, "research", allow=["builds"])
    hermes.mode = "held"
    hermes.sessions["api_1"] = {"title": "work", "messages": []}  # a session only Backchannel drives
    with gateway_with(initialised) as gw:
        busy = send("research/api_1", "a long job", "--wait", "0")
        assert hermes.turn_started.wait(10)
        (tag,) = {k for k in hermes.session_keys if k}
        assert tag == f"backchannel:research/{busy['session_id']}"  # the turn's tag, which its calls carry
        tools = httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)

        def call(origin: dict[str, Any]) -> dict[str, Any]:
            r = tools.post(
                "/p/research/api/sessions/api_1/tools/send_to_session",
                json={"arguments": {"session_id": "builds", "message": f"from {origin}"}, "origin": origin},
            )
            assert r.status_code == 200, r.text
            body: dict[str, Any] = r.json()
            return body

        step = call({"tag": tag, "surface": "api_server"})
        assert step["run_id"] == busy["run_id"] and step["result"]["result"] == "delivered", step
        own = call({"surface": "weixin"})
        assert own["run_id"] is None and own["result"]["result"] == "delivered", own
        ledger = {e["message"]: e for e in gw_ledger(gw)}
        stepped = ledger[f"from {{'tag': '{tag}', 'surface': 'api_server'}}"]
        person = ledger["from {'surface': 'weixin'}"]
        assert stepped["origin"] == busy["run_id"] and stepped["hops"] == 1  # a step of the person's exchange
        assert person["origin"] not in (None, busy["run_id"]) and person["hops"] == 1  # an exchange of its own
        hermes.release.set()
        until(busy["run_id"], "completed")


def test_another_agents_message_is_told_to_hermes_as_a_bots_never_as_the_persons(
    initialised: Path, hermes: FakeHermes
) -> None:
    """Hermes from 0.22 records who speaks (`author`): another agent's message is a bot's; the person's own has
    none of ours (Hermes takes its user)."""
    assert run_cli("profile", "create", "lead").exit_code == 0
    set_messaging(initialised, "lead", allow=["research/*"])
    hermes.sessions["api_1"] = {"title": "work", "messages": []}
    with gateway_with(initialised):
        assert send("research/api_1", "from the person")["exit_code"] == 0
        asked = send("lead", "/send research/api_1 from lead")
        assert asked["exit_code"] == 0, asked
    bodies = [b for m, p, b in hermes.requests if p.endswith("/chat/stream")]
    assert "author" not in bodies[0]
    author = bodies[1]["author"]
    assert author["is_bot"] is True and author["id"].startswith("backchannel:lead/"), author
