"""Every way a message ends wakes a sender that stopped waiting; SIGTERM with turns running loses none.

Through real gateway processes and real agents: alice's `send_to_session` to bob with `wait_seconds: 0`
(a receipt, so alice asks to be woken) while bob's Bot Chat is busy, then bob's run ends as completed,
failed, cancelled (a person stops it) or expired (its TTL passes in the queue). Each time alice's session
gets exactly one wake-up naming the outcome. (`denied` is a peer's held message the person refused: no
local run ends that way, so there is nothing to wake here.)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from backchannel import keys
from conftest import run_cli
from gateway_http import TERMINAL, chat, client, gateway_with, poll, set_messaging
from polling import eventually
from store_audit import audit_key, runs_by_key, runs_with_text

pytestmark = pytest.mark.faults


def wait_for_bob_run(root: Path, text: str, states: set[str], within: float = 8.0) -> dict[str, object]:
    mine = eventually(
        lambda: [r for r in runs_with_text(root, text) if r["profile"] == "bob"],
        lambda mine: bool(mine) and mine[0]["state"] in states,
        within=within,
        what=lambda mine: f"bob's run of {text!r}: {mine}",
    )
    return mine[0]


@pytest.mark.parametrize("end", ["completed", "failed", "cancelled", "expired"])
def test_every_end_of_a_message_wakes_the_sender_that_stopped_waiting(initialised: Path, end: str) -> None:
    for name in ("alice", "bob"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(initialised, "alice", allow=["bob"])
    text = f"wake me ({end})" if end != "failed" else "/fail on purpose (failed)"
    busy_for = 1.5 if end == "expired" else 0.6
    with gateway_with(initialised, run_ttl_seconds=1 if end == "expired" else 3600) as gw, client(gw) as c:
        busy = c.post("/p/bob/api/sessions", json={"title": "Bot Chat"}).json()["session"]["id"]
        chat(c, busy, f"/sleep {busy_for}\nbusy", f"busy-{end}", wait=0.1, profile="bob")
        alice = c.post("/p/alice/api/sessions", json={"title": "Bot Chat"}).json()["session"]["id"]
        send = json.dumps({"session_id": "bob", "message": text, "wait_seconds": 0})
        sent = chat(c, alice, f"/tool send_to_session {send}", f"alice-{end}", wait=5, profile="alice")
        assert '"result": "receipt"' in sent["message"]["content"], sent
        queued = wait_for_bob_run(initialised, text, {"queued"})
        if end == "cancelled":
            stopped = run_cli("runs", "stop", str(queued["id"]))
            assert stopped.exit_code in (0, 1), stopped.stderr
        run = wait_for_bob_run(initialised, text, TERMINAL)
        deadline = time.monotonic() + 10  # the wake-up is its own commit after the run's end (or its retry)
        while not runs_by_key(initialised, keys.wake(str(run["id"]))) and time.monotonic() < deadline:
            time.sleep(0.05)
        woken = audit_key(initialised, str(run["idempotency_key"]), state=end)  # woken once, not twice
        assert woken.wake is not None, "the sender was not woken"
        wake = poll(c, woken.wake["id"], TERMINAL, within=5)
        assert wake["status"] == "completed", wake
        assert f"[Reply to your message {run['id']}" in woken.wake["message"]
        if end != "completed":
            assert f"({end}: " in woken.wake["message"], woken.wake["message"]
        log = gw.log()
    assert "Traceback" not in log


def test_sigterm_with_turns_running_requeues_them_and_they_run_once_after_the_restart(initialised: Path) -> None:
    with gateway_with(initialised, grace=0.3, process=True) as gw:
        with client(gw) as c:
            sessions = [c.post("/api/sessions", json={"title": f"t{i}"}).json()["session"]["id"] for i in (1, 2)]
            runs = [
                chat(c, sid, f"/sleep 2\nslow turn {i}", f"sigterm-{i}", wait=0.1)["run_id"]
                for i, sid in enumerate(sessions)
            ]
            for run_id in runs:
                poll(c, run_id, {"running"}, within=5)
        assert gw.terminate() == 0, gw.log()  # the grace (0.3 s) is shorter than the turns: they are cut
        gw.start(grace=0.3)
        with client(gw) as c:
            for run_id in runs:
                run = poll(c, run_id, TERMINAL, within=10)
                assert run["status"] == "completed", run
                assert run["attempts"] == 2, run  # the cut attempt, then the one that finished
        log = gw.log()
    for i in range(2):
        audit_key(initialised, f"sigterm-{i}")
    assert "Traceback" not in log
