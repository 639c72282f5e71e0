"""Every profile an A2A agent: a real gateway process, called through `a2a-sdk`'s own client over JSON-RPC
and REST.

The card is public; SendMessage (blocking, returnImmediately, streamed), SubscribeToTask, GetTask, ListTasks
and CancelTask are the runs of the delivery service, as the key's caller: the person's key, or a peer's
(`backchannel key create`). 0.3 clients are answered too. The spec's MUSTs are in test_a2a_spec.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client.client import Client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from a2a_client import (
    JSONRPC,
    REST,
    V1,
    concatenated,
    ledger,
    make_key,
    request,
    rpc,
    send,
    shared_gateway,
    until,
    with_client,
)
from backchannel.a2a_extension import card_entry
from conftest import GatewayProcess, GatewayThread, run_cli
from gateway_http import set_messaging

BINDINGS = pytest.mark.parametrize("binding", [JSONRPC, REST])


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway for the tests that change nothing of its configuration."""
    yield from shared_gateway(tmp_path_factory, "a2a-server")


def test_the_agent_card_is_public_and_names_the_profile_its_soul_and_skills(gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    skill = gateway.root / "profiles" / "research" / "skills" / "summaries" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: summaries\ndescription: Summarise a paper in five lines.\n---\nSteps.\n")
    (gateway.root / "profiles" / "research" / "SOUL.md").write_text(
        "# Research\n\nYou read papers.\nCarefully.\n\nMore."
    )
    card = httpx.get(f"{gateway.url}/p/research/.well-known/agent-card.json", trust_env=False).json()
    assert card["name"] == "research"
    assert card["description"] == "You read papers. Carefully."
    assert card["skills"] == [
        {
            "id": "summaries",
            "name": "summaries",
            "description": "Summarise a paper in five lines.",
            "tags": ["summaries"],
        }
    ]
    base = f"{gateway.url}/p/research/a2a"
    assert card["supportedInterfaces"] == [
        {"url": f"{base}/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": f"{base}/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": f"{base}/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": f"{base}/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
    ]
    declared = {k: v for k, v in card_entry().items() if v is not False}  # ProtoJSON leaves out a false `required`
    assert card["capabilities"] == {"streaming": True, "pushNotifications": True, "extensions": [declared]}
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    # nothing of 0.3's card in 1.0's (its schema refuses them): 0.3 clients read the card's 0.3 shape elsewhere
    assert not {"url", "preferredTransport", "additionalInterfaces", "protocolVersion", "security"} & set(card), card
    old = httpx.get(f"{gateway.url}/p/research/.well-known/agent.json", trust_env=False).json()
    assert old["url"] == f"{base}/jsonrpc" and old["preferredTransport"] == "JSONRPC"
    assert old["protocolVersion"] == "0.3"
    assert old["additionalInterfaces"] == [{"transport": "HTTP+JSON", "url": f"{base}/rest"}]
    assert old["security"] == [{"bearer": []}] and "supportedInterfaces" not in old, old
    asked = httpx.get(f"{gateway.url}/p/research/.well-known/agent-card.json", headers={"A2A-Version": "0.3"})
    assert asked.json() == old
    root = httpx.get(f"{gateway.url}/.well-known/agent-card.json", trust_env=False).json()
    assert root["name"] == "default" and root["supportedInterfaces"][0]["url"] == f"{gateway.url}/a2a/jsonrpc"
    assert [s["id"] for s in root["skills"]] == ["chat"]  # a profile without skills of its own can still chat


def test_send_blocking_answers_with_the_completed_task(gateway: GatewayThread) -> None:
    async def body(client: Client) -> None:
        task = await send(client, request("hello over A2A", "m-1"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert task.id.startswith("run_")
        assert task.artifacts[0].parts[0].text == "default (echo): hello over A2A"
        assert task.status.message.parts[0].text == "default (echo): hello over A2A"
        assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]
        assert task.history[0].message_id == "m-1"
        # the context is the session: no contextId was the profile's Bot Chat, and naming it stays there
        again = await send(client, request("and again", "m-2", context_id=task.context_id))
        assert again.context_id == task.context_id and again.id != task.id

    with_client(gateway, body)
    sent = [e for e in ledger(gateway) if e["message"] == "hello over A2A"]
    assert [e["sender"] for e in sent] == ["human:a2a"]


def test_send_immediately_gives_the_task_at_once_then_get_task_until_completed(gateway: GatewayThread) -> None:
    async def body(client: Client) -> None:
        task = await send(client, request("/sleep 1\nslow hello", "m-slow", immediately=True))
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING), task
        done = await until(client, task.id, lambda t: t.status.state == TaskState.TASK_STATE_COMPLETED)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
        assert done.artifacts[0].parts[0].text == "default (echo): slow hello"

    with_client(gateway, body)


def test_a_replay_by_message_id_returns_the_same_task_and_runs_once(gateway: GatewayThread) -> None:
    async def body(client: Client) -> None:
        first = await send(client, request("only once", "m-once"))
        replay = await send(client, request("only once", "m-once"))
        assert replay.id == first.id and replay.status.state == TaskState.TASK_STATE_COMPLETED

    with_client(gateway, body)
    assert len([e for e in ledger(gateway) if e["message"] == "only once"]) == 1


def test_cancel_stops_a_slow_task(gateway: GatewayThread) -> None:
    async def body(client: Client) -> None:
        task = await send(client, request("/sleep 30\ntoo slow", "m-cancel", immediately=True))
        await until(client, task.id, lambda t: t.status.state == TaskState.TASK_STATE_WORKING)
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled  # cut: 30 s had not passed
        seen = await client.get_task(GetTaskRequest(id=task.id))
        assert seen.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError, match="ended already"):
            await client.cancel_task(CancelTaskRequest(id=task.id))

    with_client(gateway, body)


def test_a_peer_key_the_profile_does_not_accept_is_rejected_with_the_refusal_code(gateway: GatewayThread) -> None:
    key = make_key(gateway.root, "spark")
    set_messaging(gateway.root, "default", accept=["peer:someone-else"])

    async def body(client: Client) -> None:
        task = await send(client, request("let me in", "m-peer"))
        assert task.status.state == TaskState.TASK_STATE_REJECTED, task
        assert task.status.message.metadata["code"] == "not_allowed"
        with pytest.raises(TaskNotFoundError):  # a refused message is no run
            await client.get_task(GetTaskRequest(id=task.id))

    with_client(gateway, body, key=key)
    assert not [e for e in ledger(gateway) if e["message"] == "let me in" and e.get("run_id")]


def test_a_peer_keys_message_is_framed_as_that_peers(gateway: GatewayThread) -> None:
    key = make_key(gateway.root, "spark")
    sessions: list[str] = []

    async def body(client: Client) -> None:
        task = await send(client, request("hello from spark", "m-spark"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        sessions.append(task.context_id)

    with_client(gateway, body, key=key)
    (entry,) = [e for e in ledger(gateway) if e["message"] == "hello from spark"]
    assert entry["sender"] == "peer:spark/default"
    assert sessions == ["own"]  # no contextId: the key's own conversation, a session of the profile
    session_id = entry["target"].partition("/")[2]
    r = httpx.get(f"{gateway.url}/api/sessions/{session_id}/messages", headers=gateway.headers(), trust_env=False)
    users = [m["content"] for m in r.json()["data"] if m["role"] == "user"]
    assert len(users) == 1 and users[0].startswith("[Message from peer spark"), users


def test_another_callers_task_is_not_found(gateway: GatewayThread) -> None:
    key = make_key(gateway.root, "spark")
    ids: list[str] = []

    async def as_person(client: Client) -> None:
        ids.append((await send(client, request("the person's", "m-mine"))).id)

    async def as_peer(client: Client) -> None:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=ids[0]))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id=ids[0]))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="run_nothing"))

    with_client(gateway, as_person)
    with_client(gateway, as_peer, key=key)


