"""Replies that stream: `send` and `chat` print the reply as the engine produces it, and say what a queued
message waits behind — through the running gateway's /chat/stream and in-process alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GatewayThread, free_port, run_cli
from scripted_model import ScriptedModel
from test_openai_e2e import make_openai_profile

SLOW_REPLY = "alpha beta gamma delta epsilon"


def _start_gateway(root: Path) -> GatewayThread:
    return GatewayThread(root, free_port()).start()


@pytest.mark.parametrize("via", ["gateway", "in-process"])
def test_send_prints_the_reply_while_the_model_is_still_writing_it(initialised: Path, via: str) -> None:
    with ScriptedModel([{"content": SLOW_REPLY, "chunk_delay": 0.3}], stream=True, chunk_size=6) as model:
        make_openai_profile(initialised, model.base_url)
        gateway = _start_gateway(initialised) if via == "gateway" else None
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "backchannel", "send", "coder", "go on", "--stream"],
                env={**os.environ, "BACKCHANNEL_HOME": str(initialised)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert proc.stdout is not None
            first = os.read(proc.stdout.fileno(), 1024).decode()
            still_writing = proc.poll() is None
            rest, err = proc.communicate(timeout=60)
        finally:
            if gateway is not None:
                gateway.close()
    assert proc.returncode == 0, err.decode()
    assert still_writing and first and SLOW_REPLY.startswith(first) and first != SLOW_REPLY
    assert first + rest.decode() == SLOW_REPLY + "\n"  # shown once, as it came, and the line ended


def _two_in_a_row(root: Path) -> tuple[str, str]:
    """A slow message left waiting, then a streamed one behind it in the same session (the Bot Chat)."""
    first = run_cli("send", "default", "/sleep 1.5\nfirst", "--wait", "0", "--json")
    assert first.exit_code == 0, first.stderr
    second = run_cli("send", "default", "second", "--stream")
    assert second.exit_code == 0, second.stderr
    session = json.loads(first.stdout)["session_id"]
    return second.stdout + second.stderr, session


def test_a_streamed_send_says_how_many_runs_it_waits_behind_in_the_gateway(initialised: Path) -> None:
    gateway = _start_gateway(initialised)
    try:
        shown, session = _two_in_a_row(initialised)
    finally:
        gateway.close()
    assert f"queued behind 1 run in default/{session}" in shown
    assert "default (echo): second\n" in shown


def test_a_streamed_send_says_how_many_runs_it_waits_behind_in_process(initialised: Path) -> None:
    shown, session = _two_in_a_row(initialised)  # no gateway: the first run is answered by the second command
    assert f"queued behind 1 run in default/{session}" in shown
    ledger = json.loads(run_cli("ledger", "default", "--json").stdout)
    assert sorted(r["state"] for r in ledger) == ["completed", "completed"]


def test_chat_streams_each_reply_once(initialised: Path) -> None:
    result = run_cli("chat", "-q", "hello there", "--stream")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "default (echo): hello there\n"


def test_a_stream_that_runs_out_of_wait_prints_the_receipt(initialised: Path) -> None:
    gateway = _start_gateway(initialised)
    try:
        result = run_cli("send", "default", "/sleep 3\nslow", "--stream", "--wait", "0.5")
    finally:
        gateway.close()
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("receipt: run run_") and "accepted, do not resend" in result.stdout
    assert "backchannel runs follow run_" in result.stderr


def test_a_streamed_turn_that_fails_exits_1_with_its_error(initialised: Path) -> None:
    gateway = _start_gateway(initialised)
    try:
        result = run_cli("send", "default", "/fail the model fell over", "--stream")
    finally:
        gateway.close()
    assert result.exit_code == 1
    assert result.stderr.startswith("error: run run_") and "the model fell over" in result.stderr


def test_stream_and_json_together_is_a_usage_error(initialised: Path) -> None:
    result = run_cli("send", "default", "hi", "--stream", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["message"].startswith("give --stream")
    assert json.loads(run_cli("ledger", "--json").stdout) == []  # nothing was sent


def test_a_replayed_message_streams_its_first_answer(initialised: Path) -> None:
    first = run_cli("send", "default", "once", "--idempotency-key", "k-stream-1", "--json")
    again = run_cli("send", "default", "once", "--idempotency-key", "k-stream-1", "--stream")
    assert again.exit_code == 0, again.stderr
    assert again.stdout == json.loads(first.stdout)["reply"] + "\n"
    assert len(json.loads(run_cli("ledger", "--json").stdout)) == 1  # one run, answered once
