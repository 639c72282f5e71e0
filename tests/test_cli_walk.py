"""What a newcomer meets at the CLI: the same answer with a gateway and without one, one shape for every
error, one word for every outcome, commands that say what they did (and did not) do."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import GatewayThread, interruptible, run_cli
from scripted_model import ScriptedModel

BROKEN = "model: [this is not yaml\n"


@contextlib.contextmanager
def _static_server(folder: Path) -> Iterator[str]:
    """A plain file server on loopback (something that is no gateway and no agent), as its base URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _bot_chat_of(profile: str) -> str:
    """Make the profile's Bot Chat (one delivered message) and return its id."""
    sent = run_cli("send", profile, "hello", "--json")
    assert sent.exit_code == 0, sent.stderr
    return str(json.loads(sent.stdout)["session_id"])


def _runs() -> list[dict[str, object]]:
    listed = run_cli("runs", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    found: list[dict[str, object]] = json.loads(listed.stdout)
    return found


@pytest.mark.parametrize("form", ["profile", "profile/session", "session"])
def test_a_send_to_a_profile_whose_config_is_broken_is_refused_at_once_without_a_gateway(
    initialised: Path, form: str
) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    sid = _bot_chat_of("builds")
    (initialised / "profiles" / "builds" / "config.yaml").write_text(BROKEN)
    address = {"profile": "builds", "profile/session": f"builds/{sid}", "session": sid}[form]
    before = _runs()

    sent = run_cli("send", address, "are you there?", "--wait", "5", "--json")

    assert sent.exit_code == 2, (sent.stdout, sent.stderr)
    body = json.loads(sent.stdout)
    assert body["result"] == "refused" and body["error"]["code"] == "invalid_config", body
    assert "config.yaml" in body["error"]["message"]
    assert _runs() == before  # nothing was recorded: nothing waits behind the broken file


def test_a_send_to_a_broken_profile_gets_the_same_answer_from_the_gateway(gateway: GatewayThread) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    sid = _bot_chat_of("builds")
    (gateway.root / "profiles" / "builds" / "config.yaml").write_text(BROKEN)
    before = _runs()

    sent = run_cli("send", f"builds/{sid}", "are you there?", "--wait", "5", "--json")

    assert sent.exit_code == 2, (sent.stdout, sent.stderr)
    assert json.loads(sent.stdout)["error"]["code"] == "invalid_config"
    assert _runs() == before


def test_a_key_for_a_profile_that_does_not_exist_is_refused_and_nothing_is_made(initialised: Path) -> None:
    made = run_cli("key", "create", "spark", "--profile", "default", "--profile", "nosuch", "--json")

    assert made.exit_code == 2, (made.stdout, made.stderr)
    body = json.loads(made.stdout)
    assert body["error"]["code"] == "profile_not_found" and "'nosuch'" in body["error"]["message"], body
    assert "default" in body["error"]["message"]  # the profiles there are
    assert json.loads(run_cli("key", "list", "--json").stdout) == []
    assert run_cli("key", "create", "spark", "--profile", "*").exit_code == 0  # a glob over names is taken


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_names_the_run_and_prints_the_exact_command_that_asks_again(initialised: Path) -> None:
    message = "/sleep 3\nslow answer"
    # The model's answer never comes: Ctrl-C lands mid-turn however slow the machine.
    with ScriptedModel([{"content": "never said", "delay": 900}]) as model:
        made = run_cli("profile", "create", "slow", "--engine", "openai", "--base-url", model.base_url, "--model", "m")
        assert made.exit_code == 0, made.stderr
        proc = interruptible(
            [sys.executable, "-m", "backchannel", "send", "slow", message, "--wait", "99", "--idempotency-key", "ck-1"],
            env={**os.environ, "BACKCHANNEL_HOME": str(initialised)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 300  # a Python started on a loaded machine
        while not model.requests:  # the message was handed in and its turn waits on the model
            assert proc.poll() is None and time.monotonic() < deadline, "the send never reached the model"
            time.sleep(0.05)
        found = _runs()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=300)

    assert proc.returncode == 130, err
    assert f"accepted as run {found[0]['run_id']}" in err, err
    assert shlex.join(["backchannel", "send", "slow", message, "--idempotency-key", "ck-1"]) in err, err
    assert "<the same message>" not in err


def test_the_ledger_says_the_outcome_in_the_words_of_every_surface(initialised: Path) -> None:
    assert run_cli("send", "default", "hello").exit_code == 0
    assert run_cli("send", "default", "/fail on purpose").exit_code == 1

    text = run_cli("ledger")
    header, *rows = text.stdout.splitlines()
    assert "OUTCOME" in header.split() and "STATE" not in header.split(), header
    assert any(" delivered " in row for row in rows) and not any("completed" in row for row in rows), rows
    assert any(" failed " in row for row in rows), rows
    entries = json.loads(run_cli("ledger", "--json").stdout)
    assert sorted(e["outcome"] for e in entries) == ["delivered", "failed"], entries
    assert sorted(e["state"] for e in entries) == ["completed", "failed"], entries  # the run states, as such


def _stop(run_id: str) -> tuple[int, str, dict[str, object]]:
    text = run_cli("runs", "stop", run_id)
    body = run_cli("runs", "stop", run_id, "--json")
    assert body.exit_code == text.exit_code, (text.stderr, body.stderr)
    return text.exit_code, text.stdout, json.loads(body.stdout)


@pytest.mark.parametrize("via", ["in-process", "gateway"])
def test_a_stop_that_worked_or_found_nothing_to_stop_exits_0(
    initialised: Path, via: str, request: pytest.FixtureRequest
) -> None:
    if via == "gateway":
        request.getfixturevalue("gateway")
    done = json.loads(run_cli("send", "default", "finished", "--json").stdout)["run_id"]
    slow = json.loads(run_cli("send", "default", "/sleep 30\nslow", "--wait", "0", "--json").stdout)["run_id"]
    code, _, body = _stop(slow)  # the first stop cancels it; the text run then finds it ended
    assert code == 0 and body["state"] == "cancelled", body

    code, text, body = _stop(done)
    assert code == 0 and f"run {done} already ended (completed); nothing to stop" in text, text
    assert (body["result"], body["state"], body["stopped"]) == ("delivered", "completed", False), body
    code, text, body = _stop(slow)
    assert code == 0 and f"run {slow} already ended (cancelled); nothing to stop" in text, text
    assert (body["result"], body["state"], body["stopped"]) == ("failed", "cancelled", False), body


def test_every_command_that_takes_a_session_takes_every_local_address_form(initialised: Path) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    assert run_cli("send", "default", "elsewhere").exit_code == 0  # a run of another session, never listed
    sent = json.loads(run_cli("send", "research", "remember this", "--json").stdout)
    sid, printed = sent["session_id"], sent["to"]  # `send` prints the session as profile/session-id
    assert printed == f"research/{sid}"
    for form in (printed, sid, "research"):  # research alone is its Bot Chat
        shown = run_cli("sessions", "show", form, "--json")
        assert shown.exit_code == 0, (form, shown.stderr)
        assert json.loads(shown.stdout)["session"]["id"] == sid
        listed = run_cli("runs", "list", "-p", form, "--json")
        assert listed.exit_code == 0, (form, listed.stderr)
        runs = json.loads(listed.stdout)
        assert sent["run_id"] in [r["run_id"] for r in runs] and {r["session_id"] for r in runs} == {sid}, form
        chatted = run_cli("chat", "--resume", form, "-q", f"again, via {form}", "--json")
        assert chatted.exit_code == 0, (form, chatted.stderr)
        assert json.loads(chatted.stdout)["session_id"] == sid
    missing = run_cli("sessions", "show", "research/20000101_000000_000000")
    assert missing.exit_code == 2 and "Traceback" not in missing.stderr
    assert run_cli("sessions", "show", "peer:spark").exit_code == 2


def test_a_profile_created_again_gets_a_fresh_bot_chat_and_the_old_one_stays_readable(initialised: Path) -> None:
    created_again()


def test_a_running_gateway_sends_to_the_fresh_bot_chat_of_a_profile_created_again(gateway: GatewayThread) -> None:
    """The gateway keeps the sessions it admitted messages to (no read per message): the Bot Chat it kept for the
    removed profile is forgotten when the profile's removal retitles it."""
    created_again()


def created_again() -> None:
    assert run_cli("profile", "create", "scratch").exit_code == 0
    old = json.loads(run_cli("send", "scratch", "the first life", "--json").stdout)["session_id"]
    again = json.loads(run_cli("send", "scratch", "the first life, again", "--json").stdout)["session_id"]
    assert again == old
    removed = run_cli("profile", "remove", "scratch", "--yes")
    assert removed.exit_code == 0 and old in removed.stderr, removed.stderr
    assert run_cli("profile", "create", "scratch").exit_code == 0

    new = json.loads(run_cli("send", "scratch", "the second life", "--json").stdout)["session_id"]

    assert new != old
    fresh = json.loads(run_cli("sessions", "show", "scratch", "--json").stdout)
    assert fresh["session"]["id"] == new and "the first life" not in json.dumps(fresh["messages"])
    kept = json.loads(run_cli("sessions", "show", old, "--json").stdout)
    assert kept["session"]["title"].startswith("Bot Chat (removed ") and "the first life" in json.dumps(kept)
    assert any(e["message"] == "the first life" for e in json.loads(run_cli("ledger", "--json").stdout))


def test_a_refusal_counts_one_message_as_one_message(initialised: Path) -> None:
    budget = run_cli("profile", "create", "chatty")
    assert budget.exit_code == 0
    rules = initialised / "profiles" / "chatty" / "config.yaml"
    rules.write_text(
        rules.read_text().replace("allow: []", "allow: [default]").replace("budget_per_hour: 30", "budget_per_hour: 1")
    )
    sent = json.loads(run_cli("send", "chatty", "/send default one\n/send default two", "--json").stdout)
    assert "already sent 1 message to default" in sent["reply"] and "1 messages" not in sent["reply"], sent


def test_a_url_that_is_no_agent_card_is_said_so_once(initialised: Path, tmp_path: Path) -> None:
    not_a_card = tmp_path / "www"
    not_a_card.mkdir()
    with _static_server(not_a_card) as url:
        (not_a_card / "card.json").write_text('{"hello": 1}')
        wrong = run_cli("peer", "add", "x", "--url", f"{url}/card.json", "--key", "k" * 20, "--no-key-back")
        missing = run_cli("peer", "add", "y", "--url", f"{url}/none.json", "--key", "k" * 20, "--no-key-back")
    assert wrong.exit_code == 2 and wrong.stderr.count("is not an A2A agent card") == 1, wrong.stderr
    assert missing.exit_code == 2 and "HTTP 404" in missing.stderr and "JSON-RPC" not in missing.stderr, missing.stderr
    assert "): HTTP 404" not in missing.stderr


def test_a_receipt_for_a_running_turn_does_not_say_queued(initialised: Path) -> None:
    running = json.loads(run_cli("send", "default", "/sleep 2\nslow", "--wait", "0.5", "--json").stdout)
    assert running["state"] == "running" and "queued" not in running["detail"], running


def test_init_port_sets_where_the_gateway_listens_keeping_the_home_config(initialised: Path) -> None:
    path = initialised / "config.yaml"
    path.write_text("# my home\n" + path.read_text())
    gateway_id = path.read_text().split("id: ")[1].split()[0]

    set_ = run_cli("init", "--port", "25123", "--json")

    assert set_.exit_code == 0, set_.stderr
    assert json.loads(set_.stdout)["changed"], set_.stdout
    text = path.read_text()
    assert "# my home" in text and "port: 25123" in text and f"id: {gateway_id}" in text
    assert run_cli("init", "--port", "0").exit_code == 2
