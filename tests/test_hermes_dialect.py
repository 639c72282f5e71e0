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

from a2a_client import make_key
from conftest import api_key
from test_api import Api, _LazyGateway, parse_sse


@pytest.fixture
def api(initialised: Path, cli: Any) -> Iterator[Api]:
    assert cli("profile", "create", "research").exit_code == 0
    with TestClient(_LazyGateway(initialised), raise_server_exceptions=False) as client:
        yield Api(client, api_key(initialised))


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


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
    rest = raw_stream(
        api,
        "POST",
        "/a2a/rest/message:stream",
        json={"message": {**message, "messageId": "m-lf-rest"}},
        headers={"A2A-Version": "1.0", "Accept": "text/event-stream"},
    )
    for name, body in (("chat/stream", chat), ("run events", events), ("A2A stream", a2a), ("A2A REST", rest)):
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
        assert own["version"] and own["gateway_id"].startswith("gw-") and own["features"]["messages"] is True
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


# --- /v1/chat/completions and /v1/responses ----------------------------------------------------------------------


def completion(api: Api, messages: list[dict[str, Any]], prefix: str = "", **kw: Any) -> Any:
    return api.post(f"{prefix}/v1/chat/completions", json={"messages": messages, **kw.pop("json", {})}, **kw)


def test_a_chat_completion_delivers_the_last_user_message_into_a_new_session_or_the_one_named(api: Api) -> None:
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "earlier words"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": [{"type": "text", "text": "the last "}, {"type": "text", "text": "question"}]},
    ]
    r = completion(api, history, json={"model": "research"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == "research" and body["id"].startswith("chatcmpl-")
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "stop" and choice["message"] == {
        "role": "assistant",
        "content": "research (echo): the last question",
    }
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    sid = r.headers["x-hermes-session-id"]
    assert sid == body["session_id"] and api.run(body["run_id"])["profile"] == "research"
    said = api.messages(sid, prefix="/p/research")
    assert [m["content"] for m in said if m["role"] == "user"] == ["the last question"]  # the session holds history
    again = completion(
        api,
        [{"role": "user", "content": "and then?"}],
        json={"model": "research"},
        headers={"X-Hermes-Session-Id": sid},
    )
    assert again.headers["x-hermes-session-id"] == sid
    assert [m["content"] for m in api.messages(sid, prefix="/p/research") if m["role"] == "user"][-1] == "and then?"
    fresh = completion(api, [{"role": "user", "content": "hello"}])  # no model: the path's profile
    assert fresh.json()["model"] == "default" and fresh.headers["x-hermes-session-id"] != sid
    assert completion(api, [{"role": "user", "content": "hi"}], prefix="/p/research").json()["model"] == "research"


def test_a_chat_completion_refuses_what_it_cannot_deliver_in_the_envelope(api: Api) -> None:
    for model, status, code in (("nobody", 404, "model_not_found"), (5, 400, "invalid_request")):
        r = completion(api, [{"role": "user", "content": "hi"}], json={"model": model})
        assert r.status_code == status and r.json()["error"]["code"] == code, r.text
    r = completion(api, [{"role": "user", "content": "hi"}], prefix="/p/research", json={"model": "default"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "model_not_found"
    for messages in ([], [{"role": "assistant", "content": "no user"}], [{"role": "user", "content": "  "}]):
        r = completion(api, messages)
        assert r.status_code == 400 and r.json()["error"]["code"] == "missing_message", r.text
    r = completion(api, [{"role": "user", "content": "hi"}], headers={"X-Hermes-Session-Id": "s-missing"})
    assert r.status_code == 404 and set(r.json()["error"]) >= {"message", "type", "code"}
    r = completion(api, [{"role": "user", "content": "/fail on purpose"}])
    assert r.status_code == 424 and r.json()["error"]["code"], r.text


def test_a_chat_completion_streams_openai_chunks_ending_in_done(api: Api) -> None:
    tool = '/tool memory {"action": "add", "target": "memory", "content": "x"}'
    raw = raw_stream(
        api,
        "POST",
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": f"{tool}\nstreamed"}], "stream": True},
    ).decode()
    frames = raw.split("\n\n")
    assert frames[-1] == "" and frames[-2] == "data: [DONE]"
    chunks = [json.loads(f[6:]) for f in frames if f.startswith("data: {")]
    progress = [json.loads(f.split("data: ", 1)[1]) for f in frames if f.startswith("event: hermes.tool.progress")]
    assert all(c["object"] == "chat.completion.chunk" and len(c["choices"]) == 1 for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert "streamed" in text and text == api.run(chunks[0]["run_id"])["output"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and set(chunks[-1]["usage"]) >= {"total_tokens"}
    assert [(p["tool"], p["status"]) for p in progress] == [("memory", "running"), ("memory", "completed")]
    assert progress[0]["toolCallId"] == progress[1]["toolCallId"]
    failed = raw_stream(
        api,
        "POST",
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "/fail nope"}], "stream": True},
    ).decode()
    last = json.loads(failed.split("\n\n")[-3][6:])
    assert last["choices"][0]["finish_reason"] == "error" and last["hermes"]["failed"] is True


def test_a_response_is_delivered_and_continued_by_previous_response_id(api: Api) -> None:
    r = api.post("/v1/responses", json={"model": "research", "input": "first words"})
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["object"] == "response" and first["status"] == "completed" and first["id"].startswith("resp_")
    assert first["output"][0]["content"][0] == {
        "type": "output_text",
        "text": "research (echo): first words",
        "annotations": [],
    }
    items = [{"role": "user", "content": [{"type": "input_text", "text": "second words"}]}]
    then = api.post("/v1/responses", json={"model": "research", "input": items, "previous_response_id": first["id"]})
    assert then.status_code == 200 and then.headers["x-hermes-session-id"] == first["session_id"], then.text
    raw = raw_stream(api, "POST", "/v1/responses", json={"input": "streamed response", "stream": True}).decode()
    names = [f.split("\n", 1)[0].removeprefix("event: ") for f in raw.split("\n\n") if f]
    assert names[0] == "response.created" and names[-1] == "response.completed", names
    assert "response.output_text.delta" in names and "response.output_text.done" in names
    done = json.loads(raw.split("\n\n")[-2].split("data: ", 1)[1])
    assert done["response"]["output"][0]["content"][0]["text"] == "default (echo): streamed response"
    unknown = api.post("/v1/responses", json={"input": "x", "previous_response_id": "resp_nothing"})
    assert unknown.status_code == 404


def test_a_keyless_completion_asked_again_is_new_and_only_an_sdk_retry_is_answered_from_its_first_run(api: Api) -> None:
    asked = [{"role": "user", "content": "what time is it?"}]
    first = completion(api, asked).json()
    again = completion(api, asked).json()
    assert again["run_id"] != first["run_id"] and again["replayed"] is False  # a new question gets a new answer
    retried = completion(api, asked, headers={"X-Stainless-Retry-Count": "1"}).json()  # no session named: the profile
    assert retried["run_id"] == again["run_id"] and retried["replayed"] is True
    assert retried["session_id"] == again["session_id"]
    named = {"X-Hermes-Session-Id": first["session_id"]}
    in_session = completion(api, asked, headers=named).json()
    assert in_session["run_id"] != first["run_id"]
    assert (
        completion(api, asked, headers={**named, "X-Stainless-Retry-Count": "2"}).json()["run_id"]
        == in_session["run_id"]
    )
    keyed = {"Idempotency-Key": "completion-once"}
    once = completion(api, asked, headers=keyed).json()
    twice = completion(api, asked, headers=keyed)  # a new session each time, the same message: its first run
    assert twice.status_code == 200 and twice.json()["run_id"] == once["run_id"] and twice.json()["replayed"] is True
    response = api.post("/v1/responses", json={"input": "respond once"}, headers={"Idempotency-Key": "resp-once"})
    replay = api.post("/v1/responses", json={"input": "respond once"}, headers={"Idempotency-Key": "resp-once"})
    assert response.json()["replayed"] is False and replay.json()["replayed"] is True
    assert replay.json()["id"] == response.json()["id"]


# --- /v1/runs/{id}/steer ------------------------------------------------------------------------------------------


def test_a_steer_joins_its_runs_turn_from_its_own_sender_only(api: Api, initialised: Path) -> None:
    sid = api.new_session()
    run_id = api.post("/v1/runs", json={"input": "/sleep 1.5\nlong turn", "session_id": sid}).json()["run_id"]
    api.wait_run(run_id, ("running",))
    r = api.post(f"/v1/runs/{run_id}/steer", json={"input": "also this"})
    assert r.status_code == 200, r.text
    steer = r.json()
    assert steer["object"] == "hermes.run.steer" and steer["run_id"] == run_id and steer["accepted"] is True
    assert steer["landed"] == "steered"
    done = api.wait_run(run_id)
    assert done["output"] == "default (echo): also this"  # the running turn read it and answered it
    assert api.wait_run(steer["steer_run_id"])["output"] == done["output"]  # one turn, one reply
    finished = api.post(f"/v1/runs/{run_id}/steer", json={"message": "too late"})
    assert finished.status_code == 409 and finished.json()["error"]["code"] == "run_not_accepting_steer"
    assert api.post(f"/v1/runs/{run_id}/steer", json={"text": " "}).status_code == 400
    assert api.post("/v1/runs/run_missing/steer", json={"input": "x"}).status_code == 404
    # a peer's key steers only its own runs: the person's turn is not its to steer
    peer_key = make_key(initialised, "steerer")
    other = api.post("/v1/runs", json={"input": "/sleep 1.5\nthe person's", "session_id": sid}).json()["run_id"]
    api.wait_run(other, ("running",))
    refused = api.post(f"/v1/runs/{other}/steer", json={"input": "mine now"}, auth=False, headers=bearer(peer_key))
    assert refused.status_code == 403, refused.text
    api.wait_run(other)
    assert "mine now" not in json.dumps(api.messages(sid))
