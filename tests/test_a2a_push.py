"""A2A push notifications: configs per task over JSON-RPC and REST (a2a-sdk's own client), a send's own push
config, and a real receiver on loopback (the home allows it) told every change of the task, signed, retried.

A receiver on a private, loopback or metadata address is refused unless the home allows it; a caller's
configs are its own; the bounds of config.yaml hold. The restart that delivers what was owed is in
tests/faults/test_push_faults.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.client.client import Client
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

from a2a_client import JSONRPC, REST, V1, make_key, request, rpc, send, shared_gateway, until, with_client
from backchannel.home import config
from conftest import GatewayProcess, free_port, run_cli
from gateway_http import in_home
from polling import eventually
from push_receiver import COMPLETED, Post, Receiver, pushing_gateway, sent_with_push

BINDINGS = pytest.mark.parametrize("binding", [JSONRPC, REST])
ALLOWING = {"push_allow_private": True, "push_retry_first_seconds": 0.2, "push_retry_max_seconds": 0.8}


@pytest.fixture(scope="module")
def allowing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway whose home allows receivers on loopback, and retries quickly."""
    gw = pushing_gateway(tmp_path_factory.mktemp("push") / "home", **ALLOWING)
    try:
        yield gw
    finally:
        gw.kill()


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway with the default settings: public receivers only."""
    yield from shared_gateway(tmp_path_factory, "push-strict")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def push_config(url: str, *, config_id: str = "", task_id: str = "", token: str = "") -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(id=config_id, task_id=task_id, url=url, token=token)


def ended(posts: list[Post]) -> bool:
    return any(p.state == COMPLETED for p in posts)


@BINDINGS
def test_a_tasks_push_configs_are_created_read_listed_and_deleted(
    allowing: GatewayProcess, receiver: Receiver, binding: str
) -> None:
    async def body(client: Client) -> None:
        task = await send(client, request("/sleep 1\nlong work", f"m-crud-{binding}", immediately=True))
        made = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(
                task_id=task.id,
                id="hook-1",
                url=receiver.url,
                token="tok-1",
                authentication=AuthenticationInfo(scheme="Bearer", credentials="cred-1"),
            )
        )
        assert (made.id, made.task_id, made.url, made.token) == ("hook-1", task.id, receiver.url, "tok-1")
        assert (made.authentication.scheme, made.authentication.credentials) == ("Bearer", "cred-1")
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
        )
        assert got == made
        unnamed = await client.create_task_push_notification_config(push_config(receiver.url, task_id=task.id))
        assert unnamed.id == task.id  # the SDK's rule: an empty id is the task's
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert sorted(c.id for c in listed.configs) == sorted(["hook-1", task.id])
        replaced = await client.create_task_push_notification_config(
            push_config(receiver.url + "?v=2", config_id="hook-1", task_id=task.id)
        )
        assert replaced.url == receiver.url + "?v=2" and replaced.token == ""
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
        )
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == [task.id]
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
            )
        with pytest.raises(TaskNotFoundError):
            await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id="run_nosuch")
            )

    with_client(allowing, body, binding=binding)


def test_a_send_with_a_push_config_tells_the_receiver_each_change_once_then_the_reply(
    allowing: GatewayProcess, receiver: Receiver
) -> None:
    push = {"url": receiver.url, "token": "tok-send", "authentication": {"scheme": "Bearer", "credentials": "secret-1"}}
    answer = rpc(allowing, "SendMessage", sent_with_push("/sleep 0.5\npush me", "m-push-send", push), headers=V1)
    task = answer["result"]["task"]
    assert task["status"]["state"] == COMPLETED, answer  # a blocking send still answers with the ended task
    posts = receiver.wait_for(ended)
    assert {p.json[p.kind]["taskId"] for p in posts} == {task["id"]}
    states = [p.state for p in posts if p.state]
    assert states[-1] == COMPLETED and "TASK_STATE_WORKING" in states, states
    assert len(states) == len(set(states)), f"a state was told twice: {states}"
    assert len({p.id for p in posts}) == len(posts) and all(p.id.startswith("pn_") for p in posts)
    (artifact,) = [p.json["artifactUpdate"] for p in posts if p.kind == "artifactUpdate"]
    assert artifact["artifact"]["parts"] == [{"text": "default (echo): push me"}] and artifact["lastChunk"] is True
    assert posts.index(next(p for p in posts if p.kind == "artifactUpdate")) < len(posts) - 1  # before the end
    final = posts[-1].json["statusUpdate"]["status"]
    assert final["message"]["parts"] == [{"text": "default (echo): push me"}]
    for post in posts:
        assert post.headers["content-type"] == "application/json"
        assert post.headers["x-a2a-notification-token"] == "tok-send"
        assert post.headers["authorization"] == "Bearer secret-1"
    # the config a send gave is the task's, under the task's id
    got = rpc(allowing, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": task["id"]}, headers=V1)
    assert got["result"]["url"] == receiver.url, got


def test_each_notification_is_signed_with_hmac_sha256_of_its_body_keyed_on_the_token(
    allowing: GatewayProcess, receiver: Receiver
) -> None:
    push = {"url": receiver.url, "token": "sign-with-this"}
    rpc(allowing, "SendMessage", sent_with_push("signé ✓", "m-push-sign", push), headers=V1)
    posts = receiver.wait_for(ended)
    assert posts
    for post in posts:
        expected = hmac.new(b"sign-with-this", post.body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(post.headers["x-a2a-signature"], expected), post
        # Hermes's way: the parsed body dumped again with sorted keys is the same bytes, so it verifies too
        assert json.dumps(post.json, sort_keys=True, ensure_ascii=False).encode() == post.body
    forged = hmac.new(b"another-token", posts[0].body, hashlib.sha256).hexdigest()
    assert posts[0].headers["x-a2a-signature"] != forged


def test_a_receiver_that_fails_first_gets_the_same_notification_again_after_doubling_waits(
    allowing: GatewayProcess,
) -> None:
    with Receiver(fail_first=3) as failing:
        push = {"url": failing.url, "token": "tok-retry"}
        task = rpc(allowing, "SendMessage", sent_with_push("retry me", "m-push-retry", push), headers=V1)["result"][
            "task"
        ]
        delivered = failing.wait_for(ended)
        first = failing.posts[0]
        assert [p.status for p in failing.posts[:4]] == [500, 500, 500, 200]
        assert {p.id for p in failing.posts[:4]} == {first.id} and {p.body for p in failing.posts[:4]} == {first.body}
        assert delivered[0].id == first.id and ended(delivered)
    waits = re.findall(rf"push {first.id} of task {task['id']} .*next attempt in ([0-9.]+)s", allowing.log())
    assert [float(w) for w in waits] == [0.2, 0.4, 0.8], allowing.log()[-3000:]


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://localhost:9/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://[::1]:9/hook", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "cloud metadata"),
        ("http://[::ffff:192.168.0.7]/hook", "private"),
    ],
)
def test_a_receiver_on_a_private_address_is_refused_unless_the_home_allows_it(
    strict: GatewayProcess, url: str, kind: str
) -> None:
    key = make_key(strict.root, f"strict-{abs(hash(url)) % 10**8}")
    refused = rpc(strict, "SendMessage", sent_with_push("tell me", "m-private", {"url": url}), headers=V1, key=key)
    error = refused["error"]
    assert error["code"] == -32602, refused
    assert f"a {kind} address" in error["message"] and "gateway.a2a.push_allow_private" in error["message"], error
    assert rpc(strict, "ListTasks", {}, headers=V1, key=key)["result"]["tasks"] == []  # nothing was sent
    task = rpc(strict, "SendMessage", {"message": request_message("plain", "m-plain")}, headers=V1, key=key)
    task_id = task["result"]["task"]["id"]
    created = rpc(strict, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url}, headers=V1, key=key)
    assert created["error"]["code"] == -32602 and kind in created["error"]["message"], created
    listed = rpc(strict, "ListTaskPushNotificationConfigs", {"taskId": task_id}, headers=V1, key=key)
    assert listed["result"].get("configs", []) == []


def request_message(text: str, message_id: str) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}


def test_a_metadata_address_stays_refused_where_private_receivers_are_allowed(allowing: GatewayProcess) -> None:
    push = {"url": "http://169.254.169.254/latest/meta-data"}
    refused = rpc(allowing, "SendMessage", sent_with_push("steal", "m-metadata", push), headers=V1)
    assert refused["error"]["code"] == -32602 and "cloud metadata" in refused["error"]["message"], refused


def test_another_caller_can_neither_read_nor_delete_your_configs(allowing: GatewayProcess, receiver: Receiver) -> None:
    mine, theirs = make_key(allowing.root, "push-mine"), make_key(allowing.root, "push-theirs")
    task = rpc(allowing, "SendMessage", {"message": request_message("mine", "m-mine")}, headers=V1, key=mine)
    task_id = task["result"]["task"]["id"]
    made = rpc(
        allowing,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, "id": "mine-1", "url": receiver.url, "token": "t"},
        headers=V1,
        key=mine,
    )
    assert made["result"]["id"] == "mine-1", made
    for who in (theirs, None):  # another peer's key, and the person's: neither sent that task
        for method, params in (
            ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "mine-1"}),
            ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
            ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "mine-1"}),
            ("CreateTaskPushNotificationConfig", {"taskId": task_id, "id": "mine-1", "url": receiver.url}),
        ):
            answer = rpc(allowing, method, params, headers=V1, key=who)
            assert answer["error"]["code"] == -32001, (method, answer)  # TaskNotFound: nothing said of it
    still = rpc(allowing, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "mine-1"}, headers=V1, key=mine)
    assert still["result"]["url"] == receiver.url and still["result"]["token"] == "t", still


def test_the_bounds_of_configs_per_caller_and_of_a_notifications_body_hold(tmp_path: Path, receiver: Receiver) -> None:
    gw = pushing_gateway(
        tmp_path / "bounded", push_allow_hosts=["127.0.0.1"], push_max_configs_per_caller=2, push_max_body_bytes=1024
    )
    try:
        long_text = "word " * 400  # the reply is past the body bound
        task = rpc(gw, "SendMessage", sent_with_push(long_text, "m-long", {"url": receiver.url}), headers=V1)
        posts = receiver.wait_for(ended)
        assert all(len(p.body) <= 1024 for p in posts) and not [p for p in posts if p.kind == "artifactUpdate"]
        final = posts[-1].json["statusUpdate"]["status"]
        assert "read the task with GetTask" in final["message"]["parts"][0]["text"], final
        slow = [
            rpc(
                gw,
                "SendMessage",
                {
                    "message": request_message(f"/sleep 5\nslow {i}", f"m-slow-{i}"),
                    "configuration": {"returnImmediately": True},
                },
                headers=V1,
            )["result"]["task"]["id"]
            for i in range(3)
        ]
        for task_id in slow[:2]:
            made = rpc(gw, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": receiver.url}, headers=V1)
            assert made["result"]["id"] == task_id, made
        third = rpc(gw, "CreateTaskPushNotificationConfig", {"taskId": slow[2], "url": receiver.url}, headers=V1)
        assert third["error"]["code"] == -32602 and "push_max_configs_per_caller" in third["error"]["message"], third
        refused = rpc(gw, "SendMessage", sent_with_push("one more", "m-over", {"url": receiver.url}), headers=V1)
        assert refused["error"]["code"] == -32602 and "push_max_configs_per_caller" in refused["error"]["message"]
        listed = rpc(gw, "ListTasks", {}, headers=V1)["result"]["tasks"]
        assert "one more" not in json.dumps(listed)  # refused before anything was sent
        assert task["result"]["task"]["status"]["state"] == COMPLETED
    finally:
        gw.kill()


def test_the_push_settings_are_checked_when_the_home_is_loaded(tmp_path: Path) -> None:
    root = tmp_path / "bad"
    with in_home(root):
        assert run_cli("init").exit_code == 0
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["gateway"]["a2a"] = {"push_allow_hosts": ["hooks.internal", "not a host!"]}
    config.write_yaml(path, data)
    started = subprocess.run(
        [sys.executable, "-m", "backchannel", "gateway", "--port", str(free_port())],
        env={"BACKCHANNEL_HOME": str(root), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2, started
    assert "gateway.a2a.push_allow_hosts[1]: 'not a host!' is neither a host name" in started.stderr, started.stderr
    assert "Traceback" not in started.stderr
    data["gateway"]["a2a"] = {"push_allow_private": "yes"}
    config.write_yaml(path, data)
    with in_home(root):
        shown = run_cli("runs", "list")
    assert shown.exit_code == 2 and "gateway.a2a.push_allow_private must be true or false" in shown.stderr, shown


def test_a_config_made_on_an_ended_task_is_told_its_end(allowing: GatewayProcess, receiver: Receiver) -> None:
    async def body(client: Client) -> None:
        task = await send(client, request("already done", "m-done"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        await client.create_task_push_notification_config(push_config(receiver.url, task_id=task.id))
        posts = receiver.wait_for(ended)
        assert [p.state for p in posts if p.state] == [COMPLETED]
        await until(client, task.id, lambda t: True)

    with_client(allowing, body)


def test_a_0_3_client_sets_its_config_by_the_0_3_methods_and_its_receiver_gets_0_3_tasks(
    allowing: GatewayProcess, receiver: Receiver
) -> None:
    """No A2A-Version: a 0.3 client (§3.6.2), whose SDK's receivers read the Task in its 0.3 shape."""
    message = {"messageId": "m-03", "role": "user", "kind": "message", "parts": [{"kind": "text", "text": "old"}]}
    task = rpc(allowing, "message/send", {"message": message, "configuration": {"blocking": False}})["result"]
    config = {"id": "c-03", "url": receiver.url, "token": "t-03"}
    config["authentication"] = {"schemes": ["Bearer"], "credentials": "cred-03"}
    made = rpc(allowing, "tasks/pushNotificationConfig/set", {"taskId": task["id"], "pushNotificationConfig": config})
    assert made["result"]["pushNotificationConfig"] == config, made
    got = rpc(allowing, "tasks/pushNotificationConfig/get", {"id": task["id"], "pushNotificationConfigId": "c-03"})
    assert got["result"] == made["result"], got
    posts = receiver.wait_for(lambda posts: any(p.json.get("status", {}).get("state") == "completed" for p in posts))
    assert posts and all(p.json["kind"] == "task" and p.json["id"] == task["id"] for p in posts), posts
    assert posts[-1].json["artifacts"][0]["parts"] == [{"kind": "text", "text": "default (echo): old"}]
    assert all(p.headers["authorization"] == "Bearer cred-03" for p in posts)
    listed = rpc(allowing, "tasks/pushNotificationConfig/list", {"id": task["id"]})
    assert [c["pushNotificationConfig"]["id"] for c in listed["result"]] == ["c-03"], listed
    rpc(allowing, "tasks/pushNotificationConfig/delete", {"id": task["id"], "pushNotificationConfigId": "c-03"})
    assert rpc(allowing, "tasks/pushNotificationConfig/list", {"id": task["id"]})["result"] == []


