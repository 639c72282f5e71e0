"""Deadlines of messages held for the person (a `hold` rule): past its deadline a held message is over, as a queued
one is. Through the real CLI and this home's gateway: research's agent sends to builds, whose person holds
research's messages; at the deadline the held run ends `expired` (`deadline_passed`, never started), its sender is
woken with that, the held list drops it, and approving it is refused. The deadline sweep wakes at the earliest
deadline of a held or a queued run, not on its once-a-second round.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from backchannel import deadlines
from conftest import run_cli
from gateway_http import gateway_with, set_messaging
from polling import eventually
from test_deadlines import sent, shown

# Three deadlines a third of a second apart: a sweep that looked once a second would end at least one of them more
# than LATE_AT_MOST after its deadline, whatever its phase (the three do not fit in any window that narrow).
SPACING = 1 / 3
LATE_AT_MOST = 0.6


def ledger() -> list[dict[str, Any]]:
    done = run_cli("ledger", "--json", "--limit", "1000")
    assert done.exit_code == 0, done.stderr
    return list(json.loads(done.stdout))


def held() -> list[dict[str, Any]]:
    return list(json.loads(run_cli("held", "--json").stdout))


def send_held(message: str, deadline: float | str) -> None:
    """research's agent sends `message` to builds (held for builds' person) without waiting, with `deadline`."""
    call = {"session_id": "builds", "message": message, "wait_seconds": 0, "deadline": deadline}
    asked = sent("research", f"/tool send_to_session {json.dumps(call)}")
    assert asked["result"] == "delivered" and '"held"' in asked["reply"], asked  # research's turn: told `held`


def hold_research(root: Path) -> None:
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    set_messaging(root, "research", allow=["builds"])
    assert run_cli("profile", "hold", "builds", "research").exit_code == 0


def test_a_held_message_expires_at_its_deadline_and_cannot_be_approved_after(initialised: Path) -> None:
    """Held with a deadline 2 s away (its hold expiry is a day): at the deadline it ends expired, deadline_passed,
    never started, saying it was held and never released; research is woken with that; `approve` is refused."""
    hold_research(initialised)
    with gateway_with(initialised):
        send_held("before the release?", 2)
        [waiting] = held()
        assert waiting["message"].endswith("before the release?") and waiting["status"] == "held", waiting
        run_id = waiting["run_id"]
        expired = eventually(
            lambda: shown(run_id), lambda run: run["state"] == "expired", within=30, what="the held run to expire"
        )
        assert expired["error"]["code"] == "deadline_passed", expired
        said = expired["error"]["message"]
        assert "deadline passed" in said and "held for the person" in said and "never released" in said, said
        assert held() == []
        [entry] = [e for e in ledger() if e["run_id"] == run_id]  # the ledger shows it as a queued one's expiry
        assert (entry["state"], entry["outcome"]) == ("expired", "failed") and "never released" in entry["reason"]
        assert entry["deadline"] == expired["deadline"], entry
        assert entry["started_at"] is None and entry["finished_at"] - entry["deadline"] < 5, entry
        refused = run_cli("approve", run_id)
        assert refused.exit_code != 0 and "Traceback" not in refused.stderr, refused.stderr
        assert "is over" in refused.stderr and "deadline" in refused.stderr, refused.stderr
        assert shown(run_id)["state"] == "expired"  # nothing was queued by the refused approval
        woken = eventually(
            lambda: [e for e in ledger() if e["target"].startswith("research/") and e["hops"] > 0],
            within=30,
            what="research woken with the outcome",
        )
        assert "(expired: its deadline passed" in woken[0]["message"], woken[0]
        assert "never released" in woken[0]["message"] and "unknown" not in woken[0]["message"], woken[0]


def test_a_held_message_past_its_deadline_is_not_released_even_before_the_sweep_ends_it(initialised: Path) -> None:
    """Without a running gateway nothing sweeps: the person's `approve` itself finds the deadline passed, ends the
    run expired and refuses (a held message is never queued after its deadline)."""
    hold_research(initialised)
    send_held("too late?", 1)  # research's turn runs in the command's own gateway, which stops with it
    [waiting] = held()
    time.sleep(1.2)
    refused = run_cli("approve", waiting["run_id"])
    assert refused.exit_code != 0 and "is over" in refused.stderr, refused.stderr
    run = shown(waiting["run_id"])
    assert run["state"] == "expired" and run["error"]["code"] == "deadline_passed", run


def test_the_sweep_wakes_at_the_earliest_deadline_of_held_and_queued_runs(initialised: Path) -> None:
    """Two held messages and a queued one (behind a long turn), deadlines a third of a second apart: each ends
    within LATE_AT_MOST of its deadline (a sweep that read the queued runs' deadlines alone, or looked once a
    second, would end one later)."""
    hold_research(initialised)
    with gateway_with(initialised):
        busy = sent("builds", "/sleep 30\nthe long one", "--wait", "0")
        eventually(lambda: shown(busy["run_id"])["state"] == "running", within=30, what="builds' long turn")
        first = time.time() + 6  # time enough for the three sends below
        due = [first + i * SPACING for i in range(3)]
        send_held("held first", deadlines.wire(due[0]))
        queued = sent("builds", "queued second", "--deadline", deadlines.wire(due[1]), "--wait", "0")
        send_held("held third", deadlines.wire(due[2]))
        assert time.time() < due[0] - 0.5, "the sends took too long for this test's deadlines"
        time.sleep(max(0.0, due[2] + LATE_AT_MOST + 0.2 - time.time()))  # the gateway's loop left alone meanwhile
        ends = {e["message"]: e for e in ledger() if e["message"] in ("held first", "queued second", "held third")}
        assert set(ends) == {"held first", "queued second", "held third"}, ends
        for message, entry in ends.items():
            assert entry["state"] == "expired", (message, entry)
        late = {m: e["finished_at"] - e["deadline"] for m, e in ends.items()}
        assert all(0 <= s < LATE_AT_MOST for s in late.values()), late
        assert ends["queued second"]["run_id"] == queued["run_id"]
        assert shown(busy["run_id"])["state"] == "running"  # the turn ahead was not disturbed
