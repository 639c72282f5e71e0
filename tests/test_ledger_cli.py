"""`backchannel ledger`: filtered by run state, outcome and time, shown whole with --wide, and followed live
(--follow) whether a gateway or a command in-process records what comes."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import interruptible, run_cli
from polling import eventually

LONG = "a message long enough that the ledger's table cuts it short at forty-eight characters, unless wide"


def _ledger(*args: str) -> list[dict[str, Any]]:
    listed = run_cli("ledger", *args, "--json")
    assert listed.exit_code == 0, listed.stderr
    rows: list[dict[str, Any]] = json.loads(listed.stdout)
    return rows


@pytest.fixture
def history(initialised: Path) -> Path:
    """Three entries: delivered, failed, and a refusal (research may message nobody)."""
    assert run_cli("profile", "create", "research").exit_code == 0
    assert run_cli("send", "default", LONG).exit_code == 0
    assert run_cli("send", "default", "/fail on purpose").exit_code == 1
    assert run_cli("send", "research", "/send default knock knock").exit_code == 0
    return initialised


def test_state_and_outcome_filter_the_ledger(history: Path) -> None:
    assert {e["message"] for e in _ledger("--state", "failed")} == {"/fail on purpose"}
    assert [e["message"] for e in _ledger("--state", "refused")] == ["knock knock"]
    refused_or_failed = _ledger("--outcome", "refused", "--outcome", "failed")
    assert {e["outcome"] for e in refused_or_failed} == {"refused", "failed"} and len(refused_or_failed) == 2
    delivered = _ledger("--outcome", "delivered")
    assert delivered and all(e["state"] == "completed" for e in delivered)
    assert run_cli("ledger", "--state", "delivered").exit_code == 2  # an outcome, not a run state


def test_since_takes_a_time_ago_or_an_iso_time(history: Path) -> None:
    assert len(_ledger("--since", "10m")) == len(_ledger())
    later = (dt.datetime.now() + dt.timedelta(minutes=5)).isoformat(timespec="seconds")
    assert _ledger("--since", later) == []
    bad = run_cli("ledger", "--since", "yesterday")
    assert bad.exit_code == 2 and "yesterday" in bad.stderr


def test_wide_shows_whole_messages(history: Path) -> None:
    narrow = run_cli("ledger").stdout
    wide = run_cli("ledger", "--wide").stdout
    assert LONG not in narrow and LONG[:40] in narrow
    assert LONG in wide


def test_the_wait_column_is_empty_for_a_refused_message_and_says_the_wait_of_one_that_waited(history: Path) -> None:
    assert run_cli("profile", "allow", "research", "default").exit_code == 0
    assert run_cli("send", "research", "/send default come in").exit_code == 0
    header, *lines = run_cli("ledger", "--wide").stdout.splitlines()
    start = header.index("WAIT")
    [refused] = [line for line in lines if " knock knock " in line and "human:cli" not in line]
    assert "refused" in refused and refused[start:].split()[0] == "-", refused  # it never waited: refused at once
    [waited] = [line for line in lines if " come in " in line and "human:cli" not in line]
    assert "delivered" in waited and waited[start:].split()[0] == "120s", waited  # an agent's send waits 120 s
    assert [e["wait_seconds"] for e in _ledger("--state", "refused")] == [120]  # what it asked for stays in --json


@pytest.mark.skipif(sys.platform == "win32", reason="ends the follower with SIGINT")
@pytest.mark.parametrize("via", ["in-process", "gateway"])
def test_follow_prints_new_entries_as_they_come_until_ctrl_c(
    initialised: Path, via: str, request: pytest.FixtureRequest
) -> None:
    if via == "gateway":
        request.getfixturevalue("gateway")
    assert run_cli("send", "default", "before following").exit_code == 0
    proc = interruptible(
        [sys.executable, "-m", "backchannel", "ledger", "--follow", "--json"],
        env={**os.environ, "BACKCHANNEL_HOME": str(initialised), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out = proc.stdout
    assert out is not None
    lines: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(line) for line in out), daemon=True)
    reader.start()
    try:
        _until(lambda: any(e["message"] == "before following" for e in lines), "the entry that was there first")
        sent = run_cli("send", "default", "while following", "--json")
        assert sent.exit_code == 0 and json.loads(sent.stdout)["via"] == via.replace("in-process", "local")
        _until(
            lambda: any(e["message"] == "while following" and e["outcome"] == "delivered" for e in lines),
            "the new entry",
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert [e["message"] for e in lines].count("before following") == 1  # each entry once, unless it changes


def _until(done: Any, what: str, within: float = 60.0) -> None:
    eventually(done, within=within, what=f"the follower never printed {what}")
