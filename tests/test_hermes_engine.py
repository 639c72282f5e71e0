"""The hermes engine against a fake Hermes API server, through the real CLI: mapping, rotation, failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import GatewayThread, free_port, run_cli
from fake_hermes import FakeHermes

KEY = "hermes-fake-key-0123456789"


def hermes_profile(root: Path, url: str, *, name: str = "research", extra: list[str] | None = None) -> None:
    made = run_cli(
        "profile",
        "create",
        name,
        "--engine",
        "hermes",
        "--base-url",
        url,
        "--api-key-env",
        "HERMES_KEY",
        *(extra or []),
    )
    assert made.exit_code == 0, made.stderr
    with (root / ".env").open("a") as fh:
        fh.write(f"HERMES_KEY={KEY}\n")


def send(address: str, text: str) -> dict[str, object]:
    sent = run_cli("send", address, text, "--json")
    out: dict[str, object] = json.loads(sent.stdout)
    out["exit_code"] = sent.exit_code
    return out


def test_a_key_added_to_env_is_used_by_the_running_gateway_at_its_next_turn(gateway: GatewayThread) -> None:
    with FakeHermes(key=KEY) as hermes:
        hermes.sessions["hermes_bot"] = {"title": "Bot Chat", "messages": []}
        made = run_cli("profile", "create", "research", "--engine", "hermes", "--base-url", hermes.url,
                       "--api-key-env", "HERMES_KEY")  # fmt: skip
        assert made.exit_code == 0, made.stderr
        before = send("research", "without a key")
        assert before["result"] == "failed" and "set HERMES_KEY in the home's .env" in str(before["error"]), before
        with (gateway.root / ".env").open("a") as fh:
            fh.write(f"HERMES_KEY={KEY}\n")  # as the error says, and no restart
        after = send("research", "with the key now")
        assert after["result"] == "delivered" and after["reply"] == "fake hermes heard: with the key now", after
        with (gateway.root / ".env").open("a") as fh:
            fh.write("HERMES_KEY=another-key-it-refuses\n")  # the key changed again: so does what is sent
        assert send("research", "with a wrong key")["result"] == "failed"


def test_a_turn_is_a_hermes_turn_in_the_mapped_bot_chat(initialised: Path) -> None:
    with FakeHermes(key=KEY) as hermes:
        hermes.sessions["hermes_bot"] = {"title": "Bot Chat", "messages": []}  # Hermes's own Bot Chat
        hermes_profile(initialised, hermes.url)
        first = send("research", "what did you find?")
        assert first["exit_code"] == 0 and first["reply"] == "fake hermes heard: what did you find?"
        second = send("research", "and then?")
        assert second["reply"] == "fake hermes heard: and then?"
        # Both turns ran in the Bot Chat Hermes already had; only the (framed) message was sent, no history.
        assert hermes.chats() == [("hermes_bot", "what did you find?"), ("hermes_bot", "and then?")]
        # Backchannel keeps its own copy: the framed message and the reply.
        shown = json.loads(run_cli("sessions", "show", str(first["session_id"]), "--json").stdout)
        assert [m["role"] for m in shown["messages"]] == ["user", "assistant"] * 2
        assert shown["messages"][1]["content"] == "fake hermes heard: what did you find?"


def test_a_new_session_keeps_its_id_over_there_and_follows_a_rotation(initialised: Path) -> None:
    with FakeHermes(key=KEY) as hermes:
        hermes_profile(initialised, hermes.url)
        made = run_cli("chat", "-p", "research", "-q", "hello", "--json")
        assert made.exit_code == 0, made.stderr
        sid = json.loads(made.stdout)["session_id"]
        assert hermes.chats() == [(sid, hermes.chats()[0][1])]  # created there under the same id
        hermes.rotate = "rotated_tip"  # the next turn compresses the session into a child
        assert send(f"research/{sid}", "long one")["exit_code"] == 0
        assert send(f"research/{sid}", "after")["exit_code"] == 0
        assert [s for s, _ in hermes.chats()] == [sid, sid, "rotated_tip"]


def test_sessions_import_makes_hermes_sessions_addressable(initialised: Path) -> None:
    with FakeHermes(key=KEY) as hermes:
        hermes.sessions["20260801_110135_3a75b0"] = {"title": "pricing study", "messages": []}
        hermes.sessions["hermes_bot"] = {"title": "Bot Chat", "messages": []}
        hermes_profile(initialised, hermes.url)
        imported = run_cli("sessions", "import", "-p", "research", "--json")
        assert imported.exit_code == 0, imported.stderr
        rows = {r["hermes_id"]: r for r in json.loads(imported.stdout)}
        assert rows["20260801_110135_3a75b0"]["id"] == "20260801_110135_3a75b0" and rows["hermes_bot"]["created"]
        assert rows["hermes_bot"]["title"] == "Bot Chat"
        again = json.loads(run_cli("sessions", "import", "-p", "research", "--json").stdout)
        assert not any(r["created"] for r in again)  # nothing twice
        assert send("20260801_110135_3a75b0", "status?")["reply"] == "fake hermes heard: status?"
        assert hermes.chats()[-1][0] == "20260801_110135_3a75b0"


@pytest.mark.parametrize("mode", ["down", "nonsense", "slow", "wrong key", "no key"])
def test_a_hermes_gateway_that_fails_fails_the_run_naming_profile_and_url(initialised: Path, mode: str) -> None:
    with FakeHermes(key=KEY, mode=mode) as hermes:
        url = f"http://127.0.0.1:{free_port()}" if mode == "down" else hermes.url
        hermes_profile(initialised, url)
        cfg = initialised / "profiles/research/config.yaml"
        cfg.write_text(
            cfg.read_text()
            .replace("timeout_seconds: 120.0", "")
            .replace("engine: hermes", "engine: hermes\n  timeout_seconds: 1")
        )
        env = initialised / ".env"
        if mode == "wrong key":
            env.write_text(env.read_text().replace(KEY, "not-the-key-at-all"))
        if mode == "no key":
            env.write_text(env.read_text().replace(f"HERMES_KEY={KEY}\n", ""))
        failed = run_cli("send", "research", "hello")
        assert failed.exit_code == 1, failed.stdout
        assert "'research'" in failed.stderr and url in failed.stderr
        assert "Traceback" not in failed.stderr
        listed = json.loads(run_cli("runs", "list", "--json").stdout)
        assert [r["state"] for r in listed] == ["failed"]


def test_profile_create_refuses_what_the_hermes_engine_does_not_take(initialised: Path) -> None:
    bad = run_cli("profile", "create", "x", "--engine", "hermes", "--base-url", "http://h", "--model", "m")
    assert bad.exit_code == 2 and "--model" in bad.stderr
    bad = run_cli("profile", "create", "y", "--engine", "echo", "--hermes-profile", "p")
    assert bad.exit_code == 2 and "--hermes-profile" in bad.stderr
    bad = run_cli("profile", "create", "z", "--engine", "hermes", "--base-url", "ftp://h")
    assert bad.exit_code == 2 and "ftp://h" in bad.stderr
    assert not (initialised / "profiles/x").exists() and not (initialised / "profiles/z").exists()
    ok = run_cli("profile", "create", "w", "--engine", "hermes", "--base-url", "http://h:1", "--hermes-profile", "Ops")
    assert ok.exit_code == 0, ok.stderr
    shown = json.loads(run_cli("profile", "show", "w", "--json").stdout)
    assert shown["engine"] == "hermes" and shown["hermes_profile"] == "Ops" and shown["api_key_env"]


def test_a_hermes_session_id_not_imported_yet_is_imported_when_addressed(initialised: Path) -> None:
    with FakeHermes(key=KEY) as hermes:
        hermes.sessions["20260801_110135_3a75b0"] = {"title": "pricing study", "messages": []}
        hermes_profile(initialised, hermes.url)
        assert send("20260801_110135_3a75b0", "status?")["reply"] == "fake hermes heard: status?"
        assert hermes.chats()[-1][0] == "20260801_110135_3a75b0"
        listed = json.loads(run_cli("sessions", "list", "-p", "research", "--json").stdout)
        assert [s["id"] for s in listed] == ["20260801_110135_3a75b0"]
        assert send("research/20260801_110135_3a75b0", "again")["exit_code"] == 0  # the same session, not a copy
        assert len(json.loads(run_cli("sessions", "list", "-p", "research", "--json").stdout)) == 1

        # An id no Hermes gateway knows: not_found naming what was asked; nothing made, nothing sent.
        before = len(hermes.requests)
        missing = run_cli("send", "20260801_999999_000000", "hello?", "--json")
        assert missing.exit_code == 2 and "Traceback" not in missing.stderr, missing.stderr
        error = json.loads(missing.stdout)["error"]
        assert error["code"] == "not_found" and "research: no such session" in error["message"], error
        assert not any(method == "POST" for method, _, _ in hermes.requests[before:])
        assert len(json.loads(run_cli("sessions", "list", "-p", "research", "--json").stdout)) == 1


def test_an_unreachable_hermes_gateway_is_named_in_the_not_found(initialised: Path) -> None:
    hermes_profile(initialised, f"http://127.0.0.1:{free_port()}")
    missing = run_cli("send", "research/20260801_110135_3a75b0", "hello?", "--json")
    assert missing.exit_code == 2 and "Traceback" not in missing.stderr, missing.stderr
    message = json.loads(missing.stdout)["error"]["message"]
    assert "20260801_110135_3a75b0" in message and "research:" in message and "127.0.0.1" in message, message
