"""`backchannel doctor` through the CLI: a healthy home, broken configs, model endpoints up and down, the
running gateway, and peers whose key is right or wrong (real gateway processes)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backchannel.home import config, peers
from conftest import GatewayThread, api_key, free_port, run_cli
from gateway_http import other_home
from scripted_model import ScriptedModel


def doctor(*args: str) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    """Run doctor --json: the exit code, the checks, and the whole object."""
    result = run_cli("doctor", "--json", *args)
    assert "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    return result.exit_code, data["checks"], data


def lines(checks: list[dict[str, Any]], check: str) -> list[dict[str, Any]]:
    return [c for c in checks if c["check"] == check]


def only(checks: list[dict[str, Any]], check: str) -> dict[str, Any]:
    found = lines(checks, check)
    assert len(found) == 1, (check, checks)
    return found[0]


@pytest.mark.sqlite
def test_a_healthy_home_is_all_ok(initialised: Path) -> None:
    result = run_cli("doctor")
    assert result.exit_code == 0, result.stdout
    assert result.stdout.strip().endswith("all checks ok")
    code, checks, data = doctor()
    assert code == 0 and data["ok"] is True
    names = [c["check"] for c in checks]
    assert names == ["home", "config.yaml", ".env", "state.db", "profiles", "profile default", "gateway"]
    assert {c["status"] for c in checks} == {"ok"}
    assert "not running" in only(checks, "gateway")["detail"]


def test_a_profile_allowed_to_message_one_that_accepts_none_of_its_sessions_is_warned_of(initialised: Path) -> None:
    for name in ("research", "builds", "lead"):
        assert run_cli("profile", "create", name).exit_code == 0
    assert run_cli("profile", "allow", "lead", "builds").exit_code == 0
    assert run_cli("profile", "allow", "research", "builds").exit_code == 0
    assert run_cli("profile", "accept", "builds", "research").exit_code == 0
    _, checks, _ = doctor()
    crossed = only(checks, "rules lead -> builds")
    assert crossed["status"] == "warn", crossed
    assert crossed["detail"] == "lead may message builds, but builds accepts only research"
    assert "backchannel profile accept builds lead" in crossed["fix"]
    assert not [c for c in checks if c["check"] == "rules research -> builds"]  # research is accepted
    assert run_cli("profile", "accept", "builds", "lead/2026*").exit_code == 0  # some of lead's sessions: no longer
    assert not [c for c in doctor()[1] if c["check"].startswith("rules ")]


def test_a_hermes_profile_is_checked_for_its_key_and_its_server_as_an_openai_one_is(initialised: Path) -> None:
    from fake_hermes import FakeHermes

    key = "hermes-key-" + "k" * 16
    with FakeHermes(key=key) as hermes:
        made = run_cli("profile", "create", "research", "--engine", "hermes", "--base-url", hermes.url,
                       "--api-key-env", "HERMES_KEY")  # fmt: skip
        assert made.exit_code == 0, made.stderr
        code, checks, _ = doctor()
        missing = only(checks, "endpoint research")
        assert code == 1 and missing["status"] == "fail" and "HERMES_KEY is set neither in .env" in missing["detail"]
        assert "add HERMES_KEY=<that Hermes home's API_SERVER_KEY>" in missing["fix"]

        assert run_cli("profile", "create", "wrong", "--engine", "hermes", "--base-url", hermes.url,
                       "--api-key-env", "WRONG_KEY").exit_code == 0  # fmt: skip
        with (initialised / ".env").open("a") as env:
            env.write(f"HERMES_KEY={key}\nWRONG_KEY=not-the-key-at-all\n")
        code, checks, _ = doctor()
        assert only(checks, "endpoint research")["status"] == "ok", checks
        refused = only(checks, "endpoint wrong")
        assert refused["status"] == "fail" and "check WRONG_KEY" in refused["fix"], refused
    code, checks, _ = doctor()  # nothing listens there any more
    gone = only(checks, "endpoint research")
    assert gone["status"] == "fail" and "nothing accepted the connection" in gone["detail"], gone
    assert "hermes gateway run" in gone["fix"]


def test_json_shape_is_ok_and_checks_with_a_fix_on_failures(initialised: Path) -> None:
    (initialised / "profiles/default/config.yaml").write_text("agent:\n  max_turns: 0\n")
    code, checks, data = doctor()
    assert code == 1 and set(data) == {"ok", "checks"} and data["ok"] is False
    for c in checks:
        assert set(c) <= {"check", "status", "detail", "fix"} and {"check", "status", "detail"} <= set(c)
        assert c["status"] in ("ok", "warn", "fail")
    broken = only(checks, "profile default")
    assert broken["status"] == "fail" and "max_turns" in broken["detail"] and broken["fix"]


def test_a_typo_in_a_profile_key_names_it_and_the_closest_key(initialised: Path) -> None:
    cfg = initialised / "profiles/default/config.yaml"
    cfg.write_text(cfg.read_text().replace("    allow: []", "    alow: []"))
    result = run_cli("doctor")
    assert result.exit_code == 1
    line = next(x for x in result.stdout.splitlines() if "alow" in x)
    assert line.startswith("FAIL") and "'agent.session_messaging.allow'" in line and str(cfg) in line
    assert "warning:" not in result.stderr  # doctor reports it once, as a check


def test_a_typo_in_the_home_config_fails_too(initialised: Path) -> None:
    cfg = config.config_path(initialised)
    cfg.write_text(cfg.read_text().replace("  port: 8377", "  prot: 8377"))
    code, checks, _ = doctor()
    assert code == 1
    assert "did you mean 'gateway.port'" in only(checks, "config.yaml")["detail"]


def test_hermes_keys_are_listed_as_ignored_not_failed(initialised: Path) -> None:
    cfg = initialised / "profiles/default/config.yaml"
    cfg.write_text(cfg.read_text() + "toolsets: [hermes-cli]\nterminal: {backend: local}\n")
    code, checks, _ = doctor()
    assert code == 0
    line = only(checks, "profile default")
    assert line["status"] == "ok" and "ignores Hermes keys: toolsets, terminal" in line["detail"]


def test_an_empty_home_config_fails_with_the_repair_command(initialised: Path) -> None:
    config.config_path(initialised).write_text("")
    code, checks, _ = doctor()
    assert code == 1
    line = only(checks, "config.yaml")
    assert line["status"] == "fail" and "empty" in line["detail"] and line["fix"] == "backchannel init --repair"


def test_an_empty_profile_config_is_a_warning_that_the_defaults_apply(initialised: Path) -> None:
    (initialised / "profiles/default/config.yaml").write_text("")
    code, checks, _ = doctor()
    assert code == 0
    line = only(checks, "profile default")
    assert line["status"] == "warn" and "defaults apply" in line["detail"]


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_an_env_others_can_read_fails(initialised: Path) -> None:
    env = config.env_path(initialised)
    env.chmod(0o644)
    code, checks, _ = doctor()
    assert code == 1
    line = only(checks, ".env")
    assert "0644" in line["detail"] and line["fix"] == f"chmod 600 {env}"


def test_no_home_is_one_failure(home: Path) -> None:
    code, checks, _ = doctor()
    assert code == 1 and [c["check"] for c in checks] == ["home"]
    assert checks[0]["fix"] == "backchannel init"


def _openai_profile(name: str, base_url: str, model: str) -> None:
    result = run_cli("profile", "create", name, "--engine", "openai", "--base-url", base_url, "--model", model)
    assert result.exit_code == 0, result.stderr


def test_openai_endpoints_down_listing_and_not_listing_the_model(initialised: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    with ScriptedModel(model="qwen-test") as model:
        _openai_profile("listed", model.base_url, "qwen-test")
        _openai_profile("unlisted", model.base_url, "other-model")
        _openai_profile("down", down, "qwen-test")
        code, checks, _ = doctor()
    assert code == 1  # the endpoint that is down
    fails = [c for c in lines(checks, "endpoint down") if c["status"] == "fail"]
    assert len(fails) == 1 and "could not reach" in fails[0]["detail"] and "model.base_url" in fails[0]["fix"]
    listed = [c for c in lines(checks, "endpoint listed") if c["status"] != "warn" or "api_key_env" not in c["detail"]]
    assert [c["status"] for c in listed] == ["ok"] and "lists model 'qwen-test'" in listed[0]["detail"]
    unlisted = [c for c in lines(checks, "endpoint unlisted") if "other-model" in c["detail"]]
    assert [c["status"] for c in unlisted] == ["warn"] and "qwen-test" in unlisted[0]["detail"]


def test_the_docs_ollama_example_gets_no_warning_about_a_key(initialised: Path) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "models.md").read_text(encoding="utf-8")
    example = page.split("# Pointing a profile at a real model", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "# Ollama" in example
    _openai_profile("coder", "http://127.0.0.1:11434/v1", "qwen2.5:7b-instruct")
    (initialised / "profiles" / "coder" / "config.yaml").write_text(example, encoding="utf-8")
    _, checks, _ = doctor()
    assert only(checks, "profile coder")["status"] == "ok", checks
    assert lines(checks, "endpoint coder"), checks  # its endpoint is checked (whether anything listens there)
    assert not [c for c in checks if "api_key_env" in c["detail"] or "KEY" in c.get("fix", "")], checks


def test_an_endpoint_is_asked_with_the_profiles_key(initialised: Path) -> None:
    with ScriptedModel(model="qwen-test", api_key="sk-test-123") as model:
        _openai_profile("coder", model.base_url, "qwen-test")
        code, checks, _ = doctor()  # OPENAI_API_KEY is not set yet
        assert code == 1
        statuses = [c["status"] for c in lines(checks, "endpoint coder")]
        assert statuses == ["warn", "fail"] and "HTTP 401" in lines(checks, "endpoint coder")[1]["detail"]
        env = config.env_path(initialised)
        env.write_text(env.read_text() + "OPENAI_API_KEY=sk-test-123\n")
        code, checks, _ = doctor()
    assert code == 0, checks
    assert only(checks, "endpoint coder")["status"] == "ok"
    assert "sk-test-123" not in json.dumps(checks)


def test_a_hung_endpoint_and_a_hung_peer_take_one_short_timeout_together(initialised: Path) -> None:
    with socket.socket() as hung:  # accepts connections (the backlog) and never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        _openai_profile("slow", f"{url}/v1", "m")
        peers.save(initialised, "slow", url=url, key="slow-key-123456", note=None)  # `peer add` would wait for it
        started = time.monotonic()
        code, checks, _ = doctor()
        elapsed = time.monotonic() - started
    assert code == 1
    assert [c["status"] for c in lines(checks, "endpoint slow") if "api_key_env" not in c["detail"]] == ["fail"]
    assert only(checks, "peer slow")["status"] == "fail" and "did not answer" in only(checks, "peer slow")["detail"]
    assert elapsed < 5.5, elapsed  # 3 s each, at the same time


@pytest.fixture
def second_home(tmp_path: Path) -> Iterator[GatewayThread]:
    """Another home with its own running gateway, to be a peer of the test's home."""
    with other_home(tmp_path / "beta") as gw:
        yield gw