def test_no_key_is_401_and_changes_nothing(gateway: GatewayThread) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-nokey", "role": "ROLE_USER", "parts": [{"text": "who am I"}]}},
    }
    for path in ("/a2a/jsonrpc", "/p/default/a2a/jsonrpc", "/a2a/jsonrpc/"):
        r = httpx.post(f"{gateway.url}{path}", json=body, headers={"A2A-Version": "1.0"}, trust_env=False)
        error = r.json()["error"]  # JSON-RPC's error object, as an A2A client reads it
        assert r.status_code == 401 and error["code"] == -32600, r.text
        assert error["data"][0]["metadata"] == {"code": "invalid_api_key"}, r.text
    assert not [e for e in ledger(gateway) if e["message"] == "who am I"]


def test_a_held_message_is_a_task_that_waits_with_a_status_message(gateway: GatewayThread) -> None:
    key = make_key(gateway.root, "spark")
    set_messaging(gateway.root, "default", hold=["peer:*"])

    async def body(client: Client) -> None:
        task = await send(client, request("may I", "m-held"))  # blocking, yet answered at once: a person decides
        assert task.status.state == TaskState.TASK_STATE_SUBMITTED, task
        assert task.status.message.metadata["code"] == "held"
        assert "approve" in task.status.message.parts[0].text
        seen = await client.get_task(GetTaskRequest(id=task.id))
        assert seen.status.state == TaskState.TASK_STATE_SUBMITTED
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))  # it never ran: cancelled, as queued
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled

    with_client(gateway, body, key=key)


