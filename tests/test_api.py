"""The HTTP API in-process (Starlette TestClient): auth, sessions, chat, the delivery envelope, runs, stop, SSE.

Contract: DESIGN.md sections 4, 5 and 7 and HERMES-DIALECT.md 2.1-2.7 and 4.1. The default home runs the
echo engine, whose command language makes slow (`/sleep N`), failing (`/fail x`) and tool-calling turns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.testclient import TestClient

from backchannel.api import web
from backchannel.api.server import build
from backchannel.core.delivery import outbound
from backchannel.home import config
from conftest import api_key, run_cli
from polling import eventually

TERMINAL = ("completed", "failed", "cancelled", "expired")
ENVELOPE_KEYS = [
    "object",
    "result",
    "status",
    "status_detail",
    "send_id",
    "delivery_id",
    "idempotency_key",
    "replayed",
    "peer",
    "profile",
    "session_id",
    "queue_position",
    "attempts",
    "queued_seconds",
    "waited_seconds",
    "busy",
    "retryable",
    "retry_after_seconds",
    "reply",
    "error",
    "reason",
    "detail",
    "at",
]
SHORT_WAIT = {"X-Hermes-Wait-Seconds": "0.2"}


class _LazyGateway:
    """The gateway app, built on its first ASGI call, i.e. in the TestClient's event-loop thread.

    `build()` called in the test's thread opens state.db there, and the TestClient serves the app in
    another thread (see test_build_then_testclient_serves_requests, which uses build() directly).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.app is None:
            self.app, _runtime = build(self.root, grace=2.0)
        await self.app(scope, receive, send)


class Api:
    """A TestClient that sends the API key unless told not to, with helpers for the common calls."""

    def __init__(self, client: TestClient, key: str) -> None:
        self.client = client
        self.key = key

    def request(
        self, method: str, path: str, *, auth: bool = True, headers: dict[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        sent = {"Authorization": f"Bearer {self.key}"} if auth else {}
        return self.client.request(method, path, headers={**sent, **(headers or {})}, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def sse(self, method: str, path: str, **kw: Any) -> tuple[httpx.Response, list[tuple[str | None, dict[str, Any]]]]:
        headers = {"Authorization": f"Bearer {self.key}", **kw.pop("headers", {})}
        with self.client.stream(method, path, headers=headers, **kw) as response:
            if response.status_code == 200:
                frames = parse_sse(response.iter_lines())
            else:
                frames = []
                response.read()
        return response, frames

    def new_session(self, prefix: str = "", **body: Any) -> str:
        r = self.post(f"{prefix}/api/sessions", json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["session"]["id"])

    def messages(self, session_id: str, prefix: str = "") -> list[dict[str, Any]]:
        r = self.get(f"{prefix}/api/sessions/{session_id}/messages")
        assert r.status_code == 200, r.text
        data: list[dict[str, Any]] = r.json()["data"]
        return data

    def chat(self, session_id: str, message: Any, prefix: str = "", **kw: Any) -> httpx.Response:
        return self.post(f"{prefix}/api/sessions/{session_id}/chat", json={"message": message}, **kw)

    def run(self, run_id: str, prefix: str = "") -> dict[str, Any]:
        r = self.get(f"{prefix}/v1/runs/{run_id}")
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    def wait_run(
        self, run_id: str, states: tuple[str, ...] = TERMINAL, timeout: float = 5.0, prefix: str = ""
    ) -> dict[str, Any]:
        return poll(
            lambda: self.run(run_id, prefix), lambda run: run["status"] in states, timeout, f"run {run_id} in {states}"
        )


def poll(read: Callable[[], Any], ok: Callable[[Any], bool], timeout: float, what: str) -> Any:
    return eventually(read, ok, within=timeout, what=what, every=0.02)


def parse_sse(lines: Iterator[str]) -> list[tuple[str | None, dict[str, Any]]]:
    """(event name or None, decoded data) per frame; comments (keepalives) are skipped; OpenAI's closing
    `data: [DONE]` is `{"done": True}`."""
    frames: list[tuple[str | None, dict[str, Any]]] = []
    event: str | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                frames.append((event, {"done": True} if data == ["[DONE]"] else json.loads("\n".join(data))))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data:
        frames.append((event, json.loads("\n".join(data))))
    return frames


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), dict), body
    error: dict[str, Any] = body["error"]
    for key in ("message", "type", "code"):
        assert isinstance(error.get(key), str) and error[key], body
    if code is not None:
        assert error["code"] == code, body
    return error


def user_messages_with(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "user" and text in m["content"]]


def assistant_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "assistant"]


@pytest.fixture
def api(initialised: Path, cli: Any) -> Iterator[Api]:
    assert cli("profile", "create", "research").exit_code == 0
    with TestClient(_LazyGateway(initialised), raise_server_exceptions=False) as client:
        yield Api(client, api_key(initialised))


# --- the app as gateway.build() returns it -------------------------------------------------------


def test_build_then_testclient_serves_requests(initialised: Path) -> None:
    """`app, runtime = build(root)` then `with TestClient(app)`: the app must start and answer."""
    app, _runtime = build(initialised, grace=1.0)
    with TestClient(app) as client:
        r = client.get("/v1/capabilities", headers={"Authorization": f"Bearer {api_key(initialised)}"})
        assert r.status_code == 200, r.text


# --- auth, routing, errors -----------------------------------------------------------------------

PROTECTED = [
    ("GET", "/v1/capabilities"),
    ("GET", "/api/sessions"),
    ("POST", "/api/sessions"),
    ("GET", "/api/sessions/s1"),
    ("GET", "/api/sessions/s1/messages"),
    ("POST", "/api/sessions/s1/chat"),
    ("POST", "/api/sessions/s1/chat/stream"),
    ("POST", "/v1/runs"),
    ("GET", "/v1/runs/run_x"),
    ("GET", "/v1/runs/run_x/events"),
    ("POST", "/v1/runs/run_x/stop"),
]


def test_health_needs_no_key(api: Api) -> None:
    for path in ("/health", "/v1/health", "/p/research/health"):
        r = api.get(path, auth=False)
        assert r.status_code == 200, (path, r.text)
        body = r.json()
        assert body["status"] == "ok" and body["platform"] == "hermes-agent" and body["version"]
        assert body["backchannel"]["version"] == body["version"]


@pytest.mark.parametrize("prefix", ["", "/p/research"])
@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_every_other_route_needs_the_key(api: Api, prefix: str, method: str, path: str) -> None:
    body = {"message": "hi", "input": "hi"} if method == "POST" else None
    no_key = api.request(method, prefix + path, auth=False, json=body)
    assert_error(no_key, 401, "invalid_api_key")
    for wrong in (f"Bearer {api.key}x", "Bearer wrong-key-of-some-length", f"Basic {api.key}", api.key):
        r = api.request(method, prefix + path, auth=False, headers={"Authorization": wrong}, json=body)
        assert_error(r, 401, "invalid_api_key")
    # and a refused request changed nothing
    assert api.get(f"{prefix}/api/sessions").json()["data"] == []


def test_unknown_route_is_404_in_the_envelope(api: Api) -> None:
    for path in ("/nope", "/v1/nope", "/api/sessions/s1/nope"):
        assert_error(api.get(path), 404)


@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_unknown_profile_is_404(api: Api, method: str, path: str) -> None:
    body = {"message": "hi", "input": "hi"} if method == "POST" else None
    r = api.request(method, "/p/nobody" + path, json=body)
    error = assert_error(r, 404)
    assert "nobody" in error["message"]  # refused for the profile, not for a missing session or run