def test_where_a_receiver_leads_is_checked_again_when_each_notification_is_sent(tmp_path: Path) -> None:
    """A config made while the home allowed loopback receivers is not delivered once it does not: the address
    is checked at each connection (a name through the resolver, an address as written), not only when given."""
    gw = pushing_gateway(tmp_path / "rechecked", **ALLOWING)
    try:
        with Receiver() as receiver:
            receiver.down = True  # nothing is delivered before the home changes its mind
            by_name = receiver.url.replace("127.0.0.1", "localhost")
            rpc(gw, "SendMessage", sent_with_push("by name", "m-by-name", {"url": by_name}), headers=V1)
            rpc(gw, "SendMessage", sent_with_push("by address", "m-by-address", {"url": receiver.url}), headers=V1)
            receiver.wait_for(lambda _d: {p.path for p in receiver.posts} == {"/hook"} and len(receiver.posts) >= 2)
            assert gw.terminate() == 0
            path = config.config_path(gw.root)
            data = config.load_yaml(path)
            data["gateway"]["a2a"] = {"push_retry_first_seconds": 0.2, "push_retry_max_seconds": 0.4}
            config.write_yaml(path, data)
            receiver.down = False
            tried_before = len(receiver.posts)
            gw.start()
            log = until_logged(gw, r"leads to 'localhost', and \S+ is a loopback address")
            assert re.search(r"leads to '127\.0\.0\.1', and 127\.0\.0\.1 is a loopback address", log), log[-2000:]
            until_logged(gw, r"leads to 'localhost'.*next attempt in 0\.4s")  # tried again, refused again
            assert len(receiver.posts) == tried_before and not receiver.delivered
    finally:
        gw.kill()


def test_on_a_postgresql_store_configs_are_made_replaced_and_told(
    tmp_path: Path, postgres_url: str, receiver: Receiver
) -> None:
    gw = pushing_gateway(tmp_path / "pg", store_url=postgres_url, **ALLOWING)
    try:
        sent = sent_with_push("on postgres", "m-pg", {"url": receiver.url, "token": "tok-pg"})
        task = rpc(gw, "SendMessage", sent, headers=V1)["result"]["task"]
        posts = receiver.wait_for(ended)
        assert ended(posts) and {p.json[p.kind]["taskId"] for p in posts} == {task["id"]}, gw.log()[-3000:]
        for url in (receiver.url, receiver.url + "?v=2"):  # made, then its receiver replaced
            made = rpc(
                gw, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "c", "url": url}, headers=V1
            )
            assert made.get("result", {}).get("url") == url, made
    finally:
        gw.kill()


def until_logged(gw: GatewayProcess, pattern: str, *, within: float = 30.0) -> str:
    """The gateway's log once a line matches `pattern`."""
    return eventually(
        gw.log,
        lambda log: re.search(pattern, log),
        within=within,
        what=lambda log: f"no line matches {pattern!r}:\n{log[-3000:]}",
    )
