"""A2A as the clients in the wild speak it: a contextId the client chose (Hermes's plugin, LangGraph threads),
streams a client adds up part by part, paths with a trailing slash, parts other than text, a messageId reused
for another message, and errors as the spec maps them. A real gateway process, raw HTTP shaped as those
clients send it, and `a2a-sdk`'s own client.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client.client import Client
from a2a.types import StreamResponse, SubscribeToTaskRequest, TaskState

from a2a_client import (
    JSONRPC,
    REST,
    V1,
    assembled,
    concatenated,
    ledger,
    make_key,
    request,
    rpc,
    send,
    shared_gateway,
    with_client,
)
from conftest import GatewayProcess, GatewayThread, api_key
from gateway_http import set_messaging


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from shared_gateway(tmp_path_factory, "a2a-wild")


def hermes_send(gw: GatewayProcess, key: str, text: str, context_id: str, *, path: str = "") -> dict[str, Any]:
    """What Hermes Agent's A2A plugin (`plugins/platforms/a2a/tools.py::_send_task`) sends and reads: the card's
    first JSONRPC interface, `SendMessage` with a text part and its own `contextId` inside the message."""
    card = httpx.get(f"{gw.url}{path}/.well-known/agent-card.json", trust_env=False).json()
    rpc_url = next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "JSONRPC")
    body = {
        "jsonrpc": "2.0",
        "id": "task-" + uuid.uuid4().hex[:16],
        "method": "SendMessage",
        "params": {
            "message": {
                "role": "ROLE_USER",
                "parts": [{"text": text, "mediaType": "text/plain"}],
                "messageId": uuid.uuid4().hex,
                "contextId": context_id,
            }
        },
    }
    headers = {
        "User-Agent": "Hermes-A2A/1.0",
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "Content-Type": "application/json",
        "A2A-Version": "1.0",
    }
    r = httpx.post(rpc_url, json=body, headers=headers, timeout=30, trust_env=False)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def target_of(gw: GatewayProcess, text: str) -> str:
    """The session (`profile/session`) the run of a message went to, from the person's ledger."""
    (entry,) = [e for e in ledger(gw) if e["message"] == text]
    target: str = entry["target"]
    return target


def new_context() -> str:
    return "ctx-" + uuid.uuid4().hex[:16]


# --- a contextId the client chose ------------------------------------------------------------------------


def test_a_context_id_the_client_chose_starts_a_conversation_that_the_same_caller_continues(gw: GatewayProcess) -> None:
    key = make_key(gw.root, "hermes-one")
    ctx = new_context()
    first = hermes_send(gw, key, "remember the number 7", ctx)["result"]["task"]
    assert first["status"]["state"] == "TASK_STATE_COMPLETED" and first["contextId"] == ctx, first
    again = hermes_send(gw, key, "which number was it?", ctx)["result"]["task"]
    assert again["contextId"] == ctx and again["id"] != first["id"], again
    session = target_of(gw, "remember the number 7")
    assert target_of(gw, "which number was it?") == session  # one conversation: the same session, continued
    profile, _, session_id = session.partition("/")
    assert session_id != ctx and profile == "default"
    r = httpx.get(f"{gw.url}/api/sessions/{session_id}/messages", headers=gw.headers(), trust_env=False)
    said = [m["content"] for m in r.json()["data"] if m["role"] == "user"]
    assert len(said) == 2 and said[1].endswith("which number was it?"), said
    # the caller's reads know the conversation by its own contextId too
    got = rpc(gw, "GetTask", {"id": first["id"]}, headers=V1, key=key)["result"]
    assert got["contextId"] == ctx, got
    listed = rpc(gw, "ListTasks", {"contextId": ctx}, headers=V1, key=key)["result"]
    assert sorted(t["id"] for t in listed["tasks"]) == sorted([first["id"], again["id"]]), listed