def test_bad_input_gets_a_clear_error_and_changes_nothing(gateway: GatewayThread) -> None:
    def call(params: dict[str, Any]) -> dict[str, Any]:
        r = httpx.post(
            f"{gateway.url}/a2a/jsonrpc",
            json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params},
            headers=gateway.headers(**{"A2A-Version": "1.0"}),
            trust_env=False,
            timeout=10,
        )
        assert r.status_code == 200, r.text
        error: dict[str, Any] = r.json()["error"]
        return error

    def message(**fields: Any) -> dict[str, Any]:
        return {"message": {"messageId": "m-bad", "role": "ROLE_USER", "parts": [{"text": "bad one"}], **fields}}

    garbled = call(message(contextId="line\nbreak"))
    assert garbled["code"] == -32602 and garbled["data"][0]["metadata"] == {"code": "invalid_context_id"}, garbled
    follow_up = call(message(taskId="run_x"))
    assert follow_up["code"] == -32001 and "no task 'run_x'" in follow_up["message"], follow_up
    odd = call({"message": {"messageId": "m-odd", "role": "ROLE_USER", "parts": [{"raw": "AA==", "mediaType": "x/y"}]}})
    assert odd["code"] == -32005 and "'x/y'" in odd["message"], odd
    empty = call({"message": {"messageId": "m-empty", "role": "ROLE_USER", "parts": [{"text": "  "}]}})
    assert empty["code"] == -32602 and empty["data"][0]["metadata"] == {"code": "missing_message"}, empty
    assert not [e for e in ledger(gateway) if e.get("run_id")]


def test_the_sdk_is_imported_only_when_a2a_is_asked_for() -> None:
    probe = "import sys, backchannel.api.app; print(any(m == 'a2a' or m.startswith('a2a.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out


def test_a_body_over_the_limit_is_413_in_json_rpcs_shape_and_changes_nothing(gateway: GatewayThread) -> None:
    """A JSON-RPC client reads a JSON-RPC error object, whatever refused the request (here the gateway's body
    limit, before the SDK saw it), not the gateway's REST envelope."""
    text = "x" * 1_100_000
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-big", "role": "ROLE_USER", "parts": [{"text": text}]}},
    }
    r = httpx.post(
        f"{gateway.url}/a2a/jsonrpc",
        json=body,
        headers=gateway.headers(**{"A2A-Version": "1.0"}),
        trust_env=False,
        timeout=10,
    )
    answer = r.json()
    assert r.status_code == 413 and answer["jsonrpc"] == "2.0" and answer["error"]["code"] == -32600, r.text
    assert answer["error"]["data"][0]["metadata"] == {"code": "body_too_large"}, r.text
    assert not [e for e in ledger(gateway) if e.get("run_id")]
    garbled = httpx.post(
        f"{gateway.url}/a2a/jsonrpc", content=b"{not json", headers=gateway.headers(), trust_env=False, timeout=10
    )
    assert garbled.status_code == 200 and garbled.json()["error"]["code"] == -32700, garbled.text


