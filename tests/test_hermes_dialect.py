"""The Hermes dialect as Hermes's own clients read it (issue 39, items 7 and 8): event streams in LF lines,
capabilities and /health shaped as a Hermes gateway's (Backchannel under a key of its own), each profile a model,
`/v1/chat/completions` and `/v1/responses` through the one delivery path, `/v1/runs/{id}/steer`, and no stale
answers: a message without a key is a new message.

In-process (Starlette TestClient on the real app) against the echo engine, whose `/sleep N` keeps a turn running.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import api_key
from test_api import Api, _LazyGateway, parse_sse


@pytest.fixture
def api(initialised: Path, cli: Any) -> Iterator[Api]:
    assert cli("profile", "create", "research").exit_code == 0
    with TestClient(_LazyGateway(initialised), raise_server_exceptions=False) as client:
        yield Api(client, api_key(initialised))


def raw_stream(api: Api, method: str, path: str, **kw: Any) -> bytes:
    headers = {"Authorization": f"Bearer {api.key}", **kw.pop("headers", {})}
    with api.client.stream(method, path, headers=headers, **kw) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return response.read()


# --- event streams end their lines in LF ------------------------------------------------------------------


def test_every_event_stream_ends_its_lines_in_lf(api: Api) -> None:
    sid = api.new_session()
    chat = raw_stream(api, "POST", f"/api/sessions/{sid}/chat/stream", json={"message": "lf please"})
    run_id = json.loads(chat.split(b"data: ", 1)[1].split(b"\n", 1)[0])["run_id"]
    events = raw_stream(api, "GET", f"/v1/runs/{run_id}/events")
    message = {"messageId": "m-lf", "role": "ROLE_USER", "parts": [{"text": "lf over a2a"}]}
    a2a = raw_stream(
        api,
        "POST",
        "/a2a/jsonrpc",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}},
        headers={"A2A-Version": "1.0", "Accept": "text/event-stream"},
    )
    for name, body in (("chat/stream", chat), ("run events", events), ("A2A stream", a2a)):
        assert b"\r" not in body, (name, body[:300])
        assert body.endswith(b"\n\n"), (name, body[-300:])
    # what hermes-control-mcp does: split on a blank line, read each block's data
    blocks = [b for b in events.decode().split("\n\n") if b.startswith("data:")]
    assert json.loads(blocks[-1][5:])["event"] == "run.completed"
    assert [name for name, _ in parse_sse(iter(chat.decode().split("\n")))][-1] == "done"


# --- no stale answers ---------------------------------------------------------------------------------------


def test_a_replayed_answer_says_replayed_on_every_surface(api: Api) -> None:
    sid = api.new_session()
    key = {"Idempotency-Key": "ask-once"}
    first = api.chat(sid, "asked once", headers=key).json()
    assert first["replayed"] is False
    assert api.chat(sid, "asked once", headers=key).json()["replayed"] is True
    _response, frames = api.sse("POST", f"/api/sessions/{sid}/chat/stream", json={"message": "asked once"}, headers=key)
    started = next(data for name, data in frames if name == "run.started")
    assert started["replayed"] is True and started["run_id"] == first["run_id"]
    envelope = {"Idempotency-Key": "ask-once", "X-Hermes-Sender-Profile": "ops"}
    assert api.chat(sid, "asked once", headers=envelope).json()["replayed"] is True
    run = api.post("/v1/runs", json={"input": "a run once", "session_id": sid}, headers={"Idempotency-Key": "r1"})
    again = api.post("/v1/runs", json={"input": "a run once", "session_id": sid}, headers={"Idempotency-Key": "r1"})
    assert run.json()["replayed"] is False and again.json()["replayed"] is True
    assert again.headers["idempotency-replayed"] == "true"
    message = {"messageId": "m-once", "role": "ROLE_USER", "parts": [{"text": "over a2a once"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answers = [api.post("/a2a/jsonrpc", json=body, headers={"A2A-Version": "1.0"}).json() for _ in "ab"]
    tasks = [a["result"]["task"] for a in answers]
    assert tasks[0]["id"] == tasks[1]["id"]
    assert "replayed" not in tasks[0].get("metadata", {}) and tasks[1]["metadata"]["replayed"] is True


# --- what the gateway says it is -------------------------------------------------------------------------------


def test_capabilities_and_health_are_a_hermes_gateways_with_backchannel_under_its_own_key(api: Api) -> None:
    for prefix, profile in (("", "default"), ("/p/research", "research")):
        caps = api.get(f"{prefix}/v1/capabilities").json()
        # what hermes-agent-api-client checks, field by field
        assert caps["object"] == "hermes.api_server.capabilities" and caps["platform"] == "hermes-agent"
        assert caps["model"] == profile and caps["auth"] == {"type": "bearer", "required": True, "identity": "person"}
        assert caps["features"]["chat_completions"] is True and caps["features"]["chat_completions_streaming"] is True
        assert caps["features"]["run_steer"] is True and caps["features"]["runs_idempotency"]["durable"] is True
        assert caps["endpoints"]["chat_completions"] == {"method": "POST", "path": "/v1/chat/completions"}
        own = caps["backchannel"]
        assert own["version"] and own["gateway_id"].startswith("gw-") and own["features"]["peer_messages"] is True
        assert "gateway_id" not in caps and "version" not in caps  # Backchannel's facts are under its key
    health = api.get("/health", auth=False).json()
    assert health["platform"] == "hermes-agent" and health["backchannel"]["version"] == health["version"]


def test_each_profile_is_a_model(api: Api) -> None:
    listed = api.get("/v1/models").json()
    assert listed["object"] == "list"
    assert sorted(m["id"] for m in listed["data"]) == ["default", "research"]
    assert all(m["object"] == "model" and isinstance(m["created"], int) for m in listed["data"])
    assert [m["id"] for m in api.get("/p/research/v1/models").json()["data"]] == ["research"]
    assert api.get("/p/nobody/v1/models").status_code == 404


def test_backchannel_knows_its_peers_by_their_own_key_and_older_ones_by_their_platform() -> None:
    from backchannel.net.wire import about_of

    now = about_of({"platform": "hermes-agent", "backchannel": {"version": "0.2.0", "gateway_id": "gw-new"}})
    assert (now.platform, now.version, now.backchannel_id) == ("backchannel", "0.2.0", "gw-new")
    older = about_of({"platform": "backchannel", "version": "0.1.0", "gateway_id": "gw-old"})
    assert (older.platform, older.version, older.backchannel_id) == ("backchannel", "0.1.0", "gw-old")
    hermes = about_of({"platform": "hermes-agent", "version": "0.19.0", "gateway_id": "spoofed"})
    assert (hermes.platform, hermes.version, hermes.backchannel_id) == ("hermes-agent", "0.19.0", None)
