"""What Windows does differently, reproduced where it can be: click's argument expansion forced on, a cp1252
code page on the CLI's streams, device names, the quoting of printed commands, a file held open by another
process, and the gateway's socket. Tests that need Windows itself are marked `windows` and skip elsewhere
(`backchannel gateway stop` and Ctrl-Break: tests/test_gateway_stop.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import click.core
import pytest

from conftest import run_cli


@pytest.fixture
def click_expands_like_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """click's own test for Windows (`os.name == "nt"` in click.core) made true, so it would expand `~`, `$VAR`
    and globs in every argument as it does there, unless told not to."""
    monkeypatch.setattr(click.core, "os", types.SimpleNamespace(name="nt", environ=os.environ))


@pytest.fixture
def files_to_glob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    for name in ("README.md", "NOTES.md", "Makefile"):
        (folder / name).write_text("x\n", encoding="utf-8")
    monkeypatch.chdir(folder)
    return folder


def _reply(*args: str) -> str:
    result = run_cli("send", "default", *args, "--json")
    assert result.exit_code == 0, result.stderr
    reply: str = json.loads(result.stdout)["reply"]
    return reply


@pytest.mark.usefixtures("click_expands_like_windows", "files_to_glob")
def test_a_glob_in_a_message_is_sent_as_typed(initialised: Path) -> None:
    assert _reply("*.md") == "default (echo): *.md"


@pytest.mark.usefixtures("click_expands_like_windows", "files_to_glob")
def test_a_variable_in_a_message_is_sent_as_typed(initialised: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRICE_LIST", "expanded")
    assert _reply("price $PRICE_LIST and %PATH% in ~/x") == "default (echo): price $PRICE_LIST and %PATH% in ~/x"


@pytest.mark.usefixtures("click_expands_like_windows", "files_to_glob")
def test_a_star_profile_pattern_for_a_key_is_taken_as_typed(initialised: Path) -> None:
    made = run_cli("key", "create", "spark", "--profile", "*", "--json")
    assert made.exit_code == 0, made.stderr
    listed = run_cli("key", "list", "--json")
    assert [k["profiles"] for k in json.loads(listed.stdout) if k["name"] == "spark"] == [["*"]]


def _cp1252(home: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """The real CLI in a subprocess whose streams Python opens as cp1252, as it does on a Windows pipe."""
    env = {**os.environ, "BACKCHANNEL_HOME": str(home), "PYTHONIOENCODING": "cp1252", "PYTHONUTF8": "0"}
    return subprocess.run(
        [sys.executable, "-m", "backchannel", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=env,
        timeout=120,
    )


TEXT = "arrow → emoji 🎉 kanji 漢字"


def test_a_reply_that_the_code_page_cannot_encode_is_printed_as_utf8(initialised: Path) -> None:
    done = _cp1252(initialised, "send", "default", TEXT)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert done.stdout.decode("utf-8").splitlines() == [f"default (echo): {TEXT}"]
    assert b"Traceback" not in done.stderr


def test_a_json_reply_that_the_code_page_cannot_encode_is_printed_as_utf8(initialised: Path) -> None:
    done = _cp1252(initialised, "send", "default", TEXT, "--json")
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert json.loads(done.stdout.decode("utf-8"))["reply"] == f"default (echo): {TEXT}"


def test_an_error_that_the_code_page_cannot_encode_is_printed_as_utf8(initialised: Path) -> None:
    done = _cp1252(initialised, "send", "nobody→here", "hi")
    assert done.returncode == 2
    assert "nobody→here" in done.stderr.decode("utf-8") and b"Traceback" not in done.stderr


def _stored_messages() -> list[str]:
    listed = run_cli("runs", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    return [r["message"] for r in json.loads(listed.stdout)]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["utf8", "utf8-with-bom"])
def test_a_message_on_stdin_is_read_as_utf8(initialised: Path, bom: bytes) -> None:
    text = "héllo café ✓"
    done = _cp1252(initialised, "send", "default", "-", "--json", stdin=bom + text.encode("utf-8") + b"\r\n")
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    sent = json.loads(done.stdout.decode("utf-8"))
    assert sent["reply"] == f"default (echo): {text}"
    assert _stored_messages() == [text]


def test_a_message_on_stdin_that_is_not_utf8_is_refused_and_nothing_is_sent(initialised: Path) -> None:
    done = _cp1252(initialised, "send", "default", "-", stdin="café".encode("cp1252"))
    assert done.returncode == 2
    assert "not UTF-8" in done.stderr.decode("utf-8") and b"Traceback" not in done.stderr
    assert _stored_messages() == []


DEVICES = ["con", "nul", "aux", "prn", "com0", "com1", "com9", "lpt1", "lpt9"]


def _leftovers(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "profiles").iterdir())


@pytest.mark.parametrize("name", [*DEVICES, "CON", "Nul", "con.txt", "aux.", "prn "])
def test_profile_create_refuses_a_device_name_and_leaves_nothing_behind(initialised: Path, name: str) -> None:
    before = _leftovers(initialised)
    result = run_cli("profile", "create", name, "--json")
    assert result.exit_code == 2, result.stdout
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "invalid_request" and repr(name) in error["message"]
    if name.lower().split(".")[0] in DEVICES:
        assert "name devices on Windows" in error["message"]
    assert "Traceback" not in result.stderr
    assert _leftovers(initialised) == before  # no `con`, no `.con.creating`


@pytest.mark.parametrize("name", ["con", "nul", "com3", "lpt0"])
def test_peer_add_refuses_a_device_name(initialised: Path, name: str) -> None:
    before = (initialised / "config.yaml").read_text(), (initialised / ".env").read_text()
    result = run_cli("peer", "add", name, "--url", "http://127.0.0.1:9", "--key", "k" * 20)
    assert result.exit_code == 2
    assert f"invalid peer name {name!r}" in result.stderr and "name devices on Windows" in result.stderr
    assert ((initialised / "config.yaml").read_text(), (initialised / ".env").read_text()) == before


@pytest.mark.parametrize("name", ["con", "aux", "com1"])
def test_key_create_refuses_a_device_name(initialised: Path, name: str) -> None:
    result = run_cli("key", "create", name)
    assert result.exit_code == 2
    assert f"invalid key name {name!r}" in result.stderr and "name devices on Windows" in result.stderr
    assert json.loads(run_cli("key", "list", "--json").stdout) == []


def test_names_that_only_start_like_a_device_are_names(initialised: Path) -> None:
    for name in ("console", "com10", "nul-1", "auxiliary", "lpt"):
        assert run_cli("profile", "create", name).exit_code == 0, name


def test_an_address_naming_a_device_says_why_it_is_no_name(initialised: Path) -> None:
    for args in (
        ["send", "peer:nul", "hi"],
        ["send", "con/20261130_015530_55cf9b", "hi"],
        ["peer", "dm", "com1", "hi"],
    ):
        result = run_cli(*args)
        assert result.exit_code == 2, args
        assert "name devices on Windows" in result.stderr, args


def test_a_port_another_gateway_listens_on_is_refused_as_in_use() -> None:
    """Real sockets: the second bind fails on every platform (on Windows only with SO_EXCLUSIVEADDRUSE)."""
    from backchannel.api.server import bind
    from backchannel.errors import UsageError

    first = bind("127.0.0.1", 0)
    port = first.getsockname()[1]
    try:
        with pytest.raises(UsageError, match=rf"127\.0\.0\.1:{port} is already in use \(another gateway\?\)"):
            bind("127.0.0.1", port)
    finally:
        first.close()


@pytest.mark.parametrize("code", [10013, 10048], ids=["WSAEACCES", "WSAEADDRINUSE"])
def test_the_windows_errors_for_a_taken_port_say_it_is_in_use(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """Windows answers a bind on a port held exclusively with WSAEACCES (10013): the same error as EADDRINUSE."""
    import socket

    from backchannel.api.server import bind
    from backchannel.errors import UsageError

    def refused(self: socket.socket, address: object) -> None:
        raise OSError(code, "An attempt was made to access a socket in a way forbidden by its access permissions")

    monkeypatch.setattr(socket.socket, "bind", refused)
    with pytest.raises(UsageError, match=r"127\.0\.0\.1:8377 is already in use \(another gateway\?\)"):
        bind("127.0.0.1", 8377)


@pytest.mark.windows("SO_EXCLUSIVEADDRUSE is a Windows socket option")
def test_the_gateway_socket_holds_its_port_exclusively_on_windows() -> None:
    import socket

    from backchannel.api.server import bind

    sock = bind("127.0.0.1", 0)
    try:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE) == 1  # type: ignore[attr-defined]
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) == 0
    finally:
        sock.close()


def test_init_prints_its_first_command_in_the_quoting_of_the_shell_at_hand(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backchannel import shell

    monkeypatch.setattr(shell, "windows_shell", lambda: False)  # bash, zsh, Git Bash
    posix = run_cli("init")
    assert "next: backchannel chat -q 'hello there'  ·" in posix.stdout
    monkeypatch.setattr(shell, "windows_shell", lambda: True)  # cmd or PowerShell
    again = run_cli("init")
    assert 'next: backchannel chat -q "hello there"  ·' in again.stdout


@pytest.mark.parametrize(
    "words",
    [
        ["backchannel", "send", "default", "<the same message>", "--idempotency-key", "cli-1f2e"],
        ["backchannel", "peer", "add", "home", "--url", "http://h.lan:8377/x?a=1&b=2", "--key", "bc_a-b_C"],
        ["say", 'it\'s "quoted"', "C:\\My Files\\", "", "$PATH", "*.md"],
    ],
)
def test_a_printed_command_reads_back_as_its_words_in_a_posix_shell(words: list[str]) -> None:
    import shlex

    from backchannel.shell import command

    assert shlex.split(command(*words, windows=False)) == words


def test_a_printed_command_is_double_quoted_as_windows_programs_read_their_arguments() -> None:
    from backchannel.shell import command, quote

    assert command(
        "backchannel", "send", "default", "<the same message>", "--idempotency-key", "cli-1", windows=True
    ) == ('backchannel send default "<the same message>" --idempotency-key cli-1')
    assert quote("http://h.lan:8377/x?a=1&b=2", windows=True) == '"http://h.lan:8377/x?a=1&b=2"'
    assert quote('say "hi"', windows=True) == '"say \\"hi\\""'
    assert quote("C:\\My Files\\", windows=True) == '"C:\\My Files\\\\"'  # a backslash before the closing quote
    assert quote('a\\"b', windows=True) == '"a\\\\\\"b"'
    assert quote("", windows=True) == '""'
    assert quote("C:\\plain\\path.md", windows=True) == "C:\\plain\\path.md"


def test_a_config_file_held_open_for_a_moment_is_replaced_once_it_is_free(
    initialised: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows refuses to replace a file another process has open (WinError 5): the write waits it out."""
    from backchannel.home import config

    real_replace = os.replace
    refusals = []

    def held_open(src: str, dst: str) -> None:
        if Path(dst).name == "config.yaml" and len(refusals) < 3:
            refusals.append(dst)
            raise PermissionError(13, "Access is denied")
        real_replace(src, dst)

    monkeypatch.setattr(config, "REPLACE_RETRY_SECONDS", 5.0)  # what it is on Windows
    monkeypatch.setattr(os, "replace", held_open)
    added = run_cli("peer", "add", "spark", "--url", "http://127.0.0.1:9", "--key", "k" * 20)
    assert added.exit_code == 0, added.stderr
    assert len(refusals) == 3
    assert "spark" in config.load_gateway_config(initialised).peers
    assert [p.name for p in initialised.iterdir() if p.name.startswith(".config.yaml.")] == []  # no temporary left