@pytest.mark.parametrize(
    ("what", "params", "code", "says"),
    [
        ("nested too deep", b'{"message": ' + b"[" * 5000 + b"]" * 5000 + b"}", "invalid_json", "deeper than 32"),
        ("a number too long", b'{"message": {"messageId": ' + b"9" * 5000 + b"}}", "invalid_json", "5000 characters"),
        (
            "a lone surrogate",
            b'{"message": {"messageId": "m-s", "role": "ROLE_USER", "parts": [{"text": "\\ud800"}]}}',
            "invalid_payload",
            "lone UTF-16 surrogate",
        ),
    ],
)
def test_a_body_past_the_json_bounds_is_a_parse_error_that_names_it_and_changes_nothing(
    gateway: GatewayThread, what: str, params: bytes, code: str, says: str
) -> None:
    """The JSON-RPC body is parsed within the gateway's JSON bounds, as every other route's: the caller's
    mistake is JSON-RPC's parse error with the bound it broke, not an internal error."""
    body = b'{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": ' + params + b"}"
    headers = gateway.headers(**{"A2A-Version": "1.0", "Content-Type": "application/json"})
    r = httpx.post(f"{gateway.url}/a2a/jsonrpc", content=body, headers=headers, trust_env=False, timeout=10)
    error = r.json()["error"]
    assert r.status_code == 200 and error["code"] == -32700, (what, r.text)
    assert says in error["message"] and error["data"][0]["metadata"] == {"code": code}, (what, error)
    assert not [e for e in ledger(gateway) if e.get("run_id")]


def test_a_send_whose_push_receiver_is_no_http_url_is_refused_and_nothing_is_sent(shared: GatewayProcess) -> None:
    """A send's push config is checked before anything is sent (tests/test_a2a_push.py has the rest of push)."""
    key = make_key(shared.root, "push")
    push = {"taskPushNotificationConfig": {"url": "ftp://example.invalid/hook"}}
    message = {"messageId": "m-push", "role": "ROLE_USER", "parts": [{"text": "tell me later"}]}
    params = {"message": message, "configuration": push}
    refused = rpc(shared, "SendMessage", params, headers=V1, key=key)
    assert refused["error"]["code"] == -32602, refused
    assert "must be an http or https URL" in refused["error"]["message"], refused
    assert refused["error"]["data"][0]["metadata"]["code"] == "invalid_push_url", refused
    assert rpc(shared, "ListTasks", {}, headers=V1, key=key)["result"]["tasks"] == []


def test_a_peers_message_is_from_the_profile_its_extension_names_and_listed_with_the_peers_others(
    shared: GatewayProcess,
) -> None:
    """As `X-Hermes-Sender-Profile` in the Hermes dialect: `peer:NAME/<profile>`; the peer's tasks are all of
    its own (whichever profile sent them), never those of another peer whose name starts with its own."""
    alpha, alpha_2 = make_key(shared.root, "prof-a"), make_key(shared.root, "prof-a-2")
    extension = {**V1, "A2A-Extensions": card_entry()["uri"]}

    def send_as(key: str, text: str, message_id: str, profile: object = None) -> dict[str, Any]:
        message: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
        if profile is not None:
            message["metadata"] = {card_entry()["uri"]: {"profile": profile}}
        return rpc(shared, "SendMessage", {"message": message}, headers=extension, key=key)

    research = send_as(alpha, "from prof-a research", "m-prof-1", "research")["result"]["task"]
    plain = send_as(alpha, "from prof-a", "m-prof-2")["result"]["task"]
    other = send_as(alpha_2, "from prof-a-2 research", "m-prof-3", "research")["result"]["task"]
    senders = {e["message"]: e["sender"] for e in ledger(shared) if e["message"].startswith("from prof-a")}
    assert senders == {
        "from prof-a research": "peer:prof-a/research",
        "from prof-a": "peer:prof-a/default",
        "from prof-a-2 research": "peer:prof-a-2/research",
    }, senders
    listed = rpc(shared, "ListTasks", {}, headers=V1, key=alpha)["result"]
    assert sorted(t["id"] for t in listed["tasks"]) == sorted([research["id"], plain["id"]]), listed
    assert listed["totalSize"] == 2, listed
    assert rpc(shared, "GetTask", {"id": research["id"]}, headers=V1, key=alpha)["result"]["id"] == research["id"]
    assert rpc(shared, "GetTask", {"id": other["id"]}, headers=V1, key=alpha)["error"]["code"] == -32001
    bad = send_as(alpha, "never recorded", "m-prof-4", "no spaces")
    assert bad["error"]["code"] == -32602 and "profile" in bad["error"]["message"], bad
    assert not [e for e in ledger(shared) if e["message"] == "never recorded"]


