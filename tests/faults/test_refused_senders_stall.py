"""A session's queue keeps draining while concurrent senders are refused against it (issue 38 item 1).

On a PostgreSQL store a refused send (`queue_full`) holds the session's row lock for its transaction; a worker
whose claim met that lock once read it as an empty queue, released the session, and nothing handed it out again:
every accepted run stayed queued, and every later message to the session, the person's too, was refused for
good. Contract: whatever the refused senders do, every accepted run completes, and the session takes messages
again once its queue has drained."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import httpx
import pytest

from conftest import use_shared_store
from gateway_http import client, gateway_with

pytestmark = pytest.mark.faults

QUEUE_CAP = 3
SENDERS = 4
FLOOD_SECONDS = 6.0
DRAIN_WITHIN = 60.0  # generous: the accepted runs are a few echo turns; a stalled session never drains


def _flood(url: str, headers: dict[str, str], session_id: str, stop: threading.Event, sender: int) -> list[str]:
    """Send new messages as fast as the gateway answers until `stop`; the run ids of those accepted."""
    accepted: list[str] = []
    with httpx.Client(base_url=url, headers=headers, timeout=30.0, trust_env=False) as c:
        for n in itertools.count():
            if stop.is_set():
                return accepted
            r = c.post(
                "/v1/runs",
                json={"input": f"/sleep 0.05\nsender {sender} message {n}", "session_id": session_id},
                headers={"Idempotency-Key": f"flood-{sender}-{n}"},
            )
            assert r.status_code in (202, 429), r.text
            if r.status_code == 202:
                accepted.append(r.json()["run_id"])
    raise AssertionError("unreachable")


@pytest.mark.parametrize("round_", range(5))  # the stall was a race: each round is another chance to meet it
def test_concurrent_refused_senders_never_stop_a_sessions_queue_on_postgresql(
    initialised: Path, postgres_url: str, round_: int
) -> None:
    use_shared_store(initialised, postgres_url)
    with gateway_with(initialised, process=True, max_queued_per_session=QUEUE_CAP) as gw, client(gw) as c:
        made = c.post("/api/sessions", json={})
        assert made.status_code == 201, made.text
        sid = made.json()["session"]["id"]
        stop = threading.Event()
        results: list[list[str]] = [[] for _ in range(SENDERS)]
        errors: list[BaseException] = []

        def sender(n: int) -> None:
            try:
                results[n] = _flood(gw.url, gw.headers(), sid, stop, n)
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

        threads = [threading.Thread(target=sender, args=(n,)) for n in range(SENDERS)]
        for t in threads:
            t.start()
        time.sleep(FLOOD_SECONDS)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        accepted = [run_id for ids in results for run_id in ids]
        assert accepted, "no message was accepted: the flood did not reach the queue"

        deadline = time.monotonic() + DRAIN_WITHIN
        pending = set(accepted)
        while pending and time.monotonic() < deadline:
            pending = {r for r in pending if c.get(f"/v1/runs/{r}").json()["status"] != "completed"}
            if pending:
                time.sleep(0.2)
        states = {r: c.get(f"/v1/runs/{r}").json()["status"] for r in pending}
        assert not pending, f"{len(pending)} of {len(accepted)} accepted runs never ran: {states}"

        after = c.post(
            f"/api/sessions/{sid}/chat",
            json={"message": "the person, after the flood"},
            headers={"X-Hermes-Wait-Seconds": "30"},
        )
        assert after.status_code == 200, after.text