def test_another_caller_using_the_same_context_id_gets_a_conversation_of_its_own(gw: GatewayProcess) -> None:
    alice, bob = make_key(gw.root, "ctx-alice"), make_key(gw.root, "ctx-bob")
    ctx = new_context()
    mine = hermes_send(gw, alice, "alice's secret plan", ctx)["result"]["task"]
    theirs = hermes_send(gw, bob, "bob asks about the plan", ctx)["result"]["task"]
    assert mine["contextId"] == theirs["contextId"] == ctx
    assert target_of(gw, "alice's secret plan") != target_of(gw, "bob asks about the plan")
    assert "alice" not in json.dumps(theirs), theirs  # nothing of the first caller's conversation
    assert rpc(gw, "GetTask", {"id": mine["id"]}, headers=V1, key=bob)["error"]["code"] == -32001
    listed = rpc(gw, "ListTasks", {"contextId": ctx}, headers=V1, key=bob)["result"]
    assert [t["id"] for t in listed["tasks"]] == [theirs["id"]], listed
    person = hermes_send(gw, api_key(gw.root), "the person's own", ctx)["result"]["task"]
    others = {target_of(gw, "alice's secret plan"), target_of(gw, "bob asks about the plan")}
    assert person["contextId"] == ctx and target_of(gw, "the person's own") not in others


def test_a_session_the_caller_may_not_reach_is_still_refused_as_a_context_id(gw: GatewayProcess) -> None:
    peer = make_key(gw.root, "ctx-stranger")
    made = httpx.post(f"{gw.url}/api/sessions", json={"title": "private"}, headers=gw.headers(), trust_env=False)
    private = made.json()["session"]["id"]
    refused = hermes_send(gw, peer, "let me into the person's session", private)
    assert refused["error"]["code"] == -32602 and refused["error"]["data"][0]["metadata"]["code"] == "forbidden"
    owner = make_key(gw.root, "ctx-owner")
    ctx = new_context()
    hermes_send(gw, owner, "the owner's conversation", ctx)
    bound = target_of(gw, "the owner's conversation").partition("/")[2]  # its session's real id
    into = hermes_send(gw, peer, "into another peer's conversation", bound)
    assert into["error"]["code"] == -32602, into
    assert not [e for e in ledger(gw) if e["message"].startswith(("let me into", "into another"))]


def test_a_refused_message_starts_no_conversation(gateway: GatewayThread) -> None:
    key = make_key(gateway.root, "unwelcome")
    set_messaging(gateway.root, "default", accept=["peer:someone-else"])
    before = httpx.get(f"{gateway.url}/api/sessions", headers=gateway.headers(), trust_env=False).json()["data"]
    ctx = new_context()
    task = hermes_send(gateway, key, "may I start one?", ctx)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED" and task["contextId"] == ctx, task
    after = httpx.get(f"{gateway.url}/api/sessions", headers=gateway.headers(), trust_env=False).json()["data"]
    assert [s["id"] for s in after] == [s["id"] for s in before]


# --- streams that say each piece once -------------------------------------------------------------------


STREAMED = "alpha beta gamma delta epsilon zeta"