# --- streaming, subscribing, listing, REST, 0.3 ---------------------------------------------------------


async def events(stream: Any) -> list[StreamResponse]:
    return [e async for e in stream]


def kinds(seen: list[StreamResponse]) -> list[str]:
    return [str(e.WhichOneof("payload")) for e in seen]


@BINDINGS
def test_a_streamed_message_is_its_task_then_the_reply_then_its_end(shared: GatewayProcess, binding: str) -> None:
    async def body(client: Client) -> None:
        seen = await events(client.send_message(request(f"stream me {binding}", f"m-stream-{binding}")))
        assert kinds(seen)[0] == "task" and kinds(seen)[-1] == "status_update", kinds(seen)
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        (reply,) = [e.artifact_update for e in seen if e.HasField("artifact_update")]  # the reply's text, once
        assert reply.last_chunk and not reply.append and len(reply.artifact.parts) == 1
        assert concatenated(seen) == f"default (echo): stream me {binding}"  # said once, whole
        task_id = seen[0].task.id
        stored = await client.get_task(GetTaskRequest(id=task_id))
        assert stored.status.state == TaskState.TASK_STATE_COMPLETED

    with_client(shared, body, binding=binding, streaming=True)
    assert len([e for e in ledger(shared) if e["message"] == f"stream me {binding}"]) == 1


@BINDINGS
def test_subscribe_follows_a_running_task_to_its_end(shared: GatewayProcess, binding: str) -> None:
    ids: list[str] = []

    async def start(client: Client) -> None:
        ids.append((await send(client, request("/sleep 1\nfollow me", f"m-follow-{binding}", immediately=True))).id)

    async def follow(client: Client) -> None:
        seen = await events(client.subscribe(SubscribeToTaskRequest(id=ids[0])))
        assert kinds(seen)[0] == "task" and seen[0].task.id == ids[0]
        assert seen[0].task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, seen[-1]
        assert concatenated(seen) == "default (echo): follow me"

    with_client(shared, start, binding=binding)
    with_client(shared, follow, binding=binding, streaming=True)


def test_a_resubscribe_after_a_gateway_restart_replays_from_the_store(gateway_process: GatewayProcess) -> None:
    gateway = gateway_process  # SIGKILL needs a process
    ids: list[str] = []

    async def before(client: Client) -> None:
        # Long enough that the turn run again after the restart is still going when the client subscribes, however
        # slowly a loaded machine starts the gateway (a task that ended takes no subscription).
        task = await send(client, request("/sleep 6\nsurvive", "m-restart", immediately=True))
        await until(client, task.id, lambda t: t.status.state == TaskState.TASK_STATE_WORKING)
        ids.append(task.id)

    with_client(gateway, before)
    gateway.kill()  # SIGKILL mid-turn: the run is reclaimed and run again by the next gateway
    gateway.start()

    async def after(client: Client) -> None:
        seen = await events(client.subscribe(SubscribeToTaskRequest(id=ids[0])))
        assert kinds(seen)[0] == "task" and seen[0].task.id == ids[0]
        assert seen[0].task.history[0].parts[0].text == "/sleep 6\nsurvive"  # the task as the store has it
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, seen[-1]
        assert concatenated(seen) == "default (echo): survive"

    with_client(gateway, after, binding=REST, streaming=True)
    assert len([e for e in ledger(gateway) if e["message"] == "/sleep 6\nsurvive"]) == 1


def test_list_tasks_shows_the_callers_own_a_page_at_a_time(shared: GatewayProcess) -> None:
    key = make_key(shared.root, "lister")
    contexts: list[str] = []

    async def as_peer(client: Client) -> None:
        for n in range(3):
            contexts.append((await send(client, request(f"peer task {n}", f"m-list-{n}"))).context_id)
        first = await client.list_tasks(ListTasksRequest(page_size=2))
        assert first.total_size == 3 and first.page_size == 2 and len(first.tasks) == 2 and first.next_page_token
        rest = await client.list_tasks(ListTasksRequest(page_size=2, page_token=first.next_page_token))
        assert len(rest.tasks) == 1 and rest.next_page_token == ""
        listed = [t.history[0].parts[0].text for t in [*first.tasks, *rest.tasks]]
        assert listed == ["peer task 2", "peer task 1", "peer task 0"]  # most recently updated first
        in_context = await client.list_tasks(ListTasksRequest(context_id=contexts[0]))
        assert in_context.total_size == 3
        working = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_WORKING))
        assert working.total_size == 0 and list(working.tasks) == []

    with_client(shared, as_peer, key=key, binding=REST)

    async def as_person(client: Client) -> None:
        mine = await client.list_tasks(ListTasksRequest(page_size=100))
        assert not [t for t in mine.tasks if t.history[0].parts[0].text.startswith("peer task")]

    with_client(shared, as_person)


