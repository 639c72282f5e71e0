"""The Hermes plugin as Hermes loads it (its register(ctx) and tool handlers), without Hermes itself."""

from __future__ import annotations

import json
import socketserver
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

import backchannel_hermes
from backchannel.agent.tools.messaging import SEND_OPTIONS, TOOLS
from backchannel.core.delivery import mentions
from conftest import GatewayThread, api_key, free_port


class PluginContext:
    """What the plugin uses of Hermes's PluginContext."""

    profile_name = "research"

    def __init__(self) -> None:
        self.tools: dict[str, dict[str, Any]] = {}
        self.hooks: dict[str, list[Any]] = {}

    def register_tool(self, **kw: Any) -> None:
        self.tools[kw["name"]] = kw

    def register_hook(self, name: str, callback: Any) -> None:
        self.hooks.setdefault(name, []).append(callback)


def registered() -> dict[str, dict[str, Any]]:
    ctx = PluginContext()
    backchannel_hermes.register(ctx)
    return ctx.tools


def test_it_registers_the_six_tools_with_backchannels_own_schemas() -> None:
    tools = registered()
    assert sorted(tools) == [
        "cancel_message",
        "check_message",
        "list_sessions",
        "notify_when_idle",
        "send_to_peer",
        "send_to_session",
    ]
    ours = {t.spec.name: t.spec for t in TOOLS}
    for name, kw in tools.items():
        assert kw["toolset"] == "backchannel"
        assert kw["schema"]["name"] == name and kw["schema"]["description"] == ours[name].description
        full = ours[name].parameters
        assert kw["schema"]["parameters"] == {  # what a model needs; the send options only when asked for
            **full,
            "properties": {k: v for k, v in full["properties"].items() if k not in SEND_OPTIONS},
        }


def test_the_send_options_are_offered_when_hermes_env_asks_for_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKCHANNEL_SEND_OPTIONS", "wait_seconds, mode, deadline")
    ours = {t.spec.name: t.spec for t in TOOLS}
    tools = registered()
    assert tools["send_to_session"]["schema"]["parameters"] == ours["send_to_session"].parameters
    # run_id (an answer to a peer's question) whatever the options: the plugin cannot read the profile's allow list
    offered = set(tools["send_to_peer"]["schema"]["parameters"]["properties"])
    assert offered == {"target", "message", "wait_seconds", "deadline", "run_id"}


def test_an_unreachable_or_unset_gateway_is_a_tool_error_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    send = registered()["send_to_session"]["handler"]
    monkeypatch.delenv("BACKCHANNEL_API_KEY", raising=False)
    unset = json.loads(send({"session_id": "builds", "message": "hi"}, session_id="s1", task_id="t"))
    assert unset["error"]["code"] == "unavailable" and "BACKCHANNEL_API_KEY" in unset["error"]["message"]
    assert unset["result"] == "failed"  # nothing was sent
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("BACKCHANNEL_URL", url)
    monkeypatch.setenv("BACKCHANNEL_API_KEY", "some-key")
    down = json.loads(send({"session_id": "builds", "message": "hi"}, session_id="s1", task_id="t"))
    assert down["error"]["code"] == "backchannel_unreachable" and url in down["error"]["message"]
    assert down["result"] == "failed"


class _Dropping(socketserver.BaseRequestHandler):
    """Reads one request to its end and closes the connection without a word."""

    server: _DroppingServer

    def handle(self) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.request.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        while len(body) < length:
            body += self.request.recv(65536)
        self.server.seen.append(head)


class _DroppingServer(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Dropping)
        self.seen: list[bytes] = []


def test_a_call_the_gateway_read_and_never_answered_is_an_unknown_outcome_sent_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _DroppingServer() as server:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        try:
            monkeypatch.setenv("BACKCHANNEL_URL", f"http://127.0.0.1:{server.server_address[1]}")
            monkeypatch.setenv("BACKCHANNEL_API_KEY", "the-key")
            send = registered()["send_to_session"]["handler"]
            got = json.loads(send({"session_id": "builds", "message": "hi"}, session_id="s1", task_id="t"))
        finally:
            server.shutdown()
    assert (got["result"], got["error"]["code"]) == ("unknown", "outcome_unknown")
    assert "do not resend it" in got["error"]["message"] and "the-key" not in got["error"]["message"]
    assert len(server.seen) == 1
    assert b"POST /p/research/api/sessions/s1/tools/send_to_session " in server.seen[0]