def test_a_config_file_that_stays_refused_is_an_error_and_unchanged(
    initialised: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backchannel.home import config

    before = config.config_path(initialised).read_text(encoding="utf-8")

    def refused(src: str, dst: str) -> None:
        raise PermissionError(13, "Access is denied")

    monkeypatch.setattr(config, "REPLACE_RETRY_SECONDS", 0.2)
    monkeypatch.setattr(os, "replace", refused)
    added = run_cli("peer", "add", "spark", "--url", "http://127.0.0.1:9", "--key", "k" * 20)
    assert added.exit_code == 2
    assert "cannot write" in added.stderr and "Access is denied" in added.stderr and "Traceback" not in added.stderr
    assert config.config_path(initialised).read_text(encoding="utf-8") == before
    assert [p.name for p in initialised.iterdir() if p.name.startswith(".config.yaml.")] == []


@pytest.mark.windows("only Windows refuses to replace a file another process holds open")
def test_a_file_open_in_another_process_is_replaced_when_it_closes(initialised: Path) -> None:
    from backchannel.home import config

    path = config.config_path(initialised)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; f = open(sys.argv[1]); print('open', flush=True); time.sleep(0.5)",
            str(path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"open"
        config.write_yaml(path, {**config.load_yaml(path), "peers": {}})
    finally:
        holder.wait(10)
    assert config.load_yaml(path)["peers"] == {}