def test_the_running_gateway_and_peers_with_right_and_wrong_keys(
    gateway: GatewayThread, second_home: GatewayThread
) -> None:
    added = run_cli("peer", "add", "beta", "--url", second_home.url, "--key", api_key(second_home.root))
    assert added.exit_code == 0, added.stderr
    code, checks, _ = doctor()
    assert code == 0, checks
    own = only(checks, "gateway")
    assert own["status"] == "ok" and gateway.url in own["detail"] and f"pid {gateway.pid}" in own["detail"]
    assert "backchannel 0.1.0" in own["detail"]
    beta = only(checks, "peer beta")  # the other home's own key: we would arrive there as its person
    assert beta["status"] == "warn" and "takes our key as its person's" in beta["detail"], beta
    assert "key create" in beta["fix"]

    made = subprocess.run(
        [sys.executable, "-m", "backchannel", "key", "create", "alpha", "--json"],
        env={**os.environ, "BACKCHANNEL_HOME": str(second_home.root)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    peer_key = json.loads(made.stdout)["key"]
    assert run_cli("peer", "add", "beta", "--url", second_home.url, "--key", peer_key).exit_code == 0
    code, checks, _ = doctor()
    assert code == 0, checks
    beta = only(checks, "peer beta")
    assert beta["status"] == "ok" and "key accepted" in beta["detail"] and second_home.url in beta["detail"]

    added = run_cli("peer", "add", "gamma", "--url", second_home.url, "--key", "not-the-right-key")
    assert added.exit_code == 0, added.stderr
    code, checks, _ = doctor()
    assert code == 1
    gamma = only(checks, "peer gamma")
    assert gamma["status"] == "fail" and "refused our key" in gamma["detail"] and "peer add gamma" in gamma["fix"]
    assert "not-the-right-key" not in json.dumps(checks)
    assert only(checks, "peer beta")["status"] == "ok"


def test_a_peer_that_is_down_fails(initialised: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert run_cli("peer", "add", "gone", "--url", url, "--key", "gone-key-123456").exit_code == 0
    code, checks, _ = doctor()
    assert code == 1
    line = only(checks, "peer gone")
    assert line["status"] == "fail" and "could not reach" in line["detail"]
