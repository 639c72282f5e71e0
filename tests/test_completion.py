"""Shell completion through the real command (click's `_BACKCHANNEL_COMPLETE` protocol, as bash asks it).

The home has two profiles with a session each, a peer and runs; completion offers their names and ids,
reads the home without changing a byte of it, and a broken or missing home completes nothing, quietly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.sqlite  # the home's own state.db


def complete(line: str) -> list[str]:
    """What bash would offer for the last word of `line` (a trailing space: a new, empty word), asked of the
    real entry point in-process as bash asks the command (test_a_completion_in_a_process_of_its_own: the same
    through `python -m backchannel`)."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    done = run_cli(env={"_BACKCHANNEL_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(cword)})
    return _offered(done.exit_code, done.stdout, done.stderr)


def complete_in_a_process(line: str) -> list[str]:
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    proc = subprocess.run(
        [sys.executable, "-m", "backchannel"],
        env={**os.environ, "_BACKCHANNEL_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(cword)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return _offered(proc.returncode, proc.stdout, proc.stderr)


def _offered(code: int, stdout: str, stderr: str) -> list[str]:
    assert code == 0, stderr
    assert stderr == "", stderr  # nothing printed into the shell but the completions
    items = [line.split(",", 1) for line in stdout.splitlines() if line]
    assert all(kind == "plain" for kind, _ in items), items
    return [value for _, value in items]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")}


@pytest.fixture
def populated(initialised: Path) -> dict[str, str]:
    """Profiles default and research, builds; a chat session of research and one of builds; peer spark."""
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    made: dict[str, str] = {}
    for name in ("research", "builds"):
        result = run_cli("chat", "-p", name, "-q", f"hello {name}", "--json")
        assert result.exit_code == 0, result.stderr
        body = json.loads(result.stdout)
        made[name], made[f"{name}_run"] = body["session_id"], body["run_id"]
    added = run_cli("peer", "add", "spark", "--url", "http://127.0.0.1:9", "--key", "spark-key-123")
    assert added.exit_code == 0, added.stderr
    return made


def test_profile_options_and_arguments_complete_profile_names(populated: dict[str, str]) -> None:
    assert complete("backchannel chat -p ") == ["builds", "default", "research"]
    assert complete("backchannel chat --profile re") == ["research"]
    assert complete("backchannel sessions list -p b") == ["builds"]
    assert complete("backchannel runs list --profile d") == ["default"]
    assert complete("backchannel profile show ") == ["builds", "default", "research"]
    assert complete("backchannel profile remove r") == ["research"]


def test_peer_commands_complete_peer_names(populated: dict[str, str]) -> None:
    for verb in ("dm", "run", "status", "stop", "remove", "rm"):
        assert complete(f"backchannel peer {verb} ") == ["spark"], verb
    assert complete("backchannel peer dm x") == []


def test_session_arguments_complete_session_ids(populated: dict[str, str]) -> None:
    every = sorted(complete("backchannel sessions show "))  # a profile (its Bot Chat) or a session id
    assert every == sorted(["builds", "default", "research", populated["research"], populated["builds"]])
    assert complete("backchannel sessions show research/") == [f"research/{populated['research']}"]
    prefix = populated["builds"][:-3]  # research's id, made in the same second, may share it (1 in 4,096)
    same = sorted(populated[name] for name in ("research", "builds") if populated[name].startswith(prefix))
    assert sorted(complete(f"backchannel chat --resume {prefix}")) == same


def test_an_address_completes_profiles_then_their_sessions_and_peers(populated: dict[str, str]) -> None:
    assert complete("backchannel send ") == [
        "builds",
        "default",
        "research",
        "builds/",
        "default/",
        "research/",
        "peer:spark",
    ]
    assert complete("backchannel send res") == ["research", "research/"]
    assert complete("backchannel send research/") == [f"research/{populated['research']}"]  # not builds' session
    assert complete("backchannel send default/") == []
    assert complete("backchannel send peer:") == ["peer:spark"]
    assert complete(f"backchannel send {populated['builds'][:-1]}") == [populated["builds"]]  # a bare session id
    assert complete("backchannel ledger research ") == complete("backchannel ledger ")


def test_run_commands_complete_run_ids(populated: dict[str, str]) -> None:
    runs = {populated["research_run"], populated["builds_run"]}
    for verb in ("show", "follow", "stop"):
        assert set(complete(f"backchannel runs {verb} ")) == runs, verb
    assert complete(f"backchannel runs show {populated['builds_run'][:12]}") == [populated["builds_run"]]


def test_completion_reads_the_home_and_writes_nothing(populated: dict[str, str], initialised: Path) -> None:
    for suffix in ("-wal", "-shm"):  # as after the last writer closed: completion must not bring them back
        (initialised / f"state.db{suffix}").unlink(missing_ok=True)
    before = snapshot(initialised)
    lines = ("backchannel send research/", "backchannel runs show ", "backchannel chat -p ", "backchannel peer dm ")
    for line in lines:
        assert complete(line)
    assert snapshot(initialised) == before


def test_a_missing_home_completes_nothing_and_is_not_created(home: Path) -> None:
    assert complete("backchannel send ") == []
    assert complete("backchannel runs show ") == []
    assert not home.exists()


def test_a_broken_home_completes_nothing_without_a_traceback(populated: dict[str, str], initialised: Path) -> None:
    (initialised / "config.yaml").write_text("peers: [unclosed\n", encoding="utf-8")
    (initialised / "state.db").write_bytes(b"not a database at all" * 100)
    for suffix in ("-wal", "-shm"):
        (initialised / f"state.db{suffix}").unlink(missing_ok=True)
    assert complete("backchannel peer dm ") == []
    assert complete("backchannel runs show ") == []
    assert complete("backchannel sessions show ") == []
    assert complete("backchannel chat -p ") == ["builds", "default", "research"]  # what can be read still completes


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "pwsh"])
def test_the_shell_scripts_are_served(shell: str) -> None:
    served = run_cli(env={"_BACKCHANNEL_COMPLETE": f"{shell}_source"})
    assert served.exit_code == 0, served.stderr
    assert "_BACKCHANNEL_COMPLETE" in served.stdout
    assert f"{shell}_complete" in served.stdout


def test_powershell_is_offered_what_bash_is(populated: dict[str, str]) -> None:
    """PowerShell's script asks as bash does, but reads `type,value,help` lines (click-pwsh's protocol)."""
    line = "backchannel send res"
    asked = {"_BACKCHANNEL_COMPLETE": "pwsh_complete", "COMP_WORDS": line, "COMP_CWORD": "2"}
    done = run_cli(env=asked)
    assert done.exit_code == 0 and done.stderr == "", done.stderr
    offered = [row.split(",", 2) for row in done.stdout.splitlines() if row]
    assert [value for kind, value, _help in offered if kind == "plain"] == complete(line) == ["research", "research/"]
    registered = run_cli(env={"_BACKCHANNEL_COMPLETE": "pwsh_source"}).stdout
    assert "Register-ArgumentCompleter -Native -CommandName backchannel" in registered


def test_a_completion_in_a_process_of_its_own(populated: dict[str, str]) -> None:
    """As the shell runs it: `python -m backchannel` with the protocol's variables prints the completions alone."""
    assert complete_in_a_process("backchannel send res") == ["research", "research/"]