def test_capabilities(api: Api) -> None:
    r = api.get("/v1/capabilities")
    assert r.status_code == 200
    body = r.json()
    idem = body["features"]["runs_idempotency"]
    assert idem["supported"] is True and idem["durable"] is True
    assert isinstance(body["backchannel"]["gateway_id"], str) and body["backchannel"]["gateway_id"]
    assert (
        api.get("/p/research/v1/capabilities").json()["backchannel"]["gateway_id"] == body["backchannel"]["gateway_id"]
    )


# --- sessions ------------------------------------------------------------------------------------


def test_create_session_with_and_without_id_and_title(api: Api) -> None:
    r = api.post("/api/sessions", json={})
    assert r.status_code == 201, r.text
    assert r.json()["object"] == "hermes.session"
    anonymous = r.json()["session"]
    assert re.fullmatch(r"\d{8}_\d{6}_[0-9a-f]{6}", anonymous["id"]), anonymous  # YYYYMMDD_HHMMSS_ + 6 hex
    assert anonymous["title"] is None and anonymous["message_count"] == 0
    assert (anonymous["profile"], anonymous["source"]) == ("default", "api")

    r = api.post("/api/sessions", json={"id": "my-session.1", "title": "Planning", "source": "cli"})
    assert r.status_code == 201, r.text
    named = r.json()["session"]
    assert named["id"] == "my-session.1" and named["title"] == "Planning" and named["source"] == "cli"

    second = api.post("/api/sessions", json={})  # every create without an id is a new session
    assert second.status_code == 201, second.text
    assert second.json()["session"]["id"] not in (anonymous["id"], "my-session.1")

    assert api.get("/api/sessions/my-session.1").json()["session"]["title"] == "Planning"
    assert api.get(f"/api/sessions/{anonymous['id']}").json()["session"]["id"] == anonymous["id"]
    listed = {s["id"] for s in api.get("/api/sessions").json()["data"]}
    assert listed == {anonymous["id"], "my-session.1", second.json()["session"]["id"]}


def test_create_session_conflicts(api: Api) -> None:
    api.new_session(id="taken-id", title="Taken title")
    assert_error(api.post("/api/sessions", json={"id": "taken-id"}), 409)
    error = assert_error(api.post("/api/sessions", json={"title": "Taken title"}), 400)
    assert "title" in error["message"].lower()
    # neither refusal created anything
    assert [s["id"] for s in api.get("/api/sessions").json()["data"]] == ["taken-id"]


@pytest.mark.parametrize(
    "request_kw",
    [
        {"json": {"id": "bad id!"}},
        {"json": {"id": 5}},
        {"json": {"title": 5}},
        {"json": {"source": ["x"]}},
        {"content": b"[1]"},
        {"content": b"{nope"},
    ],
)
def test_create_session_rejects_bad_input(api: Api, request_kw: dict[str, Any]) -> None:
    assert_error(api.post("/api/sessions", headers={"Content-Type": "application/json"}, **request_kw), 400)
    assert api.get("/api/sessions").json()["data"] == []


def test_bot_chat_is_created_once(api: Api) -> None:
    first = api.post("/api/sessions", json={"title": "Bot Chat", "source": "bot_peer_dm"})
    assert first.status_code == 201, first.text  # created ...
    again = api.post("/api/sessions", json={"title": "Bot Chat", "source": "bot_peer_dm"})
    assert again.status_code == 200, again.text  # ... then the existing one, not a second
    assert api.post("/api/sessions", json={"title": " Bot Chat "}).status_code == 200  # the title is trimmed
    bot_id = first.json()["session"]["id"]
    assert again.json()["object"] == "hermes.session"
    assert again.json()["session"]["id"] == bot_id

    listed = api.get("/api/sessions?limit=200&title=Bot+Chat&include_hidden=1")
    assert listed.status_code == 200
    data = listed.json()["data"]
    assert [s["id"] for s in data] == [bot_id]
    assert data[0]["title"] == "Bot Chat"
    all_titles = [s["title"] for s in api.get("/api/sessions?limit=200").json()["data"]]
    assert all_titles.count("Bot Chat") == 1


def test_list_limit_offset_has_more(api: Api) -> None:
    ids = {api.new_session(title=f"t{i}") for i in range(5)}
    page1 = api.get("/api/sessions?limit=2").json()
    page2 = api.get("/api/sessions?limit=2&offset=2").json()
    page3 = api.get("/api/sessions?limit=2&offset=4").json()
    assert (page1["limit"], page1["offset"], page2["offset"]) == (2, 0, 2)
    assert [len(p["data"]) for p in (page1, page2, page3)] == [2, 2, 1]
    assert [p["has_more"] for p in (page1, page2, page3)] == [True, True, False]
    seen = [s["id"] for p in (page1, page2, page3) for s in p["data"]]
    assert sorted(seen) == sorted(ids)
    assert api.get("/api/sessions?limit=5").json()["has_more"] is False
    assert api.get("/api/sessions?offset=10").json()["data"] == []
    assert [s["title"] for s in api.get("/api/sessions?title=t3").json()["data"]] == ["t3"]


@pytest.mark.parametrize("query", ["limit=0", "limit=10001", "limit=x", "limit=-1", "offset=-1", "offset=x"])
def test_list_rejects_bad_paging(api: Api, query: str) -> None:
    assert_error(api.get(f"/api/sessions?{query}"), 400)


def test_session_and_messages(api: Api) -> None:
    sid = api.new_session(title="Talk")
    for text in ("first words", "second words"):
        assert api.chat(sid, text).status_code == 200
    messages = api.messages(sid)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0]["content"] == "first words" and "first words" in messages[1]["content"]
    assert messages[2]["content"] == "second words" and "second words" in messages[3]["content"]
    session = api.get(f"/api/sessions/{sid}").json()["session"]
    assert session["id"] == sid and session["message_count"] == 4
    body = api.get(f"/api/sessions/{sid}/messages").json()
    assert body["object"] == "list" and body["session_id"] == sid


def test_unknown_session_is_404(api: Api) -> None:
    for method, path in [
        ("GET", "/api/sessions/missing"),
        ("GET", "/api/sessions/missing/messages"),
        ("POST", "/api/sessions/missing/chat"),
        ("POST", "/api/sessions/missing/chat/stream"),
    ]:
        r = api.request(method, path, json={"message": "hi"} if method == "POST" else None)
        assert_error(r, 404)
    assert_error(api.post("/v1/runs", json={"input": "hi", "session_id": "missing"}), 404)


def test_sessions_are_per_profile(api: Api) -> None:
    default_sid = api.new_session(title="Shared title")
    research_sid = api.new_session("/p/research", title="Shared title")  # titles are unique per profile
    r = api.get(f"/p/research/api/sessions/{research_sid}")
    assert r.json()["session"]["profile"] == "research"

    assert_error(api.get(f"/p/research/api/sessions/{default_sid}"), 404)
    assert_error(api.get(f"/p/research/api/sessions/{default_sid}/messages"), 404)
    assert_error(api.post(f"/p/research/api/sessions/{default_sid}/chat", json={"message": "x"}), 404)
    assert_error(api.get(f"/api/sessions/{research_sid}"), 404)
    assert [s["id"] for s in api.get("/p/research/api/sessions").json()["data"]] == [research_sid]
    assert [s["id"] for s in api.get("/api/sessions").json()["data"]] == [default_sid]

    reply = api.chat(research_sid, "hello research", prefix="/p/research")
    assert reply.status_code == 200, reply.text
    assert reply.json()["message"]["content"].startswith("research (echo):")
    assert api.messages(default_sid) == []