def _sse_concatenated(url: str, key: str, message: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """A client that gathers every artifact part it is sent, as Hermes's plugin does with the card's streaming
    (`_send_task_stream`: SendStreamingMessage, `artifact_parts.extend(...)`, then shown joined with newlines),
    over raw SSE; (the parts, the StreamResponse results)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream", **V1}
    parts: list[str] = []
    results: list[dict[str, Any]] = []
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60, trust_env=False) as r:
        assert r.headers["content-type"].startswith("text/event-stream"), r.read()
        for line in r.iter_lines():
            if line.startswith("data:"):
                result = json.loads(line[5:])["result"]
                results.append(result)
                if "artifactUpdate" in result:
                    parts.extend(p.get("text", "") for p in result["artifactUpdate"]["artifact"]["parts"])
    return parts, results


def test_a_streamed_reply_is_its_text_once_to_a_client_that_joins_parts_and_to_the_sdk(gateway: GatewayThread) -> None:
    from scripted_model import ScriptedModel
    from test_openai_e2e import make_openai_profile

    with ScriptedModel([{"content": STREAMED}] * 2, stream=True, chunk_size=6) as model:
        make_openai_profile(gateway.root, model.base_url)
        ctx = new_context()
        message = {"messageId": "m-chunks", "role": "ROLE_USER", "parts": [{"text": "stream it"}], "contextId": ctx}
        parts, results = _sse_concatenated(f"{gateway.url}/p/coder/a2a/jsonrpc", api_key(gateway.root), message)
        assert "\n".join(parts) == "".join(parts) == STREAMED  # whole, however the parts are joined
        (update,) = [r["artifactUpdate"] for r in results if "artifactUpdate" in r]
        assert update["lastChunk"] and not update.get("append"), update
        statuses = [r["statusUpdate"]["status"] for r in results if "statusUpdate" in r]
        progress = [s["message"] for s in statuses if s["state"] == "TASK_STATE_WORKING" and "message" in s]
        assert len(progress) > 2 and "".join(p["parts"][0]["text"] for p in progress) == STREAMED  # as it came
        said_to = {(r.get("task") or r.get("statusUpdate") or r.get("artifactUpdate"))["contextId"] for r in results}
        assert said_to == {ctx}, results  # every event of the stream echoes the client's own contextId

        async def body(client: Client) -> None:
            seen = [e async for e in client.send_message(request("stream it again", "m-chunks-sdk"))]
            task = assembled(seen)  # the SDK's own rule for append and lastChunk
            assert "".join(p.text for p in task.artifacts[0].parts) == STREAMED, task.artifacts
            assert concatenated(seen) == STREAMED

        with_client(gateway, body, path="/p/coder", streaming=True)


def test_a_turn_that_spoke_before_a_tool_call_ends_its_stream_with_the_reply_alone(gateway: GatewayThread) -> None:
    """What a model streamed before calling a tool is not its reply: the last chunk replaces the artifact."""
    from scripted_model import ScriptedModel
    from test_openai_e2e import make_openai_profile

    replies = [{"content": "let me look first", "tool_calls": [{"name": "list_sessions", "arguments": {}}]}, STREAMED]
    with ScriptedModel(replies, stream=True, chunk_size=6) as model:
        make_openai_profile(gateway.root, model.base_url)

        async def body(client: Client) -> None:
            seen = [e async for e in client.send_message(request("look, then answer", "m-tool-stream"))]
            (update,) = [e.artifact_update for e in seen if e.HasField("artifact_update")]
            assert update.last_chunk and not update.append, update
            assert [p.text for p in assembled(seen).artifacts[0].parts] == [STREAMED]

        with_client(gateway, body, path="/p/coder", streaming=True)


# --- paths with a trailing slash --------------------------------------------------------------------------


def test_json_rpc_and_rest_are_served_with_a_trailing_slash_too(gw: GatewayProcess) -> None:
    """httpx clients with a base URL post to `<url>/` (the TCK, fasta2a) and follow no 307."""
    message = {"messageId": "m-slash", "role": "ROLE_USER", "parts": [{"text": "slash"}]}
    for url in (f"{gw.url}/a2a/jsonrpc/", f"{gw.url}/p/default/a2a/jsonrpc/"):
        r = httpx.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
            headers=gw.headers(**V1),
            trust_env=False,
            follow_redirects=False,
            timeout=30,
        )
        assert r.status_code == 200 and r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", r.text
    with httpx.Client(base_url=f"{gw.url}/a2a/rest", headers=gw.headers(**V1), trust_env=False, timeout=30) as rest:
        sent = rest.post("/message:send/", json={"message": {**message, "messageId": "m-slash-rest"}})
        assert sent.status_code == 200, sent.text
        task_id = sent.json()["task"]["id"]
        got = rest.get(f"/tasks/{task_id}/")
        assert got.status_code == 200 and got.json()["id"] == task_id, got.text


# --- parts other than text ----------------------------------------------------------------------------


def test_a_data_part_reaches_the_agent_as_fenced_json(gw: GatewayProcess) -> None:
    parts = [{"text": "the numbers:"}, {"data": {"count": 42, "tags": ["a", "b"]}}]
    task = rpc(gw, "SendMessage", {"message": {"messageId": "m-data", "role": "ROLE_USER", "parts": parts}}, headers=V1)
    said = task["result"]["task"]["artifacts"][0]["parts"][0]["text"]  # the echo engine says what it was given
    fenced = '```json\n{\n  "count": 42,\n  "tags": [\n    "a",\n    "b"\n  ]\n}\n```'
    assert said == f"default (echo): the numbers:\n\n{fenced}", said


def test_a_file_part_is_kept_with_the_run_and_named_to_the_agent(gw: GatewayProcess) -> None:
    raw = {"raw": "aGVsbG8gZmlsZQ==", "filename": "notes.txt", "mediaType": "text/plain"}
    parts = [{"text": "see the file"}, raw]
    sent = rpc(gw, "SendMessage", {"message": {"messageId": "m-file", "role": "ROLE_USER", "parts": parts}}, headers=V1)
    task = sent["result"]["task"]
    said = task["artifacts"][0]["parts"][0]["text"]
    assert "(file 'notes.txt', text/plain, 10 bytes, kept with this message)" in said, said
    got = rpc(gw, "GetTask", {"id": task["id"]}, headers=V1)["result"]
    assert got["history"][0]["parts"][1] == raw, got["history"][0]  # kept: the same bytes, name and media type


def test_a_file_url_is_named_to_the_agent_and_never_fetched(gw: GatewayProcess) -> None:
    import http.server
    import threading

    hits: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/secret.pdf"
        parts = [{"url": url, "filename": "secret.pdf", "mediaType": "application/pdf"}]
        message = {"messageId": "m-url", "role": "ROLE_USER", "parts": parts}
        task = rpc(gw, "SendMessage", {"message": message}, headers=V1)["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        said = task["artifacts"][0]["parts"][0]["text"]
        assert f"(file 'secret.pdf', application/pdf, at {url}; not fetched)" in said, said
        assert task["history"][0]["parts"][1]["url"] == url
    finally:
        server.shutdown()
    assert hits == []  # the gateway asked nothing of the address it was given (loopback, here)


def test_parts_it_does_not_take_are_refused_and_change_nothing(gw: GatewayProcess) -> None:
    def send_parts(message_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
        error: dict[str, Any] = rpc(
            gw, "SendMessage", {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": parts}}, headers=V1
        )["error"]
        return error

    odd = send_parts("m-odd", [{"text": "odd type"}, {"raw": "dGNr", "mediaType": "application/x-unsupported"}])
    assert odd["code"] == -32005 and odd["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED", odd
    big = send_parts("m-big", [{"text": "too big"}, {"raw": base64.b64encode(b"x" * 600_000).decode()}])
    assert big["code"] == -32602 and big["data"][0]["metadata"]["code"] == "file_too_large", big
    bulky = base64.b64encode(b"x" * 400_000).decode()
    parts = [{"text": "two big files"}, {"raw": bulky}, {"raw": bulky}]  # each kept, but not both in one request
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": parts}}}
    r = httpx.post(f"{gw.url}/a2a/jsonrpc", json=body, headers=gw.headers(**V1), trust_env=False, timeout=30)
    assert r.status_code == 413 and r.json()["error"]["data"][0]["metadata"]["code"] == "body_too_large", r.text
    assert not [e for e in ledger(gw) if e["message"].startswith(("odd type", "too big", "two big"))]


def test_a_structured_reply_is_a_data_part_too(gw: GatewayProcess) -> None:
    """The echo engine's `/json` answers with structured output (one fenced JSON block): the reply artifact
    carries its text, then its value as a data part; a stream's last chunk too."""
    message = {"messageId": "m-json", "role": "ROLE_USER", "parts": [{"text": '/json {"answer": 42, "ok": true}'}]}
    task = rpc(gw, "SendMessage", {"message": message}, headers=V1)["result"]["task"]
    text, data = task["artifacts"][0]["parts"]
    assert text["text"] == '```json\n{\n  "answer": 42,\n  "ok": true\n}\n```', text
    assert data == {"data": {"answer": 42, "ok": True}, "mediaType": "application/json"}, data

    async def body(client: Client) -> None:
        seen: list[StreamResponse] = [e async for e in client.send_message(request("/json [1, 2]", "m-json-stream"))]
        last = [e.artifact_update for e in seen if e.HasField("artifact_update")][-1]
        assert last.last_chunk and last.artifact.parts[-1].WhichOneof("content") == "data", last
        assert [v.number_value for v in last.artifact.parts[-1].data.list_value.values] == [1, 2]

    with_client(gw, body, streaming=True)


# --- a messageId reused for another message ---------------------------------------------------------------


@pytest.mark.parametrize("binding", [JSONRPC, REST])
def test_a_message_id_reused_for_another_message_is_a_new_task_and_an_exact_repeat_a_replay(
    gw: GatewayProcess, binding: str
) -> None:
    async def body(client: Client) -> None:
        first = await send(client, request(f"first words {binding}", f"m-reused-{binding}"))
        repeat = await send(client, request(f"first words {binding}", f"m-reused-{binding}"))
        other = await send(client, request(f"other words {binding}", f"m-reused-{binding}"))
        assert repeat.id == first.id and other.id != first.id
        assert other.status.state == TaskState.TASK_STATE_COMPLETED, other
        assert other.artifacts[0].parts[0].text == f"default (echo): other words {binding}"

    with_client(gw, body, binding=binding)
    assert len([e for e in ledger(gw) if e["message"] == f"first words {binding}"]) == 1
    assert len([e for e in ledger(gw) if e["message"] == f"other words {binding}"]) == 1


# --- errors as the spec maps them -------------------------------------------------------------------------


def _error_info(error: dict[str, Any], key: str = "data") -> dict[str, Any]:
    (info,) = [d for d in error[key] if d.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo"]
    assert info["domain"] == "a2a-protocol.org", info
    return info


def test_an_unknown_task_is_task_not_found_on_every_method_and_on_a_follow_up(gw: GatewayProcess) -> None:
    for method in ("GetTask", "CancelTask", "SubscribeToTask"):
        error = rpc(gw, method, {"id": "run_nothing"}, headers=V1)["error"]
        assert error["code"] == -32001 and _error_info(error)["reason"] == "TASK_NOT_FOUND", (method, error)
    follow = {"messageId": "m-follow", "role": "ROLE_USER", "parts": [{"text": "more"}], "taskId": "run_nothing"}
    error = rpc(gw, "SendMessage", {"message": follow}, headers=V1)["error"]
    assert error["code"] == -32001 and _error_info(error)["reason"] == "TASK_NOT_FOUND", error
    with httpx.Client(base_url=f"{gw.url}/a2a/rest", headers=gw.headers(**V1), trust_env=False, timeout=30) as rest:
        asked = (
            rest.get("/tasks/run_nothing"),
            rest.post("/tasks/run_nothing:cancel"),
            rest.post("/message:send", json={"message": follow}),
        )
        for r in asked:
            assert r.status_code == 404 and r.headers["content-type"] == "application/json", r.text
            assert _error_info(r.json()["error"], "details")["reason"] == "TASK_NOT_FOUND", r.text
        sub = rest.post("/tasks/run_nothing:subscribe")
        assert sub.status_code == 404, sub.text


def test_a_terminal_task_is_not_cancelable_not_subscribable_and_takes_no_follow_up(gw: GatewayProcess) -> None:
    message = {"messageId": "m-done", "role": "ROLE_USER", "parts": [{"text": "done soon"}]}
    task = rpc(gw, "SendMessage", {"message": message}, headers=V1)["result"]["task"]
    cancel = rpc(gw, "CancelTask", {"id": task["id"]}, headers=V1)["error"]
    assert cancel["code"] == -32002 and _error_info(cancel)["reason"] == "TASK_NOT_CANCELABLE", cancel
    subscribe = rpc(gw, "SubscribeToTask", {"id": task["id"]}, headers=V1)["error"]
    assert subscribe["code"] == -32004 and _error_info(subscribe)["reason"] == "UNSUPPORTED_OPERATION", subscribe
    follow = {"messageId": "m-done-2", "role": "ROLE_USER", "parts": [{"text": "and more"}], "taskId": task["id"]}
    ended = rpc(gw, "SendMessage", {"message": follow}, headers=V1)["error"]
    assert ended["code"] == -32004 and task["contextId"] in ended["message"], ended
    mismatch = rpc(gw, "SendMessage", {"message": {**follow, "contextId": "ctx-elsewhere"}}, headers=V1)["error"]
    assert mismatch["code"] == -32602 and _error_info(mismatch)["metadata"]["code"] == "context_mismatch", mismatch
    with httpx.Client(base_url=f"{gw.url}/a2a/rest", headers=gw.headers(**V1), trust_env=False, timeout=30) as rest:
        r = rest.post(f"/tasks/{task['id']}:cancel")
        assert r.status_code == 409 and r.json()["error"]["code"] == 409, r.text  # §5.4: TaskNotCancelable is 409
        assert _error_info(r.json()["error"], "details")["reason"] == "TASK_NOT_CANCELABLE", r.text
    assert not [e for e in ledger(gw) if e["message"] in ("and more",)]


def test_rest_answers_are_application_json(gw: GatewayProcess) -> None:
    """§11.1: the HTTP+JSON binding's content type is application/json, for requests and responses (the SDK
    sends application/a2a+json, which is taken on requests as well)."""
    message = {"messageId": "m-ctype", "role": "ROLE_USER", "parts": [{"text": "which type"}]}
    headers = gw.headers(**V1, **{"Content-Type": "application/a2a+json"})
    r = httpx.post(f"{gw.url}/a2a/rest/message:send", content=json.dumps({"message": message}), headers=headers)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.headers
    listed = httpx.get(f"{gw.url}/a2a/rest/tasks", headers=gw.headers(**V1), trust_env=False)
    assert listed.headers["content-type"] == "application/json", listed.headers


def test_a_body_that_is_not_json_is_a_parse_error_and_a_wrong_content_type_its_own(gw: GatewayProcess) -> None:
    url = f"{gw.url}/a2a/jsonrpc"
    garbled = httpx.post(url, content=b"{'not': json", headers=gw.headers(**V1, **{"Content-Type": "application/json"}))
    assert garbled.json()["error"]["code"] == -32700, garbled.text
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})
    as_text = httpx.post(url, content=body, headers=gw.headers(**V1, **{"Content-Type": "text/plain"}))
    error = as_text.json()["error"]
    assert as_text.status_code == 415 and error["code"] == -32005, as_text.text
    assert _error_info(error)["reason"] == "CONTENT_TYPE_NOT_SUPPORTED", error
    rest = httpx.post(
        f"{gw.url}/a2a/rest/message:send", content=b"{}", headers=gw.headers(**V1, **{"Content-Type": "text/plain"})
    )
    assert rest.status_code == 415 and rest.json()["error"]["code"] == 415, rest.text
    assert _error_info(rest.json()["error"], "details")["reason"] == "CONTENT_TYPE_NOT_SUPPORTED", rest.text


@pytest.mark.parametrize("binding", [JSONRPC, REST])
def test_subscribing_to_an_unknown_task_is_task_not_found_through_the_sdk(gw: GatewayProcess, binding: str) -> None:
    from a2a.utils.errors import TaskNotFoundError

    async def body(client: Client) -> None:
        with pytest.raises(TaskNotFoundError):
            async for _ in client.subscribe(SubscribeToTaskRequest(id="run_nothing")):
                pass

    with_client(gw, body, binding=binding, streaming=True)