def test_cancel_over_rest_stops_a_slow_task(shared: GatewayProcess) -> None:
    async def body(client: Client) -> None:
        task = await send(client, request("/sleep 30\ncancel me over REST", "m-rest-cancel", immediately=True))
        await until(client, task.id, lambda t: t.status.state == TaskState.TASK_STATE_WORKING)
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
        with pytest.raises(TaskNotCancelableError, match="ended already"):
            await client.cancel_task(CancelTaskRequest(id=task.id))

    with_client(shared, body, binding=REST)


def test_a_0_3_client_is_answered_in_0_3(shared: GatewayProcess) -> None:
    message = {
        "messageId": "m-old",
        "role": "user",
        "kind": "message",
        "parts": [{"kind": "text", "text": "old style"}],
    }
    sent = rpc(shared, "message/send", {"message": message})  # no A2A-Version: 0.3
    task = sent["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed", sent
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "default (echo): old style"}]
    got = rpc(shared, "tasks/get", {"id": task["id"]})
    assert got["result"]["id"] == task["id"] and got["result"]["status"]["state"] == "completed", got
    r = httpx.post(
        f"{shared.url}/a2a/rest/v1/message:send",
        # 0.3's HTTP+JSON is its protobuf's JSON: the parts are `content`
        json={"message": {"messageId": "m-old-rest", "role": "ROLE_USER", "content": [{"text": "old style"}]}},
        headers=shared.headers(),
        timeout=30,
        trust_env=False,
    )
    assert r.status_code == 200 and r.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED", r.text
    assert len([e for e in ledger(shared) if e["message"] == "old style"]) == 2


def test_a_request_without_a_version_is_taken_as_0_3(shared: GatewayProcess) -> None:
    params = {"message": {"messageId": "m-nover", "role": "ROLE_USER", "parts": [{"text": "which version"}]}}
    answer = rpc(shared, "SendMessage", params)
    assert answer["error"]["code"] == -32009 and "'0.3' is not supported" in answer["error"]["message"], answer
    r = httpx.get(f"{shared.url}/a2a/rest/tasks", headers=shared.headers(), timeout=10, trust_env=False)
    assert r.status_code == 400 and r.json()["error"]["status"] == "FAILED_PRECONDITION", r.text
    assert not [e for e in ledger(shared) if e["message"] == "which version"]
    assert "result" in rpc(shared, "SendMessage", params, headers=V1)


def _status_of(r: httpx.Response) -> tuple[int, str, str]:
    """An HTTP+JSON error as the binding gives it (google.rpc.Status): its code, status and our code."""
    error = r.json()["error"]
    assert error["code"] == r.status_code, r.text
    return error["code"], error["status"], error["details"][0]["metadata"].get("code", "")


def test_rest_routes_are_behind_the_key_and_unknown_ones_are_404(shared: GatewayProcess) -> None:
    for path in ("/a2a/rest/tasks", "/p/default/a2a/rest/tasks", "/a2a/rest/tasks/"):
        r = httpx.get(f"{shared.url}{path}", headers=V1, trust_env=False, timeout=10)
        assert _status_of(r) == (401, "UNAUTHENTICATED", "invalid_api_key"), r.text
        ok = httpx.get(f"{shared.url}{path}", headers=shared.headers(**V1), trust_env=False, timeout=10)
        assert ok.status_code == 200 and "tasks" in ok.json(), ok.text
    missing = httpx.get(f"{shared.url}/a2a/rest/nothing/here", headers=shared.headers(**V1), trust_env=False)
    assert _status_of(missing) == (404, "NOT_FOUND", "not_found"), missing.text
    nobody = httpx.get(f"{shared.url}/p/nobody/a2a/rest/tasks", headers=shared.headers(**V1), trust_env=False)
    assert _status_of(nobody) == (404, "NOT_FOUND", "profile_not_found"), nobody.text