# --- chat ----------------------------------------------------------------------------------------


def test_chat_completes(api: Api) -> None:
    sid = api.new_session()
    r = api.chat(sid, "ping from a person", headers={"X-Unknown": "1"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "hermes.session.chat.completion"
    assert body["session_id"] == sid
    assert body["message"]["role"] == "assistant"
    assert "ping from a person" in body["message"]["content"]
    assert r.headers["x-hermes-session-id"] == sid


def test_chat_ignores_unknown_body_keys(api: Api) -> None:
    sid = api.new_session()
    body = {
        "message": "with extras",
        "author": {"id": "u1", "name": "Ann", "is_bot": False},
        "on_busy": "queue",
        "wait": 3,
        "reply_to": "x",
        "from": "y",
    }
    r = api.post(f"/api/sessions/{sid}/chat", json=body)
    assert r.status_code == 200, r.text
    assert "with extras" in r.json()["message"]["content"]


def test_slow_chat_gives_a_receipt_and_runs_anyway(api: Api) -> None:
    sid = api.new_session()
    slow = api.chat(sid, "/sleep 1\nslow one", headers=SHORT_WAIT)
    assert slow.status_code == 202, slow.text
    receipt = slow.json()
    assert receipt["object"] == "hermes.session.chat.queued"
    assert receipt["session_id"] == sid
    assert receipt["status"] in ("queued", "running")
    assert receipt["run_id"] and receipt["delivery_id"]
    assert "queue_position" in receipt
    assert "do not resend" in receipt["detail"].lower()

    second = api.chat(sid, "second one", headers=SHORT_WAIT)
    assert second.status_code == 202, second.text
    assert second.json()["status"] == "queued"
    assert second.json()["queue_position"] == 1
    assert api.run(second.json()["run_id"])["status"] == "queued"

    done = api.wait_run(receipt["run_id"])
    assert done["status"] == "completed" and "slow one" in done["output"]
    done2 = api.wait_run(second.json()["run_id"])
    assert done2["status"] == "completed" and "second one" in done2["output"]
    assert [m["role"] for m in api.messages(sid)] == ["user", "assistant", "user", "assistant"]


def test_same_message_twice_without_a_key_is_two_messages_and_with_one_a_replay(api: Api) -> None:
    sid = api.new_session()
    first = api.chat(sid, "say it once")
    again = api.chat(sid, "say it once")  # a person asking the same question again gets a new answer
    assert first.status_code == again.status_code == 200
    assert first.json()["replayed"] is False and again.json()["replayed"] is False
    assert again.json()["run_id"] != first.json()["run_id"]
    keyed = api.chat(sid, "say it once", headers={"Idempotency-Key": "once-please"})
    replay = api.chat(sid, "say it once", headers={"Idempotency-Key": "once-please"})
    assert keyed.json()["replayed"] is False and replay.json()["replayed"] is True
    assert replay.json()["run_id"] == keyed.json()["run_id"]
    assert replay.json()["message"]["content"] == keyed.json()["message"]["content"]
    messages = api.messages(sid)
    assert len(user_messages_with(messages, "say it once")) == 3
    assert len(assistant_messages(messages)) == 3
    streamed = [api.sse("POST", f"/api/sessions/{sid}/chat/stream", json={"message": "say it once"}) for _ in "ab"]
    started = [next(data for name, data in frames if name == "run.started") for _response, frames in streamed]
    assert started[0]["run_id"] != started[1]["run_id"] and not any(s["replayed"] for s in started)


# --- the delivery envelope (receipt dialect) -----------------------------------------------------


def envelope_headers(key: str, **extra: str) -> dict[str, str]:
    return {"Idempotency-Key": key, "X-Hermes-Sender-Profile": "alice", **extra}


def test_a_receipt_dialect_clients_auto_key_is_taken_and_deduplicated(api: Api) -> None:
    """Clients of the receipt dialect derive `auto:<24 hex>:<bucket>` keys themselves: they are callers' keys."""
    sid = api.new_session()
    key = "auto:0123456789abcdef01234567:1977431"
    first = api.chat(sid, "from a hermes peer", headers=envelope_headers(key))
    assert first.status_code == 200, first.text
    again = api.chat(sid, "from a hermes peer", headers=envelope_headers(key))
    assert again.json()["replayed"] is True and again.json()["delivery_id"] == first.json()["delivery_id"]
    for reserved in ("wake:run_x", "send:run_x:ab:0", "dedup:ab:cd"):
        refused = api.chat(sid, "sneaky", headers=envelope_headers(reserved))
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_idempotency_key", reserved


def test_envelope_delivered(api: Api) -> None:
    sid = api.new_session()
    r = api.chat(sid, "envelope please", headers=envelope_headers("k-env-1"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ENVELOPE_KEYS
    assert body["object"] == "hermes.peer.send_result"
    assert (body["result"], body["status"]) == ("delivered", "delivered")
    assert "envelope please" in body["reply"]
    assert body["idempotency_key"] == "k-env-1"
    assert body["replayed"] is False
    assert body["profile"] == "default" and body["session_id"] == sid
    assert body["queue_position"] is None and body["attempts"] == 1
    assert body["error"] is None and body["reason"] is None and body["retryable"] is False
    assert re.fullmatch(r"[0-9a-f]{32}", body["send_id"]), body["send_id"]
    again = api.chat(sid, "envelope please", headers=envelope_headers("k-env-1"))  # the replayed answer
    assert again.json()["replayed"] is True and again.json()["delivery_id"] == body["delivery_id"]
    assert re.fullmatch(r"[0-9a-f]{32}", again.json()["send_id"]) and again.json()["send_id"] != body["send_id"]
    assert isinstance(body["at"], int) and isinstance(body["waited_seconds"], float)
    assert api.run(body["delivery_id"])["status"] == "completed"


def test_envelope_receipt_then_replay(api: Api) -> None:
    sid = api.new_session()
    headers = envelope_headers("k-env-slow")
    r = api.chat(sid, "/sleep 0.8\nslow envelope", headers={**headers, **SHORT_WAIT})
    assert r.status_code in (200, 202), r.text
    receipt = r.json()
    assert list(receipt) == ENVELOPE_KEYS
    assert receipt["result"] == "receipt"
    assert receipt["status"] in ("queued", "running")
    assert receipt["reply"] is None and receipt["error"] is None
    assert "do not resend" in receipt["detail"].lower()

    replay = api.chat(sid, "/sleep 0.8\nslow envelope", headers=headers)
    assert replay.status_code == 200, replay.text
    body = replay.json()
    assert list(body) == ENVELOPE_KEYS
    assert body["replayed"] is True
    assert body["delivery_id"] == receipt["delivery_id"]
    assert body["result"] == "delivered" and "slow envelope" in body["reply"]
    assert body["attempts"] == 1

    messages = api.messages(sid)
    assert len(user_messages_with(messages, "slow envelope")) == 1
    assert len(assistant_messages(messages)) == 1


def test_envelope_second_message_queued_behind_first(api: Api) -> None:
    sid = api.new_session()
    api.chat(sid, "/sleep 0.6\nfirst in line", headers={**envelope_headers("k-q1"), **SHORT_WAIT})
    r = api.chat(sid, "second in line", headers={**envelope_headers("k-q2"), **SHORT_WAIT})
    body = r.json()
    assert list(body) == ENVELOPE_KEYS
    assert (body["result"], body["status"], body["queue_position"], body["attempts"]) == ("receipt", "queued", 1, 0)
    assert api.wait_run(body["delivery_id"])["status"] == "completed"


def test_envelope_key_reused_for_other_content_is_409(api: Api) -> None:
    sid = api.new_session()
    other = api.new_session()
    assert api.chat(sid, "original text", headers=envelope_headers("k-conflict")).status_code == 200
    assert_error(
        api.chat(sid, "different text", headers=envelope_headers("k-conflict")), 409, "idempotency_key_conflict"
    )
    assert_error(
        api.chat(other, "original text", headers=envelope_headers("k-conflict")), 409, "idempotency_key_conflict"
    )
    assert len(api.messages(sid)) == 2
    assert api.messages(other) == []


def test_key_without_sender_profile_gets_the_stock_shape(api: Api) -> None:
    sid = api.new_session()
    r = api.chat(sid, "stock please", headers={"Idempotency-Key": "k-stock"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "hermes.session.chat.completion"
    assert "stock please" in body["message"]["content"]
    again = api.chat(sid, "stock please", headers={"Idempotency-Key": "k-stock"})
    assert again.json()["object"] == "hermes.session.chat.completion"
    assert len(user_messages_with(api.messages(sid), "stock please")) == 1
    # a sender profile without a key is not a delivery request either
    r = api.chat(sid, "profile only", headers={"X-Hermes-Sender-Profile": "alice"})
    assert r.json()["object"] == "hermes.session.chat.completion"


# --- bad input -----------------------------------------------------------------------------------


BAD_INPUTS: list[tuple[str, dict[str, Any], int, str | None]] = [
    ("malformed json", {"content": b'{"message": "hi"'}, 400, None),
    ("json array", {"content": b'["hi"]'}, 400, None),
    ("json string", {"content": b'"hi"'}, 400, None),
    ("lone surrogate", {"content": b'{"message": "hi \\ud800", "input": "hi \\ud800"}'}, 400, None),
    ("missing message", {"json": {"text": "hi"}}, 400, "missing_message"),
    ("empty message", {"json": {"message": "   "}}, 400, "missing_message"),
    ("message a number", {"json": {"message": 42}}, 400, None),
    ("message an object", {"json": {"message": {"text": "hi"}}}, 400, None),
    ("body over the limit", {"json": {"message": "a" * 1_100_000}}, 413, None),
    ("message too long", {"json": {"message": "a" * 65_537}}, 413, None),
    ("bad hops", {"json": {"message": "hi"}, "headers": {"X-Backchannel-Hops": "abc"}}, 400, None),
    ("negative hops", {"json": {"message": "hi"}, "headers": {"X-Backchannel-Hops": "-1"}}, 400, None),
    ("key too long", {"json": {"message": "hi"}, "headers": {"Idempotency-Key": "k" * 256}}, 400, None),
]


@pytest.mark.parametrize(("case", "request_kw", "status", "code"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
@pytest.mark.parametrize("route", ["chat", "runs"])
def test_bad_input_is_refused_and_changes_nothing(
    api: Api, case: str, request_kw: dict[str, Any], status: int, code: str | None, route: str
) -> None:
    sid = api.new_session()
    assert api.chat(sid, "before").status_code == 200
    before = api.messages(sid)
    kw = dict(request_kw)
    if route == "runs" and "json" in kw:
        body = dict(kw["json"])
        if "message" in body:
            body["input"] = body.pop("message")
        kw["json"] = {**body, "session_id": sid}
    path = f"/api/sessions/{sid}/chat" if route == "chat" else "/v1/runs"
    headers = {"Content-Type": "application/json", **kw.pop("headers", {})}
    assert_error(api.post(path, headers=headers, **kw), status, code)
    # nothing was recorded: the next message runs at once and adds exactly its own two messages
    assert api.messages(sid) == before
    assert api.chat(sid, "after").status_code == 200
    after = api.messages(sid)
    assert len(after) == len(before) + 2
    assert [m["content"] for m in after[len(before) :] if m["role"] == "user"] == ["after"]


def test_body_limit_follows_config(initialised: Path) -> None:
    path = config.config_path(initialised)
    data = config.load_yaml(path)
    config.write_yaml(path, {**data, "gateway": {**data["gateway"], "max_body_bytes": 2000}})
    with TestClient(_LazyGateway(initialised), raise_server_exceptions=False) as client:
        api = Api(client, api_key(initialised))
        sid = api.new_session()
        assert api.chat(sid, "b" * 1500).status_code == 200
        assert_error(api.chat(sid, "c" * 2500), 413)
        assert_error(api.post("/v1/runs", json={"input": "d" * 2500, "session_id": sid}), 413)
        chunked = iter([b'{"message": "', b"e" * 2500, b'"}'])  # no Content-Length: counted while read
        assert_error(api.post(f"/api/sessions/{sid}/chat", content=chunked), 413)
        assert len(api.messages(sid)) == 2


# --- failing turns -------------------------------------------------------------------------------


def test_failing_turn_is_424_and_keeps_the_session(api: Api) -> None:
    sid = api.new_session()
    assert api.chat(sid, "all good").status_code == 200
    before = api.messages(sid)
    r = api.chat(sid, "/fail boom")
    error = assert_error(r, 424)
    assert "boom" in error["message"]
    after = api.messages(sid)
    assert assistant_messages(after) == assistant_messages(before)
    assert after[: len(before)] == before

    run_id = error.get("run_id")
    assert run_id, error
    run = api.run(run_id)
    assert run["status"] == "failed" and "boom" in run["error"]

    # the session is not stuck
    r = api.chat(sid, "still here")
    assert r.status_code == 200 and "still here" in r.json()["message"]["content"]


def test_failing_turn_in_the_envelope(api: Api) -> None:
    sid = api.new_session()
    r = api.chat(sid, "/fail kaboom", headers=envelope_headers("k-fail"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ENVELOPE_KEYS
    assert (body["result"], body["status"]) == ("failed", "failed")
    assert "kaboom" in body["error"] and body["reason"] and body["reply"] is None


# --- runs ----------------------------------------------------------------------------------------


def test_start_run_and_read_it(api: Api) -> None:
    sid = api.new_session()
    r = api.post("/v1/runs", json={"input": "run this", "session_id": sid})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["run_id"] and body["status"] in ("queued", "running", "started")
    assert body["replayed"] is False
    run = api.wait_run(body["run_id"])
    assert run["status"] == "completed" and "run this" in run["output"]
    assert run["run_id"] == body["run_id"] and run["session_id"] == sid
    assert [m["role"] for m in api.messages(sid)] == ["user", "assistant"]
    # `input` may be a message list (its last content) and `message` a list of content parts
    listed = api.post("/v1/runs", json={"input": [{"role": "user", "content": "from a list"}], "session_id": sid})
    assert listed.status_code == 202, listed.text
    assert "from a list" in api.wait_run(listed.json()["run_id"])["output"]
    parts = api.chat(sid, [{"type": "text", "text": "two "}, {"type": "text", "text": "parts"}])
    assert parts.status_code == 200 and "two parts" in parts.json()["message"]["content"]


def test_run_without_session_lands_in_the_bot_chat(api: Api) -> None:
    bot = api.post("/api/sessions", json={"title": "Bot Chat"}).json()["session"]["id"]
    r = api.post("/v1/runs", json={"input": "to the bot chat"})
    assert r.status_code == 202, r.text
    run = api.wait_run(r.json()["run_id"])
    assert run["session_id"] == bot
    assert api.get(f"/api/sessions/{bot}").json()["session"]["title"] == "Bot Chat"
    # research: the run comes first and creates the Bot Chat; creating it by title then returns it
    r = api.post("/p/research/v1/runs", json={"input": "to research's bot chat"})
    assert r.status_code == 202, r.text
    research_bot = api.wait_run(r.json()["run_id"], prefix="/p/research")["session_id"]
    session = api.get(f"/p/research/api/sessions/{research_bot}").json()["session"]
    assert session["title"] == "Bot Chat" and session["profile"] == "research"
    assert research_bot != bot
    again = api.post("/p/research/api/sessions", json={"title": "Bot Chat"})
    assert again.json()["session"]["id"] == research_bot
    titles = [s["title"] for s in api.get("/p/research/api/sessions?limit=200").json()["data"]]
    assert titles.count("Bot Chat") == 1


def test_run_idempotency_key(api: Api) -> None:
    sid = api.new_session()
    body = {"input": "keyed run", "session_id": sid}
    first = api.post("/v1/runs", json=body, headers={"Idempotency-Key": "peer-abc"})
    assert first.status_code == 202 and first.json()["replayed"] is False
    assert first.headers.get("idempotency-replayed") is None
    api.wait_run(first.json()["run_id"])
    again = api.post("/v1/runs", json=body, headers={"Idempotency-Key": "peer-abc"})
    assert again.status_code == 202, again.text
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.json()["replayed"] is True
    assert again.headers["idempotency-replayed"] == "true"
    assert len(user_messages_with(api.messages(sid), "keyed run")) == 1
    other = api.post("/v1/runs", json={**body, "input": "other text"}, headers={"Idempotency-Key": "peer-abc"})
    assert_error(other, 409, "idempotency_key_conflict")


def test_run_idempotency_survives_a_restart(initialised: Path) -> None:
    key = api_key(initialised)
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "durable-1"}
    with TestClient(_LazyGateway(initialised), raise_server_exceptions=False) as client:
        api = Api(client, key)
        sid = api.new_session()
        first = client.post("/v1/runs", json={"input": "durable", "session_id": sid}, headers=headers)
        run_id = first.json()["run_id"]
        api.wait_run(run_id)
    with TestClient(_LazyGateway(initialised), raise_server_exceptions=False) as client:
        api = Api(client, key)
        again = client.post("/v1/runs", json={"input": "durable", "session_id": sid}, headers=headers)
        assert again.json()["run_id"] == run_id and again.json()["replayed"] is True
        assert api.run(run_id)["status"] == "completed"
        assert len(user_messages_with(api.messages(sid), "durable")) == 1
        # its live events are gone with the old process: the events route still ends with the terminal event
        response, frames = api.sse("GET", f"/v1/runs/{run_id}/events")
        assert response.status_code == 200
        assert [f[1]["event"] for f in frames] == ["run.completed"]
        assert "durable" in frames[0][1]["output"]


def test_unknown_and_foreign_runs_are_404(api: Api) -> None:
    for method, path in [("GET", "/v1/runs/run_nope"), ("POST", "/v1/runs/run_nope/stop")]:
        assert_error(api.request(method, path), 404)
    assert_error(api.get("/v1/runs/run_nope/events"), 404)
    sid = api.new_session()
    run_id = api.post("/v1/runs", json={"input": "mine", "session_id": sid}).json()["run_id"]
    api.wait_run(run_id)
    assert_error(api.get(f"/p/research/v1/runs/{run_id}"), 404)
    assert_error(api.post(f"/p/research/v1/runs/{run_id}/stop"), 404)
    assert_error(api.get(f"/p/research/v1/runs/{run_id}/events"), 404)
    assert_error(api.post("/p/research/v1/runs", json={"input": "x", "session_id": sid}), 404)


# --- stop ----------------------------------------------------------------------------------------


def test_stop_a_running_run(api: Api) -> None:
    sid = api.new_session()
    run_id = api.post("/v1/runs", json={"input": "/sleep 30\nnever finished", "session_id": sid}).json()["run_id"]
    api.wait_run(run_id, ("running",))
    r = api.post(f"/v1/runs/{run_id}/stop")
    assert r.status_code == 200, r.text
    assert r.json()["run_id"] == run_id and r.json()["status"] == "cancelled"  # the turn was cut, not waited on
    assert api.run(run_id)["status"] == "cancelled"
    assert not any("never finished" in m["content"] for m in assistant_messages(api.messages(sid)))
    # the session goes on
    assert api.chat(sid, "next please").status_code == 200


def test_stop_a_queued_run(api: Api) -> None:
    sid = api.new_session()
    first = api.post("/v1/runs", json={"input": "/sleep 0.6\nahead", "session_id": sid}).json()["run_id"]
    queued = api.post("/v1/runs", json={"input": "behind and stopped", "session_id": sid}).json()["run_id"]
    assert api.run(queued)["status"] == "queued"
    r = api.post(f"/v1/runs/{queued}/stop")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled"
    assert api.wait_run(first)["status"] == "completed"
    # give the worker the chance to (wrongly) pick it up, then check it never ran
    assert api.chat(sid, "after the stop").status_code == 200
    run = api.run(queued)
    assert run["status"] == "cancelled" and run.get("output") is None
    messages = api.messages(sid)
    assert not any("behind and stopped" in m["content"] for m in messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]


def test_stop_a_finished_run_returns_it(api: Api) -> None:
    sid = api.new_session()
    run_id = api.post("/v1/runs", json={"input": "done already", "session_id": sid}).json()["run_id"]
    done = api.wait_run(run_id)
    r = api.post(f"/v1/runs/{run_id}/stop")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed" and r.json()["output"] == done["output"]
    assert api.run(run_id) == done


# --- server-sent events --------------------------------------------------------------------------


def test_chat_stream(api: Api) -> None:
    sid = api.new_session()
    response, frames = api.sse("POST", f"/api/sessions/{sid}/chat/stream", json={"message": "stream me"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    names = [name for name, _ in frames]
    assert names[0] == "run.started" and names[-1] == "done"
    assert "assistant.completed" in names
    assert names.index("assistant.completed") < len(names) - 1
    run_ids = {data["run_id"] for _, data in frames}
    assert len(run_ids) == 1 and next(iter(run_ids))
    assert all(data["session_id"] == sid for _, data in frames)
    assert [data["seq"] for _, data in frames] == list(range(1, len(frames) + 1))
    completed = frames[names.index("assistant.completed")][1]
    assert "stream me" in completed["content"]
    assert api.run(next(iter(run_ids)))["status"] == "completed"
    assert [m["role"] for m in api.messages(sid)] == ["user", "assistant"]


def test_chat_stream_errors_before_the_stream_are_json(api: Api) -> None:
    sid = api.new_session()
    response, _ = api.sse("POST", f"/api/sessions/{sid}/chat/stream", json={"nothing": 1})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "missing_message"


def test_run_events(api: Api) -> None:
    sid = api.new_session()
    tool = '/tool memory {"action": "add", "target": "memory", "content": "x"}'
    run_id = api.post("/v1/runs", json={"input": f"{tool}\nremembered", "session_id": sid}).json()["run_id"]
    response, frames = api.sse("GET", f"/v1/runs/{run_id}/events")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert all(name is None for name, _ in frames)  # unnamed `data:` frames
    events = [data["event"] for _, data in frames]
    assert all(data["run_id"] == run_id for _, data in frames)
    for name in ("run.started", "tool.started", "tool.completed", "run.completed"):
        assert name in events, events
    assert events.index("run.started") < events.index("tool.started") < events.index("tool.completed")
    assert events[-1] == "run.completed"
    tool_started = frames[events.index("tool.started")][1]
    assert tool_started["tool"] == "memory"
    assert frames[events.index("tool.completed")][1]["error"] is None
    output = frames[-1][1]["output"]
    assert "remembered" in output and "memory" in output
    assert output == api.run(run_id)["output"]

    # the same run, already finished: the stream still ends with its terminal event
    response, frames = api.sse("GET", f"/v1/runs/{run_id}/events")
    assert response.status_code == 200
    assert frames and frames[-1][1]["event"] == "run.completed"
    assert frames[-1][1]["output"] == output


def test_run_events_of_a_failed_run(api: Api) -> None:
    sid = api.new_session()
    run_id = api.post("/v1/runs", json={"input": "/fail nope", "session_id": sid}).json()["run_id"]
    response, frames = api.sse("GET", f"/v1/runs/{run_id}/events")
    assert response.status_code == 200
    assert frames[-1][1]["event"] == "run.failed"
    assert "nope" in frames[-1][1]["error"]


# --- OpenAPI -------------------------------------------------------------------------------------


# Routes the app serves that the document leaves out. Each entry must stay a route of the app.
# The web view's pages are a browser's, not an API client's; the MCP endpoint speaks the MCP protocol
# (streamable HTTP), which its own specification describes; so do A2A's JSON-RPC and REST endpoints and agent card.
UNDOCUMENTED: set[tuple[str, str]] = (
    {(m, r.path) for r in web.routes() if isinstance(r, Route) for m in r.methods or () if m != "HEAD"}
    | {(method, prefix + "/mcp") for method in ("GET", "POST", "DELETE") for prefix in ("", "/p/{profile}")}
    | {("POST", prefix + path) for path in ("/a2a/jsonrpc", "/a2a/jsonrpc/") for prefix in ("", "/p/{profile}")}
    | {(m, prefix + "/a2a/rest/{rest:path}") for m in ("GET", "POST", "DELETE") for prefix in ("", "/p/{profile}")}
    | {
        ("GET", prefix + path)
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json")
        for prefix in ("", "/p/{profile}")
    }
)
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def app_operations(app: Starlette) -> set[tuple[str, str]]:
    """(method, path template) of every route, mounts included (HEAD, which Starlette adds to GET, left out)."""
    found: set[tuple[str, str]] = set()

    def walk(routes: list[BaseRoute], prefix: str) -> None:
        for route in routes:
            if isinstance(route, Mount):
                walk(list(route.routes), prefix + route.path)
            elif isinstance(route, Route):
                found.update((m, prefix + route.path) for m in route.methods or () if m != "HEAD")

    walk(list(app.routes), "")
    return found


def test_openapi_document(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    # The events of a run on a peer that is away end in stream.failed once the peer stays away past the reconnect
    # budget: a second here, not the minute a restarting peer is given.
    monkeypatch.setattr(outbound, "RECONNECT_SECONDS", 1.0)
    r = api.get("/openapi.json", auth=False)
    assert r.status_code == 200
    doc = json.loads(r.text)
    assert doc["openapi"].startswith("3.")
    documented = {
        (method.upper(), path): {int(code) for code in op["responses"]}
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in HTTP_METHODS
    }
    public = {
        (method.upper(), path)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in HTTP_METHODS and op.get("security") == []
    }
    served = api.client.app
    app = served.app if isinstance(served, _LazyGateway) else served  # built by the request above
    assert isinstance(app, Starlette), app
    routes = app_operations(app)

    # Every route is documented, every documented operation is a route.
    assert routes >= UNDOCUMENTED, UNDOCUMENTED - routes
    assert routes - UNDOCUMENTED - set(documented) == set(), "routes missing from the document"
    assert set(documented) - routes == set(), "documented operations the app does not serve"
    assert ("POST", "/p/{profile}/api/sessions/{session_id}/chat") in documented  # the mount was walked

    # The status codes seen from each route are among those its operation lists.
    seen: dict[tuple[str, str], set[int]] = {}

    def hit(
        method: str, template: str, status: int, *, auth: bool = True, sse: bool = False, query: str = "", **kw: Any
    ) -> Any:
        """Request `template` with its path parameters filled in, check the status and note it for the route."""
        params = {
            "profile": "research",
            "session_id": "s-missing",
            "run_id": "run_missing",
            "tool": "send_to_session",
            "name": "nosuch",
            "round": "round_missing",
            "question_id": "q_missing",
            **kw.pop("params", {}),
        }
        path = template.format(**params) + query
        if sse:
            response, _ = api.sse(method, path, **kw)
        else:
            response = api.request(method, path, auth=auth, **kw)
        assert response.status_code == status, (method, path, response.text)
        seen.setdefault((method, template), set()).add(status)
        return response.json() if not sse else None

    hit("GET", "/health", 200, auth=False)
    for prefix in ("", "/p/{profile}"):
        hit("GET", prefix + "/v1/capabilities", 200)
        hit("GET", prefix + "/v1/models", 200)
        hit("GET", prefix + "/v1/ledger", 200)
        sid = hit("POST", prefix + "/api/sessions", 201, json={})["session"]["id"]
        hit("POST", prefix + "/api/sessions", 201, json={"title": "Bot Chat"})
        hit("POST", prefix + "/api/sessions", 200, json={"title": "Bot Chat"})
        hit("POST", prefix + "/api/sessions", 400, json={"id": "bad id!"})
        hit("POST", prefix + "/api/sessions", 409, json={"id": sid})
        hit("GET", prefix + "/api/sessions", 200)
        hit("GET", prefix + "/api/sessions", 400, query="?limit=0")
        ids = {"session_id": sid}
        hit("GET", prefix + "/api/sessions/{session_id}", 200, params=ids)
        hit("GET", prefix + "/api/sessions/{session_id}/messages", 200, params=ids)
        chat = prefix + "/api/sessions/{session_id}/chat"
        hit("POST", chat, 200, params=ids, json={"message": "documented"})
        hit("POST", chat, 400, params=ids, json={"nothing": 1})
        hit("POST", chat, 424, params=ids, json={"message": "/fail on purpose"})
        receipt = hit("POST", chat, 202, params=ids, json={"message": "/sleep 0.3\nslow"}, headers=SHORT_WAIT)
        api.wait_run(receipt["run_id"], prefix=prefix.format(profile="research"))
        hit("POST", chat + "/stream", 200, params=ids, sse=True, json={"message": "streamed"})
        hit("POST", chat + "/stream", 400, params=ids, json={"nothing": 1})
        completions = prefix + "/v1/chat/completions"
        hit("POST", completions, 200, json={"messages": [{"role": "user", "content": "documented"}]})
        hit("POST", completions, 200, sse=True, json={"messages": [{"role": "user", "content": "hi"}], "stream": True})
        hit("POST", completions, 400, json={"messages": []})
        unknown = {"messages": [{"role": "user", "content": "hi"}], "model": "nobody"}
        hit("POST", completions, 400 if prefix else 404, json=unknown)  # under /p/<profile>: only that profile
        hit("POST", completions, 424, json={"messages": [{"role": "user", "content": "/fail on purpose"}]})
        slow = {"messages": [{"role": "user", "content": "/sleep 0.3\nslow"}]}
        api.wait_run(hit("POST", completions, 202, json=slow, headers=SHORT_WAIT)["run_id"])
        hit("POST", prefix + "/v1/responses", 200, json={"input": "documented"})
        hit("POST", prefix + "/v1/responses", 200, sse=True, json={"input": "streamed", "stream": True})
        hit("POST", prefix + "/v1/responses", 400, json={"input": 5})
        run_id = hit("POST", prefix + "/v1/runs", 202, json={"input": "a run", "session_id": sid})["run_id"]
        hit("POST", prefix + "/v1/runs", 400, json={"session_id": sid})
        runs = {"run_id": run_id}
        hit("GET", prefix + "/v1/runs/{run_id}/events", 200, params=runs, sse=True)  # until its terminal event
        hit("GET", prefix + "/v1/runs/{run_id}", 200, params=runs)
        hit("POST", prefix + "/v1/runs/{run_id}/stop", 200, params=runs)
        hit("POST", prefix + "/v1/runs/{run_id}/steer", 409, params=runs, json={"input": "too late"})
        hit("POST", prefix + "/v1/runs/{run_id}/steer", 400, params=runs, json={"input": ""})
        tools = prefix + "/api/sessions/{session_id}/tools/{tool}"
        hit("POST", tools, 200, params={**ids, "tool": "list_sessions"}, json={})
        hit("POST", tools, 400, params=ids, json={"arguments": 5})
        mentions = prefix + "/api/sessions/{session_id}/mentions"
        hit("POST", mentions, 200, params=ids, json={"message": "no mentions"})
        hit("POST", mentions, 400, params=ids, json={"text": "not the field"})
        hit("GET", prefix + "/v1/handoffs", 200, query="?taker=walk&wait=0")
        hit("GET", prefix + "/v1/handoffs", 400, query="?taker=no+spaces")
        # The person's reads of the home
        sessions = prefix + "/v1/sessions"
        assert hit("GET", sessions, 200, query="?limit=5")["data"]
        assert hit("GET", sessions, 200, query=f"?address={sid}")["data"][0]["id"] == sid
        hit("GET", sessions, 400, query="?address=peer:spark")
        hit("GET", sessions, 404, query="?address=s-missing")
        hit("POST", prefix + "/v1/sessions/import", 400)  # research's engine is echo, not hermes
        state = hit("GET", prefix + "/v1/runs/{run_id}/record", 200, params=runs)["state"]
        listed = hit("GET", prefix + "/v1/runs", 200, query=f"?state={state}&address={sid}")["data"]
        assert run_id in [r["run_id"] for r in listed], listed
        hit("GET", prefix + "/v1/runs", 200, query="?address=research&limit=1")
        hit("GET", prefix + "/v1/runs", 400, query="?state=nope")
        hit("GET", prefix + "/v1/runs", 404, query="?address=nobody")
        assert hit("GET", prefix + "/v1/runs/{run_id}/record", 200, params=runs)["message"] == "a run"
        short = {"run_id": run_id[:12] + "…"}  # as a table shows it
        assert hit("GET", prefix + "/v1/runs/{run_id}/record", 200, params=short)["run_id"] == run_id
        hit("GET", prefix + "/v1/runs/{run_id}/record", 400, params={"run_id": "run_"})
        hit("GET", prefix + "/v1/ledger", 200, query="?outcome=failed&state=cancelled&since=0&limit=100000")
        hit("GET", prefix + "/v1/ledger", 400, query="?outcome=nope")
        hit("GET", prefix + "/v1/ledger", 404, query="?address=nobody")

    for prefix in ("", "/p/{profile}"):
        groups = prefix + "/v1/groups/{name}/messages"
        hit("POST", groups, 404, json={"message": "to no group"})
        hit("POST", groups, 400, json={"nothing": 1})
        hit("POST", prefix + "/v1/peers/{name}/messages", 400, json={"message": "to no peer"})
        messages = prefix + "/v1/messages"
        bot = hit("POST", messages, 200, json={"to": "research", "message": "to the Bot Chat"})
        assert bot["result"] == "delivered" and bot["to"].startswith("research/"), bot
        assert hit("POST", messages, 200, json={"to": f"research/{sid}", "message": "hi"})["session_id"] == sid
        hit("POST", messages, 200, sse=True, json={"to": f"research/{sid}", "message": "streamed", "stream": True})
        hit("POST", messages, 400, json={"message": "to nobody"})
        hit("POST", messages, 400, json={"to": "peer:spark", "message": "streamed", "stream": True})
        hit("POST", messages, 404, json={"to": "research/s-missing", "message": "hi"})
        hit("POST", messages, 404, json={"to": "group:nosuch", "message": "hi"})
    assert run_cli("room", "create", "standup", "--member", "research").exit_code == 0
    for prefix in ("", "/p/{profile}"):
        hit("GET", prefix + "/v1/rooms", 200)
        room = prefix + "/v1/rooms/{name}"
        hit("GET", room, 404)
        hit("GET", room, 200, params={"name": "standup"}, query="?after=0")
        hit("GET", room, 400, params={"name": "standup"}, query="?after=-1")
        hit("POST", room + "/messages", 404, json={"message": "to no room"})
        hit("POST", room + "/messages", 400, params={"name": "standup"}, json={"nothing": 1})
        said = hit("POST", room + "/messages", 202, params={"name": "standup"}, json={"message": "hello room"})
        assert said["waiting"] == ["research"] and said["line"]["text"] == "hello room"
    # The home's own commands: keys, rooms, runs on peers, a peer's probe, profiles (the person's key only).
    made = hit("POST", "/v1/keys", 201, json={"name": "walker", "profiles": ["research"], "read": True})
    assert made["name"] == "walker" and made["key"].startswith("bcpk_") and made["profiles"] == ["research"], made
    walker = {"Authorization": f"Bearer {made['key']}"}
    hit("GET", "/v1/keys", 403, headers=walker)
    hit("POST", "/v1/keys", 403, headers=walker, json={"name": "other"})
    # questions (issue 42): a turn asks its person (echo's /ask); answered once, with the person's key only
    waited = api.chat(sid, "/ask Which colour? | red, blue", prefix="/p/research", headers=SHORT_WAIT)
    assert waited.status_code == 202 and waited.json()["status"] == "input_required", waited.text
    asked = poll(lambda: hit("GET", "/v1/questions", 200)["data"], bool, 5.0, "a question asked")
    question = {"question_id": asked[0]["id"]}
    hit("GET", "/v1/questions", 400, query="?state=bogus")
    hit("GET", "/v1/questions", 403, headers=walker)
    hit("GET", "/v1/questions/{question_id}", 200, params=question)
    hit("GET", "/v1/questions/{question_id}", 404)
    hit("GET", "/v1/questions/{question_id}", 403, params=question, headers=walker)
    answer = "/v1/questions/{question_id}"
    hit("POST", answer, 400, params=question, json={"answer": "red", "cancel": True})
    hit("POST", answer, 403, params=question, headers=walker, json={"answer": "red"})
    hit("POST", answer, 404, json={"answer": "red"})
    assert hit("POST", answer, 200, params=question, json={"answer": "red"})["run"]["run_id"] == asked[0]["run_id"]
    hit("POST", answer, 409, params=question, json={"cancel": True})
    ran = {"run_id": asked[0]["run_id"]}  # the run's own sender answers at …/answer (a peer, the runs it sent)
    hit("POST", "/p/{profile}/v1/runs/{run_id}/answer", 400, params=ran, json={})
    hit("POST", "/p/{profile}/v1/runs/{run_id}/answer", 403, params=ran, headers=walker, json={"answer": "blue"})
    hit("POST", "/p/{profile}/v1/runs/{run_id}/answer", 409, params=ran, json={"answer": "blue"})
    assert hit("GET", "/v1/questions", 200, query="?for_peer=true")["data"] == []
    hit("GET", "/v1/questions", 400, query="?for_peer=maybe")
    hit("POST", "/v1/keys", 409, json={"name": "walker"})
    hit("POST", "/v1/keys", 404, json={"name": "other", "profiles": ["nobody"]})
    hit("POST", "/v1/keys", 400, json={"name": "Not A Name"})
    assert [k["name"] for k in hit("GET", "/v1/keys", 200)["data"]] == ["walker"]
    named = {"name": "walker"}
    assert hit("POST", "/v1/keys/{name}/rotate", 200, params=named)["key"] != made["key"]
    hit("POST", "/v1/keys/{name}/rotate", 404)
    hit("POST", "/v1/keys/{name}/rotate", 400, params={"name": "Not_Valid"})
    assert "key" not in hit("DELETE", "/v1/keys/{name}", 200, params=named)
    hit("DELETE", "/v1/keys/{name}", 404, params=named)
    hit("DELETE", "/v1/keys/{name}", 400, params={"name": "Not_Valid"})
    agent = hit("POST", "/v1/agent-keys", 200, json={"profile": "research", "hermes_home": "/srv/hermes"})
    assert agent["how"] == "made" and agent["acts_as"] == "research" and agent["key"], agent
    hit("POST", "/v1/agent-keys", 404, json={"profile": "nobody", "hermes_home": "/srv/hermes"})
    hit("POST", "/v1/agent-keys", 400, json={"profile": "research"})
    hit("POST", "/v1/agent-keys", 403, headers={"Authorization": f"Bearer {agent['key']}"}, json={})
    for prefix in ("", "/p/{profile}"):
        room = prefix + "/v1/rooms/{name}"
        second = {"name": "second" + prefix.replace("/p/{profile}", "-p")}
        hit("POST", prefix + "/v1/rooms", 201, json={**second, "members": ["research"]})
        hit("POST", prefix + "/v1/rooms", 409, json=second)
        hit("POST", prefix + "/v1/rooms", 400, json={"name": "Not A Name"})
        hit("POST", prefix + "/v1/rooms", 404, json={"name": "third", "members": ["nobody"]})
        assert hit("POST", room + "/members", 200, params=second, json={"members": ["default"]})["members"] == [
            "research",
            "default",
        ]
        hit("POST", room + "/members", 400, params=second, json={"members": []})
        hit("POST", room + "/members", 404, json={"members": ["default"]})
        removed = hit("POST", room + "/members/remove", 200, params=second, json={"members": ["default"]})
        assert removed["members"] == ["research"], removed
        hit("POST", room + "/members/remove", 400, params=second, json={"members": ["builds"]})
        hit("POST", room + "/members/remove", 404, json={"members": ["default"]})
        said = hit("POST", room + "/messages", 202, params=second, json={"message": "and the round?"})
        one = hit("GET", room + "/rounds/{round}", 200, params={**second, "round": said["round"]})
        assert one["round"] == said["round"] and one["state"] in ("open", "done"), one
        hit("GET", room + "/rounds/{round}", 404, params=second)
        hit("GET", room + "/rounds/{round}", 404, params={"round": said["round"]})
    assert run_cli("peer", "add", "gone", "--url", "http://127.0.0.1:9", "--key", "k" * 12).exit_code == 0
    gone = {"name": "gone", "run_id": "run_elsewhere"}
    runs = "/v1/peers/{name}/runs"
    hit("POST", runs, 424, params=gone, json={"message": "to a peer that is away"})
    hit("POST", runs, 400, params=gone, json={"nothing": 1})
    hit("POST", runs, 404, json={"message": "to no peer"})
    hit("GET", runs + "/{run_id}", 424, params=gone)
    hit("GET", runs + "/{run_id}", 404)
    hit("POST", runs + "/{run_id}/stop", 424, params=gone)
    _, frames = api.sse("GET", runs.format(**gone) + "/run_elsewhere/events")
    assert frames and frames[-1][1]["event"] == "stream.failed" and frames[-1][1]["status"] == 424, frames
    seen.setdefault(("GET", runs + "/{run_id}/events"), set()).add(200)
    hit("GET", runs + "/{run_id}/events", 404)
    probe = "/v1/peers/{name}/probe"
    found = hit("POST", probe, 200, params=gone, json={"url": "http://127.0.0.1:9", "key": "k" * 12})
    assert found["platform"] is None and "saved anyway" in found["notes"][0], found
    hit("POST", probe, 400, params=gone, json={"url": "ftp://127.0.0.1:9", "key": "k" * 12})
    assert run_cli("profile", "create", "scratch").exit_code == 0
    scratch = {"name": "scratch"}
    checked = hit("DELETE", "/v1/profiles/{name}", 200, params=scratch, query="?dry_run=true")
    assert checked == {"profile": "scratch", "removed": False, "folder": None, "bot_chat": None}, checked
    hit("DELETE", "/v1/profiles/{name}", 400, params=scratch, query="?dry_run=maybe")
    hit("DELETE", "/v1/profiles/{name}", 400, params={"name": "default"})
    assert hit("DELETE", "/v1/profiles/{name}", 200, params=scratch)["removed"] is True
    hit("DELETE", "/v1/profiles/{name}", 404, params=scratch)
    for prefix in ("", "/p/{profile}"):
        hit("GET", prefix + "/health", 200, auth=False)
        hit("POST", prefix + "/v1/gateway/stop", 202)  # in-process: no server watches it, nothing stops
    hit("GET", "/v1/health", 200, auth=False)
    hit("GET", "/v1/messages", 200, query="?key=never-sent")
    hit("GET", "/v1/messages", 400)
    hit("GET", "/openapi.json", 200, auth=False)
    for method, template in sorted(routes - UNDOCUMENTED):
        if (method, template) not in public:
            body = {"message": "hi", "input": "hi"} if method == "POST" else None
            hit(method, template, 401, auth=False, json=body)
            if "{session_id}" in template or "{run_id}" in template:
                hit(method, template, 404, json=body)  # an unknown session or run
            if template.startswith("/p/{profile}"):
                hit(method, template, 404, json=body, params={"profile": "nobody"})

    assert not set(seen) - set(documented), set(seen) - set(documented)
    undocumented_codes = {op: codes - documented[op] for op, codes in seen.items() if codes - documented[op]}
    assert undocumented_codes == {}, f"codes answered but not in the document: {undocumented_codes}"
    for op, codes in {
        ("POST", "/api/sessions"): {200, 201},
        ("POST", "/p/{profile}/api/sessions"): {200, 201},
        ("POST", "/api/sessions/{session_id}/chat"): {200, 202, 401, 404},
        ("POST", "/v1/runs"): {202, 401},
        ("GET", "/v1/runs/{run_id}"): {200, 401, 404},
    }.items():
        assert codes <= seen[op], (op, seen[op])
