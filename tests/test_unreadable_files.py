"""Text files that cannot be read — not UTF-8, a folder where a file should be — through the real CLI.

Contract: DESIGN.md section 5 "Bad input" (every malformed argument or file gets a clear error, CLI
exit 2, and changes nothing) and STYLE.md "Boundaries" (a non-UTF-8 SOUL.md is a usage error that names
the file; no UnicodeDecodeError or OSError reaches the person). A file given on the command line
(`profile create --soul FILE`) is refused before anything is created; a profile's own MEMORY.md or USER.md
that cannot be read fails the turn that calls the memory tool with an error naming the file, leaves the
file as it was, and the agent's session goes on once the file is mended.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import CliResult, run_cli

NOT_UTF8 = b"caf\xe9 au lait\n"


def memory_file(root: Path, name: str) -> Path:
    return root / "profiles" / "default" / "memories" / name


def assert_one_clear_error(result: CliResult, exit_code: int, path: Path) -> None:
    assert result.exit_code == exit_code, (result.exit_code, result.stdout, result.stderr)
    for stream in (result.stdout, result.stderr):
        assert "Traceback" not in stream, stream
        assert "UnicodeDecodeError" not in stream and "OSError" not in stream, stream
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    # A failed run's error names a file of the home under $BACKCHANNEL_HOME (its sender may be a peer), and the
    # CLI says which home that is; the CLI's own errors name the file in full.
    home = os.environ["BACKCHANNEL_HOME"]
    if repr(str(path)) not in errors[0]:
        assert path.is_relative_to(home), errors[0]
        assert repr("$BACKCHANNEL_HOME/" + path.relative_to(home).as_posix()) in errors[0], errors[0]
        assert f"note: $BACKCHANNEL_HOME is this home, {home!r}" in result.stderr, result.stderr


# --- profile create --soul FILE -------------------------------------------------------------------


def test_a_soul_file_that_is_not_utf8_is_refused_and_creates_nothing(initialised: Path, tmp_path: Path) -> None:
    soul = tmp_path / "soul.md"
    soul.write_bytes(NOT_UTF8)
    result = run_cli("profile", "create", "research", "--soul", str(soul))
    assert_one_clear_error(result, 2, soul)
    assert "UTF-8" in result.stderr
    assert not (initialised / "profiles" / "research").exists()
    listed = run_cli("profile", "list", "--json")
    assert [p["name"] for p in json.loads(listed.stdout)] == ["default"]
    # the same name works once the file is mended
    soul.write_text("# Research\n", encoding="utf-8")
    assert run_cli("profile", "create", "research", "--soul", str(soul)).exit_code == 0


def test_a_utf8_soul_file_with_non_ascii_text_is_kept_as_it_is(initialised: Path, tmp_path: Path) -> None:
    soul = tmp_path / "soul.md"
    soul.write_text("# Recherche\nTu es curieuse — et précise.\n", encoding="utf-8")
    assert run_cli("profile", "create", "research", "--soul", str(soul)).exit_code == 0
    assert (initialised / "profiles/research/SOUL.md").read_text(encoding="utf-8") == soul.read_text(encoding="utf-8")


# --- the memory tool's files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("send", "default", "/remember likes tea"),
        ("send", "default", "/remember likes tea", "--json"),
        ("chat", "-q", "/remember likes tea"),
    ],
    ids=["send", "send --json", "chat -q"],
)
def test_a_memory_file_that_is_not_utf8_fails_the_turn_naming_the_file(
    initialised: Path, args: tuple[str, ...]
) -> None:
    path = memory_file(initialised, "MEMORY.md")
    path.write_bytes(NOT_UTF8)
    result = run_cli(*args)
    assert_one_clear_error(result, 1, path)  # the run failed (exit 1); its error is the file's
    assert "UTF-8" in result.stderr
    assert path.read_bytes() == NOT_UTF8  # never rewritten with what could be read of it


def test_a_user_file_that_is_not_utf8_fails_the_turn_naming_the_file(initialised: Path) -> None:
    path = memory_file(initialised, "USER.md")
    path.write_bytes(NOT_UTF8)
    call = json.dumps({"action": "add", "target": "user", "content": "likes tea"})
    result = run_cli("send", "default", f"/tool memory {call}")
    assert_one_clear_error(result, 1, path)
    assert path.read_bytes() == NOT_UTF8


def test_a_memory_file_that_is_a_folder_fails_the_turn_naming_it(initialised: Path) -> None:
    path = memory_file(initialised, "MEMORY.md")
    path.unlink(missing_ok=True)
    path.mkdir()
    result = run_cli("send", "default", "/remember likes tea")
    assert_one_clear_error(result, 1, path)
    assert "folder" in result.stderr


def test_the_session_goes_on_once_the_memory_file_is_mended(initialised: Path) -> None:
    path = memory_file(initialised, "MEMORY.md")
    path.write_bytes(NOT_UTF8)
    assert run_cli("send", "default", "/remember likes tea").exit_code == 1
    path.write_text("already known\n", encoding="utf-8")
    result = run_cli("send", "default", "/remember likes tea", "--json")
    assert result.exit_code == 0, result.stderr
    assert path.read_text(encoding="utf-8") == "already known\nlikes tea\n"


def test_profile_show_names_a_memory_file_that_is_not_utf8(initialised: Path) -> None:
    path = memory_file(initialised, "USER.md")
    path.write_bytes(NOT_UTF8)
    assert_one_clear_error(run_cli("profile", "show", "default"), 2, path)
