"""A2A push notifications across a SIGKILL: what was owed is delivered after the restart, each notification
with the id it had before, and no state of the task told twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_client import V1, rpc
from conftest import GatewayProcess
from push_receiver import COMPLETED, Post, Receiver, pushing_gateway, sent_with_push

pytestmark = pytest.mark.faults

SETTINGS = {"push_allow_private": True, "push_retry_first_seconds": 0.2, "push_retry_max_seconds": 0.5}


@pytest.fixture
def gateway_home(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = pushing_gateway(tmp_path / "home", **SETTINGS, push_max_attempts=1000)
    try:
        yield gw
    finally:
        gw.kill()


def ended(posts: list[Post]) -> bool:
    return any(p.state == COMPLETED for p in posts)


def told_once(posts: list[Post], *, repeats: bool = False) -> None:
    """Each state in one notification; with `repeats`, a notification may come again (at least once: the kill
    can fall between the receiver's 200 and its record), with the same id and the same body."""
    by_id: dict[str, bytes] = {}
    for post in posts:
        assert by_id.setdefault(post.id, post.body) == post.body, f"notification {post.id} changed between attempts"
    if not repeats:
        assert len(by_id) == len(posts), f"a notification was delivered twice: {[p.id for p in posts]}"
    unique = list({p.id: p for p in posts}.values())
    states = [p.state for p in unique if p.state]
    assert len(states) == len(set(states)), f"a state was told in two notifications: {states}"


def test_notifications_owed_when_the_gateway_is_killed_are_delivered_after_its_restart(
    gateway_home: GatewayProcess,
) -> None:
    gw = gateway_home
    with Receiver() as receiver:
        receiver.down = True  # every POST answered 503: the notifications stay owed
        push = {"url": receiver.url, "token": "tok-owed"}
        task = rpc(gw, "SendMessage", sent_with_push("owed to you", "m-owed", push), headers=V1)["result"]["task"]
        assert task["status"]["state"] == COMPLETED
        receiver.wait_for(lambda _delivered: len(receiver.posts) >= 2)  # tried, and tried again
        tried = {p.id for p in receiver.posts}
        gw.kill()  # SIGKILL
        receiver.down = False
        gw.start()
        delivered = receiver.wait_for(ended)
    assert ended(delivered), receiver.posts
    told_once(delivered)
    assert delivered[0].id in tried  # the same notification, by the id the receiver dedups on
    assert [p.kind for p in delivered][-2:] == ["artifactUpdate", "statusUpdate"] and delivered[-1].state == COMPLETED
    assert {p.json[p.kind]["taskId"] for p in delivered} == {task["id"]}


def test_a_turn_cut_by_sigkill_runs_again_and_its_receiver_is_told_its_end_once(gateway_home: GatewayProcess) -> None:
    gw = gateway_home
    with Receiver() as receiver:
        push = {"url": receiver.url}
        sent = sent_with_push("/sleep 2\ncut and again", "m-cut", push, returnImmediately=True)
        task = rpc(gw, "SendMessage", sent, headers=V1)["result"]["task"]
        receiver.until_state("TASK_STATE_WORKING")
        gw.kill()  # SIGKILL mid-turn: its run is reclaimed and run again after the restart
        gw.start()
        delivered = receiver.wait_for(ended)
    assert ended(delivered), receiver.posts
    told_once(delivered, repeats=True)
    (artifact,) = {p.id: p for p in delivered if p.kind == "artifactUpdate"}.values()
    assert artifact.json["artifactUpdate"]["artifact"]["parts"] == [{"text": "default (echo): cut and again"}]
    assert {p.json[p.kind]["taskId"] for p in delivered} == {task["id"]}
