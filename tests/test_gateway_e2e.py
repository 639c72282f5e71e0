"""End to end: real `backchannel gateway` processes driven over real HTTP on loopback.

Crash recovery (SIGKILL mid-turn), idempotency across restarts, strict per-session FIFO under
concurrent load, the SIGTERM grace period, the CLI finding (or not finding) the gateway, and the
gateway's run-state log.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess, api_key, free_port
from polling import eventually

TIMEOUT = httpx.Timeout(10.0)


@pytest.fixture
def gateway(gateway_process: GatewayProcess) -> GatewayProcess:
    """Every gateway here is a process: these tests kill it, stop it with SIGTERM and read its log."""
    return gateway_process


TERMINAL = {"completed", "failed", "cancelled", "expired"}
ECHO = "default (echo): "


@contextmanager
def client(gw: GatewayProcess, timeout: httpx.Timeout = TIMEOUT) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=timeout, trust_env=False) as c:
        yield c


def new_session(c: httpx.Client) -> str:
    r = c.post("/api/sessions", json={"title": "e2e"})
    assert r.status_code == 201, r.text
    return str(r.json()["session"]["id"])


def chat(c: httpx.Client, session_id: str, message: str, *, key: str, wait: float) -> httpx.Response:
    return c.post(
        f"/api/sessions/{session_id}/chat",
        json={"message": message},
        headers={"Idempotency-Key": key, "X-Hermes-Wait-Seconds": str(wait)},
    )


def get_run(c: httpx.Client, run_id: str) -> dict[str, Any]:
    r = c.get(f"/v1/runs/{run_id}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def poll_run(c: httpx.Client, run_id: str, statuses: set[str], *, within: float = 10.0) -> dict[str, Any]:
    """Poll GET /v1/runs/{id} until its status is one of `statuses`; fail after `within` seconds."""
    return eventually(
        lambda: get_run(c, run_id),
        lambda run: run["status"] in statuses,
        within=within,
        what=lambda run: f"run {run_id} still {run['status']!r}: {run}",
    )


def messages(c: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    r = c.get(f"/api/sessions/{session_id}/messages")
    assert r.status_code == 200, r.text
    data: list[dict[str, Any]] = r.json()["data"]
    return data


def answered_after(c: httpx.Client, session_id: str, key: str) -> list[dict[str, Any]]:
    """Send one more message to the session and wait for its answer: the session's messages before it. Turns
    run one at a time in order, so whatever was queued earlier has run by then (a wrong turn shows up here)."""
    r = chat(c, session_id, f"later ({key})", key=key, wait=0)
    assert r.status_code in (200, 202), r.text
    done = poll_run(c, r.json()["run_id"], TERMINAL, within=30)
    assert done["status"] == "completed", done
    *earlier, asked, answered = messages(c, session_id)
    assert (asked["role"], asked["content"]) == ("user", f"later ({key})"), asked
    assert answered["role"] == "assistant" and f"later ({key})" in answered["content"], answered
    return earlier


def state_lines(gw: GatewayProcess, run_id: str, state: str) -> list[str]:
    return [line for line in gw.log().splitlines() if f"run {run_id} {state} " in line]


# --- 1. crash recovery, exactly once ------------------------------------------------------------


def test_sigkill_mid_turn_the_run_is_recovered_and_answered_exactly_once(gateway: GatewayProcess) -> None:
    text = "/sleep 1.5\nthe slow one"
    with client(gateway) as c:
        sid = new_session(c)
        r = chat(c, sid, text, key="k-crash", wait=0.2)
        assert r.status_code == 202, r.text
        receipt = r.json()
        assert receipt["object"] == "hermes.session.chat.queued"
        assert receipt["replayed"] is False
        run_id = receipt["run_id"]
        poll_run(c, run_id, {"running"}, within=5)

    gateway.kill()  # SIGKILL: no shutdown code runs; the run is left `running` in state.db
    gateway.start()

    with client(gateway) as c:
        run = poll_run(c, run_id, TERMINAL, within=25)
        assert run["status"] == "completed", run
        # The dead owner's run is requeued as the gateway starts, not when its 30 s lease lapses.
        assert f"run {run_id} reclaimed after an interrupted turn (attempt 1)" in gateway.log(), gateway.log()
        assert "the slow one" in run["output"]
        assert run["attempts"] == 2, run  # one interrupted attempt, one that finished

        msgs = messages(c, sid)
        users = [m for m in msgs if m["role"] == "user" and m["content"] == text]
        replies = [m for m in msgs if m["role"] == "assistant" and "the slow one" in m["content"]]
        assert len(users) == 1, msgs
        assert len(replies) == 1, msgs
        assert len(msgs) == 2, msgs  # nothing of the interrupted attempt was kept

        again = chat(c, sid, text, key="k-crash", wait=5)
        assert again.status_code == 200, again.text
        body = again.json()
        assert body["run_id"] == run_id
        assert body["replayed"] is True
        assert "the slow one" in body["message"]["content"]
        # A replay queues nothing: a later message of the session is answered after whatever was queued before
        # it (one turn at a time, in order), so once it is, a wrong turn would be there.
        assert answered_after(c, sid, "k-after-replay") == msgs
        assert get_run(c, run_id)["attempts"] == 2


# --- 2. idempotency across a restart ------------------------------------------------------------


def test_idempotency_key_survives_a_graceful_restart(gateway: GatewayProcess) -> None:
    payload_text = "only once, please"
    with client(gateway) as c:
        sid = new_session(c)
        payload = {"input": payload_text, "session_id": sid}
        first = c.post("/v1/runs", json=payload, headers={"Idempotency-Key": "k-restart"})
        assert first.status_code == 202, first.text
        assert first.json()["replayed"] is False
        run_id = first.json()["run_id"]
        done = poll_run(c, run_id, TERMINAL)
        assert done["status"] == "completed", done
        assert done["output"] == ECHO + payload_text
        before = messages(c, sid)
        assert len(before) == 2

    exit_code = gateway.terminate()
    gateway.start()

    with client(gateway) as c:
        again = c.post("/v1/runs", json=payload, headers={"Idempotency-Key": "k-restart"})
        assert again.status_code == 202, again.text
        body = again.json()
        assert body["run_id"] == run_id
        assert body["replayed"] is True
        assert body["status"] == "completed"
        assert again.headers.get("Idempotency-Replayed") == "true"

        # The same key for another message is a conflict, not a new run, also after the restart.
        other = c.post(
            "/v1/runs", json={"input": "something else", "session_id": sid}, headers={"Idempotency-Key": "k-restart"}
        )
        assert other.status_code == 409, other.text
        assert other.json()["error"]["code"] == "idempotency_key_conflict"

        assert answered_after(c, sid, "k-after-restart") == before  # neither queued a turn
        run = get_run(c, run_id)
        assert run["status"] == "completed"
        assert run["attempts"] == 1

    assert exit_code == 0, f"SIGTERM should stop the gateway cleanly (exit 0), got {exit_code}\n{gateway.log()}"


# --- 3. strict FIFO, one turn at a time ---------------------------------------------------------


@pytest.mark.sqlite
def test_concurrent_messages_to_one_session_run_one_at_a_time_in_order(gateway: GatewayProcess) -> None:
    count = 40
    with client(gateway) as c:
        sid = new_session(c)

    def send(i: int) -> tuple[int, int, dict[str, Any]]:
        with client(gateway, httpx.Timeout(30.0)) as own:
            r = chat(own, sid, f"m{i}", key=f"k-fifo-{i}", wait=30)
            return i, r.status_code, r.json()

    with ThreadPoolExecutor(max_workers=count) as pool:
        answers = list(pool.map(send, range(count)))

    run_ids: dict[str, int] = {}
    for i, status, body in answers:
        assert status == 200, (i, body)
        assert body["message"]["content"] == f"{ECHO}m{i}", (i, body)
        assert body["replayed"] is False
        run_ids[body["run_id"]] = i
    assert len(run_ids) == count

    with client(gateway) as c:
        msgs = messages(c, sid)
    assert len(msgs) == 2 * count, msgs
    seen: list[str] = []
    for user, reply in zip(msgs[::2], msgs[1::2], strict=True):
        assert user["role"] == "user", msgs
        assert reply["role"] == "assistant", msgs
        assert reply["content"] == ECHO + user["content"], (user, reply)
        assert user["run_id"] == reply["run_id"]
        assert run_ids[user["run_id"]] == int(user["content"][1:])
        seen.append(user["content"])
    assert sorted(seen) == sorted(f"m{i}" for i in range(count))

    # The run object of the HTTP API carries no started_at/finished_at: read them from the store
    # (read-only) to check that no two turns of the session overlapped and that they ran in queue order.
    db = sqlite3.connect(f"file:{config.db_path(gateway.root)}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT id, seq, started_at, finished_at, state FROM runs WHERE session_id = ? ORDER BY started_at",
            (sid,),
        ).fetchall()
    finally:
        db.close()
    assert len(rows) == count
    assert all(state == "completed" for *_, state in rows)
    for (_, seq_a, _, end_a, _), (_, seq_b, start_b, _, _) in itertools.pairwise(rows):
        assert end_a <= start_b, "two turns of one session overlapped"
        assert seq_a < seq_b, "runs did not start in the order they were queued"
    assert [r[0] for r in rows] == [m["run_id"] for m in msgs[::2]], "message order is not run order"


# --- 4. SIGTERM grace ---------------------------------------------------------------------------


def test_sigterm_lets_the_running_turn_finish_within_the_grace(gateway: GatewayProcess) -> None:
    with client(gateway) as c:
        sid = new_session(c)
        r = chat(c, sid, "/sleep 1\nfinish me", key="k-grace", wait=0.2)
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        poll_run(c, run_id, {"running"}, within=5)

    exit_code = gateway.terminate(timeout=10)
    assert state_lines(gateway, run_id, "completed"), "the turn did not finish before the gateway exited"

    gateway.start()
    with client(gateway) as c:
        run = poll_run(c, run_id, TERMINAL, within=5)
        assert run["status"] == "completed", run
        assert "finish me" in run["output"]
        assert run["attempts"] == 1, run  # it finished in the grace period, it was not rerun after the restart
        msgs = messages(c, sid)
        assert [m["role"] for m in msgs] == ["user", "assistant"], msgs

    assert exit_code == 0, f"SIGTERM should stop the gateway cleanly (exit 0), got {exit_code}\n{gateway.log()}"


# --- 5. the CLI uses the running gateway, or runs in-process ------------------------------------


def test_cli_chat_goes_through_the_gateway_and_runs_locally_without_it(gateway: GatewayProcess, cli: Any) -> None:
    result = cli("chat", "-q", "hello", "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["via"] == "gateway"
    assert out["state"] == "completed"
    assert out["reply"] == ECHO + "hello"
    assert state_lines(gateway, out["run_id"], "completed"), "the gateway did not run the CLI's turn"

    gateway.terminate()

    local = cli("chat", "-q", "hello", "--json")
    assert local.exit_code == 0, local.stderr
    out_local = json.loads(local.stdout)
    assert out_local["via"] == "local"
    assert out_local["state"] == "completed"
    assert out_local["reply"] == ECHO + "hello"
    assert out_local["session_id"] != out["session_id"]


def test_the_cli_finds_a_gateway_started_on_another_port_and_a_second_one_is_refused(
    initialised: Path, cli: Any
) -> None:
    """The home's runtime file says where its gateway listens; its lock keeps a second gateway out."""
    gw = GatewayProcess(initialised, free_port())  # config.yaml still names the default port
    gw.start()
    try:
        out = json.loads(cli("send", "default", "where are you?", "--json").stdout)
        assert out["via"] == "gateway", out
        assert state_lines(gw, out["run_id"], "completed"), "the gateway did not run the CLI's turn"

        second = subprocess.run(
            [sys.executable, "-m", "backchannel", "gateway", "--port", str(free_port())],
            env={**os.environ, "BACKCHANNEL_HOME": str(initialised)},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 2, second.stderr
        assert "another gateway is already running" in second.stderr and str(gw.proc.pid) in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        assert gw.terminate() == 0
    assert not (initialised / "gateway.json").exists()  # a stopped gateway takes its runtime file with it
    assert json.loads(cli("send", "default", "and now?", "--json").stdout)["via"] == "local"


# --- 6. run states in the gateway log, never the key --------------------------------------------


def test_gateway_logs_each_run_state_once_and_never_the_api_key(gateway: GatewayProcess) -> None:
    key = api_key(gateway.root)
    with client(gateway) as c:
        sid = new_session(c)
        r = chat(c, sid, "log me", key="k-log", wait=5)
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        # A request with a wrong key, and a replay, must not make the log any chattier about this run.
        bad = c.get("/v1/capabilities", headers={"Authorization": f"Bearer {key[::-1]}"})
        assert bad.status_code == 401
        assert chat(c, sid, "log me", key="k-log", wait=5).json()["replayed"] is True

    deadline = time.monotonic() + 3
    while not state_lines(gateway, run_id, "completed") and time.monotonic() < deadline:
        time.sleep(0.05)
    for state in ("queued", "running", "completed"):
        lines = state_lines(gateway, run_id, state)
        assert len(lines) == 1, (state, gateway.log())
        assert f"session={sid}" in lines[0]
    log_text = gateway.log()
    assert key not in log_text
    assert key[::-1] not in log_text
