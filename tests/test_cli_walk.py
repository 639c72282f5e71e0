"""What a newcomer meets at the CLI: the same answer with a gateway and without one, one shape for every
error, one word for every outcome, commands that say what they did (and did not) do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import GatewayProcess, run_cli

BROKEN = "model: [this is not yaml\n"


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


def test_a_send_to_a_broken_profile_gets_the_same_answer_from_the_gateway(gateway: GatewayProcess) -> None:
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
