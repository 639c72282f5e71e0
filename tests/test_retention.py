"""`store.keep_days`: what ended long ago loses its text at the gateway's start (and every hour), its ledger row
kept; nothing held or still owed a wake-up loses anything (the store's contract tests check the same of
queued, running and owed runs on both backends)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from backchannel.home import config
from conftest import GatewayThread, free_port, run_cli
from polling import eventually
from test_messaging import set_messaging

REMOVED = "(removed: older than store.keep_days)"
DAY = 86_400


def cli_json(*args: str) -> Any:
    done = run_cli(*args, "--json")
    assert done.exit_code in (0, 1), done.stderr
    return json.loads(done.stdout)


def send(target: str, message: str) -> dict[str, Any]:
    body: dict[str, Any] = cli_json("send", target, message)
    return body


def tool(name: str, **arguments: Any) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


def age(root: Path, days: float, *, only: str | None = None) -> None:
    """Move what the store holds `days` into the past (as if it had been there that long)."""
    shift = days * DAY
    with sqlite3.connect(config.db_path(root)) as db:
        where = "WHERE id = ?" if only else ""
        params: tuple[str, ...] = (only,) if only else ()
        db.execute(
            "UPDATE runs SET created_at = created_at - ?, updated_at = updated_at - ?,"
            " started_at = started_at - ?, finished_at = finished_at - ?" + (f" {where}" if where else ""),
            (shift, shift, shift, shift, *params),
        )
        if only is None:
            db.execute("UPDATE refusals SET created_at = created_at - ?", (shift,))


def keep(root: Path, days: int) -> None:
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["store"] = {**(data.get("store") or {}), "keep_days": days}
    config.write_yaml(path, data)


def show(run_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = cli_json("runs", "show", run_id)
    return shown


def test_what_ended_long_ago_loses_its_text_and_nothing_held_or_owed_does(home: Path) -> None:
    assert run_cli("init").exit_code == 0
    assert run_cli("profile", "create", "builds").exit_code == 0
    assert run_cli("profile", "create", "ops").exit_code == 0
    set_messaging(home, "default", allow=["builds", "ops"])
    set_messaging(home, "ops", hold=["default"])
    old = send("default", "an old question")
    refused = send("builds", tool("send_to_session", session_id="default", message="not allowed", wait_seconds=0))
    held_from = send("default", tool("send_to_session", session_id="ops", message="held for you", wait_seconds=0))
    owed_from = send("default", tool("send_to_session", session_id="builds", message="owed", wait_seconds=0))
    for sent in (old, refused, held_from, owed_from):
        assert sent["run_id"], sent
    runs = cli_json("runs", "list", "--limit", "100")
    [held] = [r for r in runs if r["message"] == "held for you"]
    [owed] = [r for r in runs if r["message"] == "owed"]
    assert held["state"] == "held"
    recent = send("default", "a question of today")
    age(home, 3)
    age(home, -3, only=recent["run_id"])  # today's stays today's
    # The wake-up owed to default for `owed` is lost (as in a crash between the run's end and it): still owed.
    with sqlite3.connect(config.db_path(home)) as db:
        db.execute("DELETE FROM runs WHERE idempotency_key LIKE 'wake:%'")
        db.execute("UPDATE runs SET wake = 1 WHERE id = ?", (owed["run_id"],))
    keep(home, 1)

    gw = GatewayThread(home, free_port()).start()
    try:
        woken = _wait_for_wake(owed["run_id"])
    finally:
        gw.close()
    # Ended long ago: text gone, the ledger's row (who, whom, when, outcome, tokens) kept.
    assert (show(old["run_id"])["message"], show(old["run_id"])["reply"]) == (REMOVED, REMOVED)
    assert show(held_from["run_id"])["message"] == REMOVED  # the sender's turn ended: its text goes
    ledger = cli_json("ledger", "--limit", "100")
    [row] = [e for e in ledger if e.get("run_id") == old["run_id"]]
    assert (row["message"], row["state"], row["target"].split("/")[0]) == (REMOVED, "completed", "default")
    [refusal] = [e for e in ledger if e["state"].startswith("refused:")]
    assert refusal["message"] == REMOVED
    # Held (waiting for the person), and today's: untouched.
    assert (show(held["run_id"])["message"], show(held["run_id"])["state"]) == ("held for you", "held")
    assert show(recent["run_id"])["message"] == "a question of today"
    # Owed a wake-up (lost in a crash): it is made at the start, from the reply the run still had.
    assert "builds (echo): owed" in woken["message"], woken


def _wait_for_wake(run_id: str, within: float = 20.0) -> dict[str, Any]:
    def wake() -> dict[str, Any] | None:
        for r in cli_json("runs", "list", "--limit", "200"):
            if r["message"].startswith(f"[Reply to your message {run_id}") and r["state"] in ("completed", "failed"):
                return dict(r)
        return None

    found = eventually(wake, within=within, what=f"a wake-up for {run_id}", every=0.2)
    assert found is not None
    return found


@pytest.mark.parametrize("value", ["-1", "'many'", "1.5"])
def test_a_bad_keep_days_is_refused_with_its_line(home: Path, value: str) -> None:
    assert run_cli("init").exit_code == 0
    path = config.config_path(home)
    path.write_text(path.read_text() + f"store:\n  keep_days: {value}\n")
    done = run_cli("doctor")
    assert done.exit_code != 0 and "store.keep_days" in done.stdout + done.stderr, (done.stdout, done.stderr)
