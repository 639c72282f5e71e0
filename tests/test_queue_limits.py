"""Limits inside the gateway no sender can exhaust: a session's queue, a sender's rate, a profile's sessions,
and a fair share of turn slots per profile (DESIGN 5 "Limits", issue 15 item 7). Real gateway processes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from conftest import GatewayThread, run_cli
from gateway_http import chat, client, gateway_with, set_messaging


def new_session(c: httpx.Client, prefix: str = "", **body: Any) -> str:
    r = c.post(f"{prefix}/api/sessions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["session"]["id"])


def start_run(c: httpx.Client, session_id: str, text: str, key: str) -> httpx.Response:
    return c.post("/v1/runs", json={"input": text, "session_id": session_id}, headers={"Idempotency-Key": key})


def statuses(c: httpx.Client, run_ids: list[str]) -> list[str]:
    return [c.get(f"/v1/runs/{r}").json()["status"] for r in run_ids]


def test_a_full_session_queue_is_429_with_retry_after_replays_still_answer_and_the_cli_exits_1(
    initialised: Path,
) -> None:
    with gateway_with(initialised, max_queued_per_session=3) as gw, client(gw) as c:
        sid = new_session(c)
        busy = start_run(c, sid, "/sleep 30", "k-running")
        assert busy.status_code == 202, busy.text
        accepted = [start_run(c, sid, f"m{i}", f"k{i}") for i in range(3)]
        assert [r.status_code for r in accepted] == [202, 202, 202], [r.text for r in accepted]
        full = start_run(c, sid, "one too many", "k-over")
        assert full.status_code == 429, full.text
        assert full.json()["error"]["code"] == "queue_full" and "max_queued_per_session" in full.text
        assert int(full.headers["retry-after"]) >= 1
        chat_full = c.post(f"/api/sessions/{sid}/chat", json={"message": "and this"})
        assert chat_full.status_code == 429 and chat_full.json()["error"]["code"] == "queue_full"
        replay = start_run(c, sid, "m1", "k1")  # an accepted message asked again is answered with its run
        assert replay.status_code == 202 and replay.json()["run_id"] == accepted[1].json()["run_id"]

        sent = run_cli("send", f"default/{sid}", "from the person", "--wait", "0")
        assert sent.exit_code == 1, sent
        assert "max_queued_per_session" in sent.stderr and "Traceback" not in sent.stderr
        ledger = c.get("/v1/ledger").json()["data"]
        assert not any(e.get("message") in ("one too many", "and this", "from the person") for e in ledger)

        other = new_session(c)  # another session's queue is its own
        set_messaging(initialised, "default", allow=["default/*"])
        reply = chat(c, other, f"/send default/{sid} hello", "k-agent", wait=10)
        assert "queue_full" in reply["message"]["content"], reply  # an agent reads it as a tool result


def test_an_agent_sending_faster_than_its_rate_is_refused_rate_limited(initialised: Path) -> None:
    set_messaging(initialised, "default", allow=["default/*"])
    with gateway_with(initialised, max_runs_per_sender_per_minute=3) as gw, client(gw) as c:
        targets = [new_session(c) for _ in range(4)]
        sender = new_session(c)
        lines = "\n".join(f"/send default/{t} ping {i}" for i, t in enumerate(targets))
        reply = chat(c, sender, lines, "k-rate", wait=20)["message"]["content"]
        assert reply.count("rate_limited") == 1 and "max_runs_per_sender_per_minute" in reply, reply
        assert c.get(f"/api/sessions/{targets[3]}/messages").json()["data"] == []  # nothing of it was kept
        person = chat(c, targets[3], "the person is never rate-limited", "k-person", wait=10)
        assert person["message"]["content"]


def test_a_profile_has_at_most_max_sessions_per_profile(initialised: Path) -> None:
    assert run_cli("profile", "create", "other").exit_code == 0
    with gateway_with(initialised, max_sessions_per_profile=3) as gw, client(gw) as c:
        for _ in range(3):
            new_session(c)
        over = c.post("/api/sessions", json={"title": "fourth"})
        assert over.status_code == 429 and over.json()["error"]["code"] == "too_many_sessions", over.text
        assert "max_sessions_per_profile" in over.text
        assert len(c.get("/api/sessions").json()["data"]) == 3
        new_session(c, "/p/other")  # the cap is per profile


def test_one_profiles_slow_turns_never_starve_another_profile(initialised: Path) -> None:
    assert run_cli("profile", "create", "other").exit_code == 0
    with gateway_with(initialised) as gw, client(gw) as c:  # max_concurrent_turns: 32 (the default)
        slow = [start_run(c, new_session(c), "/sleep 20", f"slow-{i}") for i in range(32)]
        assert all(r.status_code == 202 for r in slow)
        run_ids = [r.json()["run_id"] for r in slow]
        deadline = time.monotonic() + 10
        while statuses(c, run_ids).count("running") < 16 and time.monotonic() < deadline:
            time.sleep(0.05)
        answer = chat(c, new_session(c, "/p/other"), "still answered", "k-other", wait=5, profile="other")
        assert answer.get("message", {}).get("content"), answer  # 200 with the reply within its wait, not a receipt
        now = statuses(c, run_ids)
        assert now.count("running") == 16 and now.count("queued") == 16, now  # a profile holds half the slots


def test_internal_idempotency_prefixes_are_refused_from_outside(gateway: GatewayThread) -> None:
    with client(gateway) as c:
        sid = new_session(c)
        for key in ("wake:run_0123", "send:run_x:y:0", "dedup:abc"):
            r = c.post(f"/api/sessions/{sid}/chat", json={"message": "hi"}, headers={"Idempotency-Key": key})
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_idempotency_key", r.text
            r = start_run(c, sid, "hi", key)
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_idempotency_key", r.text
        assert c.get(f"/api/sessions/{sid}/messages").json()["data"] == []


def test_a_wake_up_goes_into_its_senders_session_past_the_queue_cap(initialised: Path) -> None:
    """The answer an agent asked for is not refused by its own busy session: one wake per message it sent."""
    set_messaging(initialised, "default", allow=["default/*"])
    with gateway_with(initialised, max_queued_per_session=1) as gw, client(gw) as c:
        target, sender = new_session(c), new_session(c)
        send = {"session_id": f"default/{target}", "message": "/sleep 1.5\nslow question", "wait_seconds": 0}
        chat(c, sender, f"/tool send_to_session {json.dumps(send)}", "k-send", wait=10)
        sent = [e for e in c.get("/v1/ledger").json()["data"] if e.get("message") == "/sleep 1.5\nslow question"]
        assert len(sent) == 1, sent
        assert start_run(c, sender, "/sleep 6", "k-busy").status_code == 202  # the sender's turn runs...
        assert start_run(c, sender, "next", "k-next").status_code == 202  # ...and its queue is full
        assert start_run(c, sender, "one too many", "k-over").status_code == 429
        deadline, wake = time.monotonic() + 4.5, None  # the slow question ends at ~1.5 s, the busy turn at ~6 s
        while wake is None and time.monotonic() < deadline:
            entries = c.get("/v1/ledger").json()["data"]
            wake = next((e for e in entries if f"[Reply to your message {sent[0]['run_id']}" in e["message"]), None)
            time.sleep(0.1)
        assert wake is not None, "the wake-up was not queued while its sender's session was full"
        assert wake["state"] == "queued" and "slow question" in wake["message"]
