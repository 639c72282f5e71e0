"""A profile's config.yaml broken for a few seconds pauses that profile's queue; it never fails its runs.

Senders of queued runs were told "accepted and queued: do not resend", so a file being edited (or
half-written) must not end them with `invalid_config`: the runs wait, `runs list` says why, and they
run once the file is valid again (one run, one reply each). A run that outlives its TTL while paused
expires as usual and wakes its sender.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from backchannel.home import config
from conftest import run_cli
from gateway_http import chat, client, gateway_with, poll
from store_audit import audit_key, runs_with_text

pytestmark = pytest.mark.faults

BROKEN = "model: [this is not yaml\n"


def profile_config(root: Path, profile: str) -> Path:
    return root / "profiles" / profile / "config.yaml"


def test_a_config_broken_for_a_few_seconds_pauses_the_queue_and_the_runs_resume(initialised: Path) -> None:
    cfg = profile_config(initialised, "default")
    good = cfg.read_text()
    with gateway_with(initialised) as gw, client(gw) as c:
        sid = c.post("/api/sessions", json={"title": "paused"}).json()["session"]["id"]
        first = chat(c, sid, "/sleep 1\nfirst", "pause-1", wait=0.1)
        queued = [chat(c, sid, f"queued {i}", f"pause-{i}", wait=0.05)["run_id"] for i in (2, 3)]
        cfg.write_text(BROKEN)  # broken while the first turn runs: the next two are claimed while it is
        poll(c, first["run_id"], {"completed"}, within=5)
        time.sleep(0.6)  # a claim of the next run happens at once; give a wrong failure the time to show

        for run_id in queued:
            run = c.get(f"/v1/runs/{run_id}").json()
            assert run["status"] == "queued", run
        listed = run_cli("runs", "list", "--json")
        assert listed.exit_code == 0, listed.stderr
        by_id = {r["run_id"]: r for r in json.loads(listed.stdout)}
        for run_id in queued:
            assert by_id[run_id]["state"] == "queued", by_id[run_id]
            assert "config.yaml" in by_id[run_id]["paused"], by_id[run_id]
        text = run_cli("runs", "list")
        assert "queued #1 (paused: " in text.stdout and "config.yaml" in text.stdout, text.stdout

        cfg.write_text(good)
        for run_id in queued:
            poll(c, run_id, {"completed", "failed", "expired", "cancelled"}, within=5)
        time.sleep(0.3)
        log = gw.log()
    for i in (1, 2, 3):
        audit_key(initialised, f"pause-{i}")
    paused_lines = [line for line in log.splitlines() if "paused" in line and "default" in line]
    assert len(paused_lines) == 1, log  # logged once, not once per claim
    assert any("resume" in line for line in log.splitlines()), log
    assert "Traceback" not in log


def test_a_run_that_outlives_its_ttl_while_paused_expires_and_wakes_its_sender(initialised: Path) -> None:
    for name in ("alice", "bob"):
        assert run_cli("profile", "create", name).exit_code == 0
    alice_cfg = profile_config(initialised, "alice")
    data = config.load_yaml(alice_cfg)
    data["agent"]["session_messaging"]["allow"] = ["bob"]
    config.write_yaml(alice_cfg, data)
    bob_cfg = profile_config(initialised, "bob")
    good = bob_cfg.read_text()

    with gateway_with(initialised, run_ttl_seconds=2) as gw, client(gw) as c:
        busy = c.post("/p/bob/api/sessions", json={"title": "Bot Chat"}).json()["session"]["id"]
        # bob's Bot Chat is busy: alice's message queues behind this turn
        chat(c, busy, "/sleep 0.8\nbusy", "ttl-busy", wait=0.1, profile="bob")
        alice = c.post("/p/alice/api/sessions", json={"title": "Bot Chat"}).json()["session"]["id"]
        send = json.dumps({"session_id": "bob", "message": "are you there (ttl)?", "wait_seconds": 0})
        sent = chat(c, alice, f"/tool send_to_session {send}", "ttl-alice", wait=5, profile="alice")
        assert sent["run_id"]
        bob_cfg.write_text(BROKEN)
        deadline = time.monotonic() + 8
        while True:
            found = runs_with_text(initialised, "are you there (ttl)?")
            mine = [r for r in found if r["profile"] == "bob"]
            if mine and mine[0]["state"] not in ("queued", "running"):
                break
            assert time.monotonic() < deadline, mine
            time.sleep(0.1)
        run = mine[0]
        woken = audit_key(initialised, run["idempotency_key"], state="expired")
        assert woken.wake is not None
        wake = poll(c, woken.wake["id"], {"completed", "failed"}, within=5)
        assert wake["status"] == "completed" and "expired" in wake["output"], wake
        bob_cfg.write_text(good)
        log = gw.log()
    assert "Traceback" not in log
