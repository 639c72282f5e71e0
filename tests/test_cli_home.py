"""The home, profiles, chat and sessions through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

from backchannel.home import config
from conftest import is_private, run_cli


def test_init_creates_home_with_secret_key_and_echo_default_profile(home: Path) -> None:
    result = run_cli("init")
    assert result.exit_code == 0, result.stderr
    assert is_private(home / ".env")
    key = config.read_env(home)["API_SERVER_KEY"]
    assert len(key) >= 32
    cfg = config.load_yaml(home / "config.yaml")["gateway"]
    assert (cfg["host"], cfg["port"]) == ("127.0.0.1", 8377)
    assert cfg["id"]
    for part in ("SOUL.md", "memories/MEMORY.md", "memories/USER.md", "skills", "config.yaml"):
        assert (home / "profiles/default" / part).exists(), part
    assert config.load_yaml(home / "profiles/default/config.yaml")["model"]["engine"] == "echo"
    assert key not in result.stdout + result.stderr


def test_init_again_changes_nothing_and_says_so(initialised: Path) -> None:
    before = {p: p.read_bytes() for p in initialised.rglob("*") if p.is_file()}
    result = run_cli("init")
    assert result.exit_code == 0
    assert "nothing changed" in result.stderr
    assert f"home: {initialised}" in result.stdout and "next: backchannel chat" in result.stdout
    assert {p: p.read_bytes() for p in initialised.rglob("*") if p.is_file()} == before


def test_commands_before_init_say_to_run_init(home: Path) -> None:
    result = run_cli("chat", "-q", "hi")
    assert result.exit_code == 2
    assert "backchannel init" in result.stderr


def test_profile_create_list_show(initialised: Path, tmp_path: Path) -> None:
    soul = tmp_path / "soul.md"
    soul.write_text("# Research\nYou dig up facts.\n")
    created = run_cli("profile", "create", "research", "--soul", str(soul), "--json")
    assert created.exit_code == 0, created.stderr
    assert json.loads(created.stdout)["engine"] == "echo"
    assert (initialised / "profiles/research/SOUL.md").read_text() == soul.read_text()
    listed = json.loads(run_cli("profile", "list", "--json").stdout)
    assert [p["name"] for p in listed] == ["default", "research"]
    shown = run_cli("profile", "show", "research")
    assert shown.exit_code == 0 and "research" in shown.stdout
    openai = run_cli(
        "profile",
        "create",
        "coder",
        "--engine",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m1",
        "--json",
    )
    assert openai.exit_code == 0, openai.stderr
    data = json.loads(openai.stdout)
    assert (data["engine"], data["base_url"], data["model"]) == ("openai", "http://127.0.0.1:9/v1", "m1")


def test_bad_profile_names_and_duplicates_are_usage_errors(initialised: Path) -> None:
    for name in ("Bad", "-x", "a/b", "x" * 65, ""):
        result = run_cli("profile", "create", name)
        assert result.exit_code == 2, name
        assert "error" in result.stderr.lower()
        assert "Traceback" not in result.stderr
    assert run_cli("profile", "create", "default").exit_code == 2
    assert run_cli("profile", "show", "ghost").exit_code == 2
    assert sorted(p.name for p in (initialised / "profiles").iterdir()) == ["default"]


def test_broken_config_yaml_names_file_and_line(initialised: Path) -> None:
    cfg = initialised / "profiles/default/config.yaml"
    cfg.write_text("model:\n  engine: echo\n  bad: [unclosed\n")
    result = run_cli("chat", "-q", "hi")
    assert result.exit_code == 2
    assert "config.yaml" in result.stderr and "line" in result.stderr
    assert "Traceback" not in result.stderr
    home_cfg = initialised / "config.yaml"
    home_cfg.write_text("gateway: [1, 2\n")
    result = run_cli("init")
    assert result.exit_code == 2 and "config.yaml" in result.stderr
    assert home_cfg.read_text() == "gateway: [1, 2\n"  # never overwritten


def test_env_with_a_bad_line_is_a_clear_error(initialised: Path) -> None:
    env = initialised / ".env"
    env.write_text(env.read_text() + "this line is not an assignment\n")
    result = run_cli("init")
    assert result.exit_code == 2
    assert ".env" in result.stderr and "line" in result.stderr


def test_unknown_engine_in_profile_config_is_reported(initialised: Path) -> None:
    (initialised / "profiles/default/config.yaml").write_text("model:\n  engine: telepathy\n")
    result = run_cli("chat", "-q", "hi")
    assert result.exit_code == 2
    assert "telepathy" in result.stderr


def test_chat_persists_and_resumes(initialised: Path) -> None:
    first = run_cli("chat", "-q", "hello there", "--json")
    assert first.exit_code == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["profile"] == "default" and "hello there" in data["reply"]
    again = run_cli("chat", "--resume", data["session_id"], "-q", "second message")
    assert again.exit_code == 0 and "second message" in again.stdout
    shown = json.loads(run_cli("sessions", "show", data["session_id"], "--json").stdout)
    assert [(m["role"], m["content"]) for m in shown["messages"]] == [
        ("user", "hello there"),
        ("assistant", "default (echo): hello there"),
        ("user", "second message"),
        ("assistant", "default (echo): second message"),
    ]
    listed = json.loads(run_cli("sessions", "list", "--json").stdout)
    assert [s["id"] for s in listed] == [data["session_id"]]
    assert listed[0]["message_count"] == 4


def test_same_words_twice_are_two_turns_for_a_person(initialised: Path) -> None:
    sid = json.loads(run_cli("chat", "-q", "yes", "--json").stdout)["session_id"]
    run_cli("chat", "--resume", sid, "-q", "yes")
    shown = json.loads(run_cli("sessions", "show", sid, "--json").stdout)
    assert [m["content"] for m in shown["messages"] if m["role"] == "user"] == ["yes", "yes"]


def test_chat_reads_the_message_from_stdin(initialised: Path) -> None:
    result = run_cli("chat", "-q", "-", "--json", input="from a pipe\n")
    assert result.exit_code == 0
    assert "from a pipe" in json.loads(result.stdout)["reply"]


def test_interactive_chat_keeps_one_session(initialised: Path) -> None:
    result = run_cli("chat", input="one\ntwo\n/exit\n")
    assert result.exit_code == 0, result.stderr
    assert "default (echo): one" in result.stdout and "default (echo): two" in result.stdout
    sessions = json.loads(run_cli("sessions", "list", "--json").stdout)
    assert len(sessions) == 1 and sessions[0]["message_count"] == 4


def test_resume_errors(initialised: Path) -> None:
    assert run_cli("chat", "--resume", "20990101_000000_abcdef", "-q", "hi").exit_code == 2
    run_cli("profile", "create", "research")
    sid = json.loads(run_cli("chat", "-q", "hi", "--json").stdout)["session_id"]
    wrong = run_cli("chat", "-p", "research", "--resume", sid, "-q", "hi")
    assert wrong.exit_code == 2 and "default" in wrong.stderr
    assert run_cli("sessions", "show", "nope").exit_code == 2
    assert run_cli("chat", "-q", "   ").exit_code == 2


def test_failed_turn_exits_1_and_keeps_the_session_as_it_was(initialised: Path) -> None:
    sid = json.loads(run_cli("chat", "-q", "first", "--json").stdout)["session_id"]
    failed = run_cli("chat", "--resume", sid, "-q", "/fail the model is down")
    assert failed.exit_code == 1
    assert "the model is down" in failed.stderr
    shown = json.loads(run_cli("sessions", "show", sid, "--json").stdout)
    assert len(shown["messages"]) == 2


def test_hermes_profile_folder_works_as_it_is(initialised: Path) -> None:
    folder = initialised / "profiles/hermesbot"
    (folder / "memories").mkdir(parents=True)
    (folder / "skills/devops/disk-check").mkdir(parents=True)
    (folder / "SOUL.md").write_text("You are Hermesbot.\n")
    (folder / "memories/MEMORY.md").write_text("the NAS is at nas.lan\n")
    (folder / "skills/devops/disk-check/SKILL.md").write_text(
        "---\nname: disk-check\ndescription: check free disk space\n---\nRun df -h.\n"
    )
    # A Hermes config: provider keys we do not use, toolsets, display settings, no `engine`.
    (folder / "config.yaml").write_text(
        "model:\n  default: anthropic/claude-sonnet\n  provider: openrouter\n"
        "toolsets: [web, terminal]\ndisplay:\n  compact: true\nagent:\n  max_turns: 40\n"
    )
    shown = json.loads(run_cli("profile", "show", "hermesbot", "--json").stdout)
    assert shown["skills"] == ["disk-check"]
    assert shown["max_turns"] == 40
    result = run_cli("chat", "-p", "hermesbot", "-q", "hi", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "hermesbot (echo): hi"


def test_help_and_version() -> None:
    assert run_cli("--help").exit_code == 0
    bare = run_cli()
    assert bare.exit_code == 0 and "Usage: backchannel" in bare.stdout and "runs" in bare.stdout
    assert "backchannel" in run_cli("--version").stdout
    assert run_cli("chat", "--bogus").exit_code == 2
