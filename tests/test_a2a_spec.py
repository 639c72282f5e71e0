"""A2A v1.0's MUST requirements that Backchannel implements, each named after its section of the spec.

All through `a2a-sdk`'s own client (or raw HTTP where the client would hide what is checked), against one
real gateway process that the module shares.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client.client import Client
from a2a.types import ListTasksRequest, StreamResponse, SubscribeToTaskRequest, TaskState
from a2a.utils.errors import UnsupportedOperationError

from a2a_client import JSONRPC, REST, V1, make_key, request, rpc, send, shared_gateway, until, with_client
from conftest import GatewayProcess, run_cli
from gateway_http import in_home

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from shared_gateway(tmp_path_factory, "a2a-spec")


async def events(stream: Any) -> list[StreamResponse]:
    return [e async for e in stream]


def _state(event: StreamResponse) -> TaskState:
    return event.task.status.state if event.HasField("task") else event.status_update.status.state


@pytest.mark.parametrize("binding", [JSONRPC, REST])
def test_spec_3_1_2_a_task_stream_begins_with_the_task_and_closes_when_it_is_terminal(
    gw: GatewayProcess, binding: str
) -> None:
    async def body(client: Client) -> None:
        seen = await events(client.send_message(request("/sleep 0.3\nlifecycle", f"m-3.1.2-{binding}")))
        assert seen[0].HasField("task")
        assert all(e.HasField("status_update") or e.HasField("artifact_update") for e in seen[1:]), seen
        states = [_state(e) for e in seen if e.HasField("task") or e.HasField("status_update")]
        assert states[-1] in TERMINAL and not TERMINAL & set(states[:-1]), states  # closed at the first end

    with_client(gw, body, binding=binding, streaming=True)


def test_spec_3_1_4_list_returns_only_tasks_visible_to_the_caller(gw: GatewayProcess) -> None:
    """§3.1.4 and §13.1: another caller's tasks are never listed."""
    key = make_key(gw.root, "stranger")

    async def as_person(client: Client) -> None:
        await send(client, request("the person's own", "m-3.1.4-person"))

    async def as_stranger(client: Client) -> None:
        listed = await client.list_tasks(ListTasksRequest(page_size=100))
        assert listed.total_size == 0 and list(listed.tasks) == [], listed

    with_client(gw, as_person)
    with_client(gw, as_stranger, key=key)


def test_spec_3_1_4_tasks_are_sorted_by_last_update_descending(gw: GatewayProcess) -> None:
    with in_home(gw.root):
        assert run_cli("profile", "create", "sorting").exit_code == 0
    sessions = []
    for title in ("first", "second"):
        r = httpx.post(f"{gw.url}/p/sorting/api/sessions", json={"title": title}, headers=gw.headers(), trust_env=False)
        assert r.status_code == 201, r.text
        sessions.append(r.json()["session"]["id"])

    async def body(client: Client) -> None:
        slow = await send(
            client, request("/sleep 0.5\nupdated last", "m-sort-slow", immediately=True, context_id=sessions[0])
        )
        fast = await send(client, request("updated first", "m-sort-fast", context_id=sessions[1]))
        await until(client, slow.id, lambda t: t.status.state == TaskState.TASK_STATE_COMPLETED)
        listed = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [slow.id, fast.id]  # sent first, updated last
        stamps = [t.status.timestamp.ToNanoseconds() for t in listed.tasks]
        assert stamps == sorted(stamps, reverse=True), stamps

    with_client(gw, body, path="/p/sorting")


def test_spec_3_1_4_next_page_token_is_always_present_and_empty_on_the_last_page(gw: GatewayProcess) -> None:
    key = make_key(gw.root, "pager")
    for n in range(3):
        assert "result" in rpc(gw, "SendMessage", _params(f"page {n}", f"m-page-{n}"), headers=V1, key=key)
    first = rpc(gw, "ListTasks", {"pageSize": 2}, headers=V1, key=key)["result"]
    assert first["nextPageToken"] and first["totalSize"] == 3 and len(first["tasks"]) == 2, first
    last = rpc(gw, "ListTasks", {"pageSize": 2, "pageToken": first["nextPageToken"]}, headers=V1, key=key)["result"]
    assert last["nextPageToken"] == "" and len(last["tasks"]) == 1, last  # present, and empty
    seen = [t["id"] for t in first["tasks"] + last["tasks"]]
    assert len(set(seen)) == 3
    bad = rpc(gw, "ListTasks", {"pageToken": "not-ours"}, headers=V1, key=key)
    assert bad["error"]["code"] == -32602 and "not one this server gave" in bad["error"]["message"], bad
    too_big = rpc(gw, "ListTasks", {"pageSize": 101}, headers=V1, key=key)
    assert too_big["error"]["code"] == -32602, too_big


def test_spec_3_1_4_artifacts_are_omitted_unless_asked_for(gw: GatewayProcess) -> None:
    key = make_key(gw.root, "artifacts")
    assert "result" in rpc(gw, "SendMessage", _params("with a reply", "m-artifacts"), headers=V1, key=key)
    plain = rpc(gw, "ListTasks", {}, headers=V1, key=key)["result"]["tasks"]
    assert plain and all("artifacts" not in t for t in plain), plain
    asked = rpc(gw, "ListTasks", {"includeArtifacts": True}, headers=V1, key=key)["result"]["tasks"]
    assert asked[0]["artifacts"][0]["parts"][0]["text"] == "default (echo): with a reply", asked


