"""`profile allow | accept | hold | budget`: a profile's messaging rules changed from the CLI, each pattern checked
as the loader checks it, the file's comments kept, a refused change leaving it as it was, a running gateway
following the change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backchannel.home import config
from conftest import GatewayThread, run_cli


def _rules(profile: str) -> dict[str, Any]:
    shown = run_cli("profile", "show", profile, "--json")
    assert shown.exit_code == 0, shown.stderr
    rules: dict[str, Any] = json.loads(shown.stdout)["session_messaging"]
    return rules


def _config(root: Path, profile: str) -> Path:
    return root / "profiles" / profile / "config.yaml"


def _tool_result(reply: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(reply.split("→ send_to_session: ", 1)[1].splitlines()[0])
    return found


def test_allow_adds_and_removes_patterns_keeping_the_files_comments(initialised: Path) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    path = _config(initialised, "research")
    path.write_text("# my notes about research\n" + path.read_text().replace("allow: []", "allow: []  # nothing yet"))

    added = run_cli("profile", "allow", "research", "builds", "peer:spark/*")
    assert added.exit_code == 0, added.stderr
    assert _rules("research")["allow"] == ["builds", "peer:spark/*"]
    assert "# my notes about research" in path.read_text()
    assert "research allow: builds, peer:spark/*" in added.stdout

    again = run_cli("profile", "allow", "research", "builds", "--json")  # already there: nothing doubles
    assert json.loads(again.stdout)["session_messaging"]["allow"] == ["builds", "peer:spark/*"]
    removed = run_cli("profile", "allow", "research", "peer:spark/*", "--remove")
    assert removed.exit_code == 0, removed.stderr
    assert _rules("research")["allow"] == ["builds"]
    assert "# my notes about research" in path.read_text()
    assert run_cli("profile", "allow", "research", "--clear").exit_code == 0
    assert _rules("research")["allow"] == []


@pytest.mark.parametrize(
    "args",
    [
        ["allow", "research", "two words"],
        ["allow", "research", "a/b/c"],
        ["hold", "research", ""],
        ["allow", "research", "never-added", "--remove"],
        ["allow", "nosuch", "builds"],
        ["allow", "research"],
    ],
    ids=["blank", "too-many-parts", "empty", "remove-what-is-not-there", "unknown-profile", "no-pattern"],
)
def test_a_bad_pattern_or_profile_is_refused_and_the_file_is_unchanged(initialised: Path, args: list[str]) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    before = _config(initialised, "research").read_bytes()
    refused = run_cli("profile", *args)
    assert refused.exit_code == 2, (refused.stdout, refused.stderr)
    assert "Traceback" not in refused.stderr and refused.stderr.strip()
    assert _config(initialised, "research").read_bytes() == before


def test_the_loader_refuses_the_pattern_the_command_refuses(initialised: Path) -> None:
    assert run_cli("profile", "create", "research").exit_code == 0
    path = _config(initialised, "research")
    path.write_text(path.read_text().replace("allow: []", "allow: ['two words']"))
    shown = run_cli("profile", "show", "research")
    assert shown.exit_code == 2 and "two words" in shown.stderr, shown.stderr


def test_accept_and_hold_are_shown_and_accept_clear_lets_any_allowed_sender_again(initialised: Path) -> None:
    assert run_cli("profile", "create", "builds").exit_code == 0
    assert run_cli("profile", "accept", "builds", "research", "peer:*").exit_code == 0
    assert run_cli("profile", "hold", "builds", "peer:*").exit_code == 0
    rules = _rules("builds")
    assert rules["accept"] == ["research", "peer:*"] and rules["hold"] == ["peer:*"], rules
    shown = run_cli("profile", "show", "builds").stdout
    assert "session_messaging.hold:" in shown and "peer:*" in shown
    cleared = run_cli("profile", "accept", "builds", "--clear")
    assert cleared.exit_code == 0 and "any sender that is allowed to" in cleared.stdout
    assert _rules("builds")["accept"] is None


def test_budget_sets_the_numbers_and_refuses_none(initialised: Path) -> None:
    set_ = run_cli("profile", "budget", "default", "--pair-budget", "5", "--max-hops", "2", "--hold-expiry", "60")
    assert set_.exit_code == 0, set_.stderr
    rules = _rules("default")
    assert (rules["pair_budget_per_hour"], rules["max_hops"], rules["hold_expiry_seconds"]) == (5, 2, 60.0), rules
    assert run_cli("profile", "budget", "default").exit_code == 2
    assert run_cli("profile", "budget", "default", "--max-hops", "-1").exit_code == 2


def test_budget_sets_and_shows_what_the_agents_may_spend_and_none_takes_a_limit_out(initialised: Path) -> None:
    set_ = run_cli(
        "profile", "budget", "default", "--tokens-per-exchange", "600", "--tokens-per-day", "200000",
        "--usd-per-day", "2.50", "--hold-expiry", "86400", "--json",
    )  # fmt: skip
    assert set_.exit_code == 0, set_.stderr

    def written() -> dict[str, Any]:
        rules: dict[str, Any] = config.load_yaml(_config(initialised, "default"))["agent"]["session_messaging"]
        return rules

    shown = json.loads(set_.stdout)["session_messaging"]
    assert shown["budget"] == {"tokens_per_exchange": 600, "tokens_per_day": 200000, "usd_per_day": 2.5}, shown
    assert written()["budget"] == {"tokens_per_exchange": 600, "tokens_per_day": 200000, "usd_per_day": 2.5}
    assert type(written()["hold_expiry_seconds"]) is int and shown["hold_expiry_seconds"] == 86400
    text = run_cli("profile", "show", "default").stdout
    assert "session_messaging.budget.usd_per_day:" in text and "2.5" in text
    assert "session_messaging.hold_expiry_seconds:" in text and "86400.0" not in text

    assert run_cli("profile", "budget", "default", "--usd-per-day", "none", "--tokens-per-day", "None").exit_code == 0
    assert written()["budget"] == {"tokens_per_exchange": 600}
    assert "session_messaging.budget.usd_per_day:         no limit" in run_cli("profile", "show", "default").stdout
    assert run_cli("profile", "budget", "default", "--tokens-per-exchange", "none").exit_code == 0
    assert "budget" not in written()  # the last one out: the section goes too

    for bad in (
        ("--tokens-per-day", "2.5"), ("--tokens-per-day", "x"), ("--usd-per-day", "-1"), ("--usd-per-day", "inf")
    ):
        refused = run_cli("profile", "budget", "default", *bad)
        assert refused.exit_code == 2 and "Invalid value for" in refused.stderr, (bad, refused.stderr)
    assert "budget" not in written()


def test_accept_naming_a_profile_takes_a_mention_from_any_session_of_it_as_the_readme_shows(initialised: Path) -> None:
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    assert run_cli("profile", "allow", "research", "builds").exit_code == 0
    assert run_cli("profile", "accept", "builds", "research").exit_code == 0
    said = run_cli("chat", "-p", "research", "-q", "@session:builds is the build green?", "--json")  # a new session
    assert said.exit_code == 0, said.stderr
    assert "builds (echo): is the build green?" in json.loads(said.stdout)["reply"], said.stdout
    assert "does not accept" not in said.stdout
    assert run_cli("profile", "accept", "builds", "research/20000101_000000_000000").exit_code == 0
    assert run_cli("profile", "accept", "builds", "--remove", "research").exit_code == 0  # one session only now
    refused = run_cli("chat", "-p", "research", "-q", "@session:builds and now?", "--json")
    assert "does not accept messages from research/" in refused.stdout, refused.stdout


def test_a_running_gateway_follows_an_allow_at_once(gateway: GatewayThread) -> None:
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    before = json.loads(run_cli("send", "research", "/send builds first try", "--json").stdout)
    assert before["via"] == "gateway" and _tool_result(before["reply"])["result"] == "refused", before

    assert run_cli("profile", "allow", "research", "builds").exit_code == 0
    after = json.loads(run_cli("send", "research", "/send builds second try", "--json").stdout)

    assert _tool_result(after["reply"])["result"] == "delivered", after
