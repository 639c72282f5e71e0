"""A2A push notifications while receivers hang: a peer key whose receivers accept the connection and never
answer holds only its share of the delivery slots; another key's notifications go on meanwhile, and the
person's never wait behind a peer's, not even when the peers' slots are all held.

The hung POSTs outlast each test (`push_timeout_seconds: 120`): what a good receiver gets, it gets while every
hung POST is still held, which each test checks when it has arrived. Each test runs on SQLite and on a
PostgreSQL store (where a notification is also claimed for one gateway).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_client import V1, make_key, rpc
from bad_servers import SilentPeer
from conftest import GatewayProcess
from push_receiver import COMPLETED, Receiver, pushing_gateway, sent_with_push

HANGING = {
    "push_allow_private": True,
    "push_timeout_seconds": 120,
    "push_slots": 4,
    "push_slots_per_key": 2,
    "push_max_configs_per_task": 20,
}
HUNG_CONFIGS = 20  # per hostile key: more than every slot there is (and than the 16 all callers once shared)
WITHIN = 60.0  # generous: a good receiver is told in well under a second; the hung POSTs last 120 s


@pytest.fixture(params=["sqlite", "postgresql"])
def gw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway that lets POSTs hang for 120 s, with 4 peer slots (2 per key), on each kind of store."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    gateway = pushing_gateway(tmp_path / "home", store_url=url, **HANGING)
    try:
        yield gateway
    finally:
        gateway.kill()


def hang(gw: GatewayProcess, name: str, receiver: SilentPeer) -> None:
    """A peer key `name` with HUNG_CONFIGS configs on a task of its own, all pointing at the hung `receiver`:
    each is owed the task's end at once."""
    key = make_key(gw.root, name)
    message = {"messageId": f"m-{name}", "role": "ROLE_USER", "parts": [{"text": f"{name} works"}]}
    task = rpc(gw, "SendMessage", {"message": message}, headers=V1, key=key)["result"]["task"]["id"]
    for i in range(HUNG_CONFIGS):
        url = f"{receiver.url}/hook-{i}"
        made = rpc(
            gw, "CreateTaskPushNotificationConfig", {"taskId": task, "id": f"h{i}", "url": url}, headers=V1, key=key
        )
        assert made.get("result", {}).get("id") == f"h{i}", made


def no_hung_post_ended(gw: GatewayProcess) -> None:
    log = gw.log()
    assert "did not answer" not in log and "given up" not in log, log[-3000:]


def test_a_keys_hung_receivers_hold_its_share_of_the_slots_while_another_keys_notifications_go_on(
    gw: GatewayProcess,
) -> None:
    with SilentPeer() as hung, Receiver() as receiver:
        hang(gw, "hanging", hung)
        assert hung.wait_for_connections(2) >= 2  # its POSTs started, and hang
        other = make_key(gw.root, "other")
        sent = sent_with_push("told on time", "m-other", {"url": receiver.url})
        assert rpc(gw, "SendMessage", sent, headers=V1, key=other)["result"]["task"]["status"]["state"] == COMPLETED
        posts = receiver.until_state(COMPLETED, within=WITHIN)
        assert [p.state for p in posts if p.state][-1:] == [COMPLETED], gw.log()[-3000:]
        assert hung.connections == 2  # its share (push_slots_per_key), never more
        no_hung_post_ended(gw)


def test_the_persons_notifications_never_wait_behind_a_peers_even_with_every_peer_slot_held(gw: GatewayProcess) -> None:
    with SilentPeer() as hung, Receiver() as receiver:
        hang(gw, "hanging-1", hung)
        hang(gw, "hanging-2", hung)
        assert hung.wait_for_connections(4) >= 4  # every peer slot (push_slots) held
        sent = sent_with_push("the person's", "m-person", {"url": receiver.url})
        assert rpc(gw, "SendMessage", sent, headers=V1)["result"]["task"]["status"]["state"] == COMPLETED
        posts = receiver.until_state(COMPLETED, within=WITHIN)
        assert [p.state for p in posts if p.state][-1:] == [COMPLETED], gw.log()[-3000:]
        assert hung.connections == 4  # the peers' slots, held all along
        no_hung_post_ended(gw)