def test_spec_3_2_4_history_length_zero_returns_no_history(gw: GatewayProcess) -> None:
    key = make_key(gw.root, "history")
    assert "result" in rpc(gw, "SendMessage", _params("some history", "m-history"), headers=V1, key=key)
    none = rpc(gw, "ListTasks", {"historyLength": 0}, headers=V1, key=key)["result"]["tasks"]
    assert none and not any(t.get("history") for t in none), none
    one = rpc(gw, "ListTasks", {"historyLength": 1}, headers=V1, key=key)["result"]["tasks"]
    assert [m["role"] for m in one[0]["history"]] == ["ROLE_AGENT"], one  # the most recent message


def test_spec_3_2_4_send_and_get_keep_history_within_history_length(gw: GatewayProcess) -> None:
    key = make_key(gw.root, "history-send")
    params = {**_params("a short memory", "m-history-send"), "configuration": {"historyLength": 1}}
    sent = rpc(gw, "SendMessage", params, headers=V1, key=key)["result"]["task"]
    assert [m["role"] for m in sent["history"]] == ["ROLE_AGENT"], sent  # the most recent message only
    assert sent["artifacts"][0]["parts"][0]["text"] == "default (echo): a short memory", sent
    none = rpc(gw, "GetTask", {"id": sent["id"], "historyLength": 0}, headers=V1, key=key)["result"]
    assert not none.get("history") and none["status"]["state"] == "TASK_STATE_COMPLETED", none
    whole = rpc(gw, "GetTask", {"id": sent["id"]}, headers=V1, key=key)["result"]
    assert [m["role"] for m in whole["history"]] == ["ROLE_USER", "ROLE_AGENT"], whole  # unset: all of it
    negative = {**_params("never sent", "m-history-negative"), "configuration": {"historyLength": -1}}
    refused = rpc(gw, "SendMessage", negative, headers=V1, key=key)
    assert refused["error"]["code"] == -32602 and "non-negative" in refused["error"]["message"], refused
    listed = rpc(gw, "ListTasks", {}, headers=V1, key=key)["result"]["tasks"]
    assert [t["id"] for t in listed] == [sent["id"]], listed  # the refused one was never sent


def test_spec_3_1_6_subscribing_to_a_terminal_task_is_unsupported_operation(gw: GatewayProcess) -> None:
    ids: list[str] = []

    async def start(client: Client) -> None:
        done = await send(client, request("over already", "m-3.1.6-done"))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        ids.append(done.id)

    async def follow(client: Client) -> None:
        with pytest.raises(UnsupportedOperationError, match="has ended already"):
            await events(client.subscribe(SubscribeToTaskRequest(id=ids[0])))

    with_client(gw, start)
    with_client(gw, follow, streaming=True)
    answer = rpc(gw, "SubscribeToTask", {"id": "run_nothing"}, headers=V1)
    assert answer["error"]["code"] == -32001, answer  # and an unknown task is TaskNotFound


def test_spec_3_1_6_the_first_event_is_the_task_in_its_current_state(gw: GatewayProcess) -> None:
    ids: list[str] = []

    async def start(client: Client) -> None:
        task = await send(client, request("/sleep 1\nwatched", "m-3.1.6-now", immediately=True))
        await until(client, task.id, lambda t: t.status.state == TaskState.TASK_STATE_WORKING)
        ids.append(task.id)

    async def follow(client: Client) -> None:
        seen = await events(client.subscribe(SubscribeToTaskRequest(id=ids[0])))
        assert seen[0].task.id == ids[0] and seen[0].task.status.state == TaskState.TASK_STATE_WORKING, seen[0]
        assert _state(seen[-1]) == TaskState.TASK_STATE_COMPLETED

    with_client(gw, start)
    with_client(gw, follow, streaming=True)


def test_spec_3_5_2_every_stream_of_a_task_gets_the_same_events_in_the_same_order(gw: GatewayProcess) -> None:
    ids: list[str] = []

    async def start(client: Client) -> None:
        ids.append((await send(client, request("/sleep 1\ntwo watchers", "m-3.5.2", immediately=True))).id)

    async def both(client: Client) -> None:
        one, two = await asyncio.gather(
            events(client.subscribe(SubscribeToTaskRequest(id=ids[0]))),
            events(client.subscribe(SubscribeToTaskRequest(id=ids[0]))),
        )
        assert [e.WhichOneof("payload") for e in one[1:]] == [e.WhichOneof("payload") for e in two[1:]]
        assert one[1:] == two[1:] and _state(one[-1]) == TaskState.TASK_STATE_COMPLETED

    with_client(gw, start)
    with_client(gw, both, streaming=True)


def test_spec_3_6_1_the_version_may_be_a_request_parameter(gw: GatewayProcess) -> None:
    answer = rpc(gw, "SendMessage", _params("versioned by query", "m-3.6.1"), query="?A2A-Version=1.0")
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
    r = httpx.get(f"{gw.url}/a2a/rest/tasks?A2A-Version=1.0", headers=gw.headers(), timeout=10, trust_env=False)
    assert r.status_code == 200 and "tasks" in r.json(), r.text


def test_spec_3_6_2_an_empty_version_is_0_3(gw: GatewayProcess) -> None:
    for headers in ({}, {"A2A-Version": ""}):
        answer = rpc(gw, "SendMessage", _params("no version", "m-3.6.2"), headers=headers)
        assert answer["error"]["code"] == -32009, answer  # a 1.0 method asked in 0.3
    old = rpc(gw, "tasks/get", {"id": "run_nothing"})
    assert old["error"]["code"] == -32001, old  # 0.3's own method: answered in 0.3 (task not found)
    unsupported = rpc(gw, "SendMessage", _params("a future version", "m-3.6.2-v9"), headers={"A2A-Version": "9.0"})
    assert unsupported["error"]["code"] == -32009, unsupported


def _params(text: str, message_id: str) -> dict[str, Any]:
    return {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}}