def new_session(gateway: GatewayThread) -> str:
    """The id of a new session of the default profile."""
    import httpx

    r = httpx.post(f"{gateway.url}/api/sessions", json={}, headers=gateway.headers())
    return str(r.json()["session"]["id"])


def test_the_gateways_refusals_come_back_as_tool_results(
    gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BACKCHANNEL_URL", gateway.url)
    monkeypatch.setenv("BACKCHANNEL_API_KEY", api_key(gateway.root))
    monkeypatch.setenv("BACKCHANNEL_PROFILE", "default")
    tools = registered()
    # An echo profile's session that does not exist: named, not created.
    missing = json.loads(tools["list_sessions"]["handler"]({}, session_id="nope", task_id="t"))
    assert missing["error"]["code"] == "session_not_found" and "'nope'" in missing["error"]["message"]
    assert missing["result"] == "refused"
    sent = json.loads(tools["send_to_session"]["handler"]({"session_id": "x", "message": "hi"}, session_id="nope"))
    assert (sent["result"], sent["error"]["code"]) == ("refused", "session_not_found")
    listed = json.loads(tools["list_sessions"]["handler"]({}, session_id=new_session(gateway), task_id="t"))
    assert listed["result"] == "delivered" and listed["sessions"] == []
    monkeypatch.setenv("BACKCHANNEL_API_KEY", "wrong-key")
    wrong = json.loads(tools["list_sessions"]["handler"]({}, session_id="nope", task_id="t"))
    assert wrong["error"]["code"] == "invalid_api_key" and wrong["result"] == "failed"


def test_a_send_from_a_session_with_no_turn_in_progress_is_checked_like_any(
    gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    monkeypatch.setenv("BACKCHANNEL_URL", gateway.url)
    monkeypatch.setenv("BACKCHANNEL_API_KEY", api_key(gateway.root))
    monkeypatch.setenv("BACKCHANNEL_PROFILE", "default")
    sid = httpx.post(f"{gateway.url}/api/sessions", json={}, headers=gateway.headers()).json()["session"]["id"]
    send = registered()["send_to_session"]["handler"]
    refused = json.loads(send({"session_id": "default", "message": "hi"}, session_id=sid, task_id="t"))
    assert refused["result"] == "refused" and refused["error"]["code"] == "not_allowed"
    entries = httpx.get(f"{gateway.url}/v1/ledger", headers=gateway.headers()).json()["data"]
    assert [(e["sender"], e["state"], e["hops"]) for e in entries] == [(f"default/{sid}", "refused:not_allowed", 1)]


def test_send_to_peer_goes_through_the_tools_route_under_the_senders_rules(
    gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    from conftest import run_cli

    monkeypatch.setenv("BACKCHANNEL_URL", gateway.url)
    monkeypatch.setenv("BACKCHANNEL_API_KEY", api_key(gateway.root))
    monkeypatch.setenv("BACKCHANNEL_PROFILE", "default")
    added = run_cli("peer", "add", "mirror", "--url", gateway.url, "--key", api_key(gateway.root))  # itself, as a peer
    assert added.exit_code == 0, added.stderr
    sid = httpx.post(f"{gateway.url}/api/sessions", json={}, headers=gateway.headers()).json()["session"]["id"]
    send = registered()["send_to_peer"]["handler"]

    unknown = json.loads(send({"target": "nowhere", "message": "hi"}, session_id=sid, task_id="t"))
    assert "nowhere" in json.dumps(unknown) and (unknown.get("error") or {}).get("code"), unknown
    refused = json.loads(send({"target": "mirror", "message": "hi"}, session_id=sid, task_id="t"))
    assert refused["result"] == "refused" and refused["error"]["code"] == "not_allowed", refused

    cfg = gateway.root / "profiles" / "default" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("allow: []", 'allow: ["peer:mirror"]'))
    answered = json.loads(send({"target": "mirror", "message": "over there?"}, session_id=sid, task_id="t"))
    assert answered["result"] == "delivered" and "over there?" in answered["reply"], answered
    entries = httpx.get(f"{gateway.url}/v1/ledger", headers=gateway.headers()).json()["data"]
    assert (f"default/{sid}", "refused:not_allowed") in [(e["sender"], e["state"]) for e in entries]


@dataclass
class Chat:
    """What the hook reads of Hermes's MessageEvent, GatewayRunner and SessionStore for one platform chat."""

    session_id: str
    authorized: bool = True
    text: str = ""
    internal: bool = False
    source: object = "telegram:chat-1"

    @property
    def event(self) -> Chat:
        return self

    def _is_user_authorized(self, source: object) -> bool:
        return self.authorized

    def get_or_create_session(self, source: object) -> Any:
        return SimpleNamespace(session_id=self.session_id)


def dispatch(chat: Chat, text: str) -> Any:
    ctx = PluginContext()
    backchannel_hermes.register(ctx)
    (hook,) = ctx.hooks["pre_gateway_dispatch"]
    chat.text = text
    return hook(event=chat, gateway=chat, session_store=chat, telemetry_schema_version=1)


def test_a_platform_messages_mentions_are_answered_through_backchannel_and_the_text_rewritten(
    gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hermes's API server does not fire pre_gateway_dispatch (only platform adapters do), so the hook is
    called here as Hermes calls it, with stand-ins for its event, gateway and session store, against a real
    Backchannel gateway."""
    import httpx

    from conftest import run_cli

    monkeypatch.setenv("BACKCHANNEL_URL", gateway.url)
    monkeypatch.setenv("BACKCHANNEL_API_KEY", api_key(gateway.root))
    monkeypatch.setenv("BACKCHANNEL_PROFILE", "default")
    assert run_cli("profile", "create", "builds").exit_code == 0
    cfg = gateway.root / "profiles" / "default" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("allow: []", 'allow: ["builds"]'))
    sid = httpx.post(f"{gateway.url}/api/sessions", json={}, headers=gateway.headers()).json()["session"]["id"]
    chat = Chat(sid)

    rewritten = dispatch(chat, "@session:builds what is the build status?")
    assert rewritten["action"] == "rewrite", rewritten
    text = rewritten["text"]
    assert text.startswith(f"what is the build status?\n\n{mentions.MARK}\n"), text
    assert text.endswith(mentions.END_MARK), text
    assert "[Message from session builds/" in text and "via a reply to your mention @session:builds" in text, text
    assert text.count("build status") >= 2, text
    refused = dispatch(chat, "and @session:secret, you?")["text"]
    assert "@session:secret was refused (" in refused, refused

    assert dispatch(chat, "no mentions here") is None
    entries = len(httpx.get(f"{gateway.url}/v1/ledger", headers=gateway.headers()).json()["data"])
    chat.authorized = False  # the hook runs before Hermes's own auth: a stranger's mentions are not sent
    assert dispatch(chat, "@session:builds hello?") is None
    assert len(httpx.get(f"{gateway.url}/v1/ledger", headers=gateway.headers()).json()["data"]) == entries
    ledger = httpx.get(f"{gateway.url}/v1/ledger", headers=gateway.headers()).json()["data"]
    assert [(e["sender"], e["target"].split("/")[0], e["state"]) for e in ledger if e["state"] == "completed"] == [
        (f"default/{sid}", "builds", "completed")
    ]


def test_the_mentions_route_refuses_bad_input_and_changes_nothing(gateway: GatewayThread) -> None:
    import httpx

    sid = httpx.post(f"{gateway.url}/api/sessions", json={}, headers=gateway.headers()).json()["session"]["id"]
    url = f"{gateway.url}/p/default/api/sessions/{sid}/mentions"
    for body, code in (
        ({}, "missing_message"),
        ({"message": "hi @session:x", "wait_seconds": -1}, "invalid_arguments"),
    ):
        answer = httpx.post(url, json=body, headers=gateway.headers())
        assert answer.status_code == 400 and answer.json()["error"]["code"] == code, answer.text
    plain = httpx.post(url, json={"message": "nothing to answer"}, headers=gateway.headers()).json()
    assert plain["mentions"] == 0 and plain["message"] == "nothing to answer"
    assert httpx.get(f"{gateway.url}/v1/ledger", headers=gateway.headers()).json()["data"] == []
