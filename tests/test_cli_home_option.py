"""`--home PATH` on every command: what BACKCHANNEL_HOME does, for a host that starts us with a clean environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from backchannel.cli.app import cli
from conftest import run_cli, subcommands


def every_command(command: click.Command, path: str = "backchannel") -> list[tuple[str, click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name, sub in subcommands(command).items():
            found += every_command(sub, f"{path} {name}")
    return found


def test_every_command_takes_home() -> None:
    commands = every_command(cli)
    leaves = [path for path, command in commands if not isinstance(command, click.Group)]
    assert len(leaves) > 30 and "backchannel mcp" in leaves and "backchannel peer dm" in leaves
    missing = [path for path, command in commands if not any("--home" in p.opts for p in command.params)]
    assert missing == []


def clean_env(user_home: Path) -> dict[str, str]:
    """An environment as a host gives its servers: no BACKCHANNEL_HOME, and a HOME of its own."""
    env = {k: v for k, v in os.environ.items() if k != "BACKCHANNEL_HOME"}
    env["HOME"] = str(user_home)
    return env


def backchannel(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backchannel", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_home_moves_the_whole_home_whatever_the_environment_says(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "user")
    root = tmp_path / "elsewhere"
    assert backchannel(env, "--home", str(root), "init").returncode == 0  # on the group
    assert backchannel(env, "profile", "create", "builds", "--home", str(root)).returncode == 0  # on a leaf
    sent = backchannel(env, "send", "builds", "hello", "--home", str(root), "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["reply"] == "builds (echo): hello"
    listed = backchannel(env, "ledger", "--json", "--home", str(root))
    assert [row["target"].split("/")[0] for row in json.loads(listed.stdout)] == ["builds"]
    assert (root / "state.db").exists() and not (tmp_path / "user" / ".backchannel").exists()
    # and it wins over BACKCHANNEL_HOME
    other = backchannel(
        {**env, "BACKCHANNEL_HOME": str(tmp_path / "other")}, "profile", "list", "--json", "--home", str(root)
    )
    assert {p["name"] for p in json.loads(other.stdout)} == {"default", "builds"}, other.stderr
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("value, says", [("", "is empty"), ("FILE", "is a file, not a folder")])
def test_a_bad_home_is_a_usage_error_that_names_it(tmp_path: Path, home: Path, value: str, says: str) -> None:
    if value == "FILE":
        value = str(tmp_path / "a-file")
        Path(value).write_text("not a home\n")
    result = run_cli("init", "--home", value)
    assert result.exit_code == 2, result
    assert "--home" in result.stderr and says in result.stderr and "Traceback" not in result.stderr
    assert not home.exists(), "nothing was made in the home BACKCHANNEL_HOME names either"
