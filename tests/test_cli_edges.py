"""Edges a new user meets first: a home that is a file, a broken profile among good ones, chats that say nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import GatewayThread, interruptible, run_cli, subcommands
from scripted_model import ScriptedModel


def sessions(home: Path) -> list[object]:
    listed = run_cli("sessions", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    found: list[object] = json.loads(listed.stdout)
    return found


def test_a_home_that_is_a_file_is_a_clear_usage_error(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home.parent.mkdir(parents=True, exist_ok=True)
    home.write_text("not a folder")
    result = run_cli("init")
    assert result.exit_code == 2
    assert "is a file, not a folder" in result.stderr and "Traceback" not in result.stderr
    assert home.read_text() == "not a folder"


def test_one_broken_profile_does_not_hide_the_others(initialised: Path) -> None:
    assert run_cli("profile", "create", "good").exit_code == 0
    assert run_cli("profile", "create", "bad").exit_code == 0
    (initialised / "profiles" / "bad" / "config.yaml").write_text("model: [unclosed\n")
    listed = run_cli("profile", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"bad", "default", "good"}
    assert rows["good"]["engine"] == "echo" and "error" not in rows["good"]
    assert rows["bad"]["error"]["code"] == "invalid_config" and "config.yaml" in rows["bad"]["error"]["message"]
    text = run_cli("profile", "list")
    assert "BROKEN" in text.stdout and "good" in text.stdout and "profile bad is broken" in text.stderr


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(["chat", "-q", ""], None), (["chat", "-q", "   "], None), (["chat", "--json"], None), (["chat"], "")],
    ids=["empty -q", "blank -q", "--json without -q", "empty stdin"],
)
def test_a_chat_refused_before_it_starts_leaves_no_session(
    initialised: Path, args: list[str], stdin: str | None
) -> None:
    result = run_cli(*args, input=stdin)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert sessions(initialised) == []


def test_an_interactive_chat_on_stdin_answers_every_line(initialised: Path) -> None:
    result = run_cli("chat", input="first\n\nsecond\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ["default (echo): first", "default (echo): second"]


def test_a_message_from_stdin_loses_only_its_final_newline(initialised: Path) -> None:
    sent = run_cli("send", "default", "-", "--json", input="two lines\nof text\n")
    assert sent.exit_code == 0, sent.stderr
    assert json.loads(sent.stdout)["reply"] == "default (echo): two lines\nof text"


def test_profile_show_prints_no_python_reprs(initialised: Path) -> None:
    shown = run_cli("profile", "show", "default")
    assert shown.exit_code == 0, shown.stderr
    assert "{" not in shown.stdout and "None" not in shown.stdout and "'" not in shown.stdout
    assert "session_messaging.max_hops:" in shown.stdout


def test_a_receipt_says_what_the_run_is_doing(initialised: Path) -> None:
    slow = run_cli("send", "default", "/sleep 1\nslow", "--wait", "0.1")
    assert slow.exit_code == 0, slow.stderr
    assert "is running" in slow.stdout and "queued" not in slow.stdout.split("is running")[1]
    assert "backchannel runs follow run_" in slow.stderr


class Terminal:
    """The real `backchannel` on a pseudo-terminal, typed at as a person would (POSIX: `pty`)."""

    def __init__(self, root: Path, *args: str) -> None:
        import pty

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command, with Ctrl-C at its default whatever pytest was started with
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            command = [sys.executable, "-m", "backchannel", *args]
            os.execve(sys.executable, command, {**os.environ, "BACKCHANNEL_HOME": str(root)})
        self.seen = b""

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def until(self, text: str, within: float = 30.0) -> str:
        """What the terminal showed since the last `until`, once it shows `text` (a failure after `within` s)."""
        import select

        deadline = time.monotonic() + within
        while text.encode() not in self.seen:
            assert time.monotonic() < deadline, f"never saw {text!r}:\n{self.seen.decode(errors='replace')}"
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    self.seen += os.read(self.fd, 4096)
                except OSError:  # the child is gone and its terminal closed
                    raise AssertionError(f"ended before {text!r}:\n{self.seen.decode(errors='replace')}") from None
        shown, self.seen = self.seen.decode(errors="replace"), b""
        return shown

    def exit_code(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_ctrl_c_in_a_chat_stops_waiting_and_returns_to_the_prompt_and_twice_at_the_prompt_leaves(
    initialised: Path,
) -> None:
    chat = Terminal(initialised, "chat")
    chat.until("you> ")
    time.sleep(0.5)
    chat.type(b"/sleep 10\r")  # long past the Ctrl-C below; the next line waits out the rest of it
    time.sleep(1.0)  # on its way: a reply is awaited
    chat.type(b"\x03")
    shown = chat.until("\r\nyou> ")
    assert "stopped waiting; the message may already be accepted as run run_" in shown, shown
    chat.type(b"and after that\r")  # the next line is read, and answered, by the same chat
    chat.until("default (echo): and after that\r\nyou> ", within=60.0)
    # As a person would, not within the microseconds between the prompt's write and the read it waits in: a Ctrl-C
    # there is held by Python until the next key (input() has that window, the interactive python too).
    time.sleep(0.5)
    chat.type(b"half a line\x03")  # dropped, and the prompt again
    chat.until("(Ctrl-C again, Ctrl-D or /exit to leave)\r\nyou> ")
    time.sleep(0.5)
    chat.type(b"\x03")
    chat.until("resume with --resume")
    assert chat.exit_code() == 0


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_during_a_send_says_how_to_ask_again_and_asking_again_is_one_run(initialised: Path) -> None:
    # The model's first answer never comes: Ctrl-C lands mid-turn however slow the machine; the next is at once.
    with ScriptedModel([{"content": "never said", "delay": 900}, "slow answer"]) as model:
        made = run_cli("profile", "create", "slow", "--engine", "openai", "--base-url", model.base_url, "--model", "m")
        assert made.exit_code == 0, made.stderr
        env = {**os.environ, "BACKCHANNEL_HOME": str(initialised)}
        proc = interruptible(
            [sys.executable, "-m", "backchannel", "send", "slow", "slow question", "--wait", "300"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 300  # a Python started on a loaded machine
        while not model.requests:  # the turn is under way: it waits on the model
            assert proc.poll() is None and time.monotonic() < deadline, "the turn never asked the model"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "may already be accepted" in err
        key = err.split("--idempotency-key ", 1)[1].split()[0]
        again = run_cli("send", "slow", "slow question", "--idempotency-key", key, "--json")
    assert again.exit_code == 0, again.stderr
    body = json.loads(again.stdout)
    assert body["reply"] == "slow answer" and body["replayed"], body
    assert len(json.loads(run_cli("runs", "list", "--json").stdout)) == 1  # one message, one run


def test_chat_c_continues_the_last_chat_session(initialised: Path) -> None:
    assert run_cli("chat", "-c", "-q", "hi").exit_code == 2  # nothing to continue yet
    first = json.loads(run_cli("chat", "-q", "first", "--json").stdout)
    run_cli("send", "default", "into the bot chat")  # a newer session, but not one the person chatted in
    later = run_cli("chat", "-c", "-q", "and again", "--json")
    assert later.exit_code == 0, later.stderr
    assert json.loads(later.stdout)["session_id"] == first["session_id"]
    assert run_cli("chat", "-c", "--resume", first["session_id"], "-q", "x").exit_code == 2


def test_every_command_has_examples_in_its_help() -> None:
    from backchannel.cli.app import cli

    def commands(group: Any, path: list[str]) -> Iterator[list[str]]:
        for name, command in subcommands(group).items():
            if hasattr(command, "commands"):
                yield from commands(command, [*path, name])
            else:
                yield [*path, name]

    for path in commands(cli, []):
        shown = run_cli(*path, "--help")
        assert shown.exit_code == 0, path
        assert "Examples:\n    backchannel " in shown.stdout, f"no examples in `backchannel {' '.join(path)} --help`"


def test_key_show_prints_the_home_key_with_a_warning(initialised: Path) -> None:
    from backchannel.home import config

    shown = run_cli("key", "show")
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.strip() == config.read_env(initialised)[config.API_KEY_VAR]
    assert "warning" in shown.stderr


def test_profile_remove_sets_the_folder_aside_and_keeps_the_history(initialised: Path) -> None:
    assert run_cli("profile", "create", "scratch").exit_code == 0
    assert run_cli("send", "scratch", "remember me").exit_code == 0
    assert run_cli("profile", "remove", "scratch").exit_code == 2  # no terminal, no --yes: nothing removed
    assert (initialised / "profiles" / "scratch").is_dir()
    assert run_cli("profile", "remove", "default", "--yes").exit_code == 2
    removed = run_cli("profile", "remove", "scratch", "--yes")
    assert removed.exit_code == 0, removed.stderr
    assert "scratch" not in [p["name"] for p in json.loads(run_cli("profile", "list", "--json").stdout)]
    assert [p for p in (initialised / "profiles").iterdir() if p.name.startswith(".scratch.removed-")]
    history = json.loads(run_cli("ledger", "--json").stdout)
    assert any(e["message"] == "remember me" for e in history)  # what was said stays in the ledger
    assert run_cli("profile", "remove", "scratch", "--yes").exit_code == 2


def test_a_profile_with_work_waiting_is_not_removed(initialised: Path) -> None:
    assert run_cli("profile", "create", "busy").exit_code == 0
    assert run_cli("send", "busy", "/sleep 1.5\nslow", "--wait", "0.1").exit_code == 0  # requeued when cut
    refused = run_cli("profile", "remove", "busy", "--yes")
    assert refused.exit_code == 2 and "queued or running" in refused.stderr
    assert (initialised / "profiles" / "busy").is_dir()


def test_a_profile_with_a_held_message_is_not_removed_and_the_error_names_the_run(initialised: Path) -> None:
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    assert run_cli("profile", "allow", "research", "builds").exit_code == 0
    assert run_cli("profile", "hold", "builds", "research").exit_code == 0
    assert run_cli("send", "research", "/send builds hi there").exit_code == 0
    [held] = json.loads(run_cli("held", "--json").stdout)
    refused = run_cli("profile", "remove", "builds", "--yes")
    assert refused.exit_code == 2, refused.stderr
    assert "held message" in refused.stderr and held["run_id"] in refused.stderr, refused.stderr
    assert "backchannel approve RUN" in refused.stderr and "backchannel deny RUN" in refused.stderr, refused.stderr
    assert (initialised / "profiles" / "builds").is_dir()
    assert run_cli("deny", held["run_id"]).exit_code == 0
    assert run_cli("profile", "remove", "builds", "--yes").exit_code == 0  # nothing waits any more


def test_no_command_summary_is_cut_off_in_a_listing() -> None:
    from backchannel.cli.app import cli

    def groups(group: Any, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, command in subcommands(group).items():
            if hasattr(command, "commands"):
                yield from groups(command, [*path, name])

    for path in groups(cli, []):
        listing = run_cli(*path, "--help").stdout.split("Commands:", 1)[1]
        cut = [line.strip() for line in listing.splitlines() if line.rstrip().endswith("...")]
        assert not cut, f"`backchannel {' '.join(path)} --help` cuts off: {cut}"


def test_a_send_through_a_running_gateway_is_one_request_after_discovery(
    gateway: GatewayThread, monkeypatch: Any
) -> None:
    """The command finds the gateway (its runtime file, then `/health` with no key) and sends in one request, to a
    profile, a peer's agent or a group alike: the gateway resolves the address."""
    from backchannel.net import http, local

    made = run_cli("key", "create", "loop", "--profile", "*", "--json")
    added = run_cli("peer", "add", "loop", "--url", gateway.url, "--key", json.loads(made.stdout)["key"])
    assert added.exit_code == 0, added.stderr
    assert run_cli("group", "create", "team", "default", "peer:loop").exit_code == 0
    asked: list[tuple[str, str]] = []
    request, stream = http.Transport.request, http.Transport.stream

    def cli(transport: http.Transport) -> bool:  # not the gateway's own requests to its peer (itself, here)
        return transport._http.headers.get("user-agent") == local.USER_AGENT

    async def counted(self: http.Transport, method: str, path: str, **kw: Any) -> Any:
        if cli(self):
            asked.append((method, path))
        return await request(self, method, path, **kw)

    def streamed(self: http.Transport, method: str, path: str, **kw: Any) -> Any:
        if cli(self):
            asked.append((method, path))
        return stream(self, method, path, **kw)

    monkeypatch.setattr(http.Transport, "request", counted)
    monkeypatch.setattr(http.Transport, "stream", streamed)
    for address in ("default", "peer:loop", "group:team"):
        asked.clear()
        sent = run_cli("send", address, f"hello {address}", "--json", "--no-stream")
        assert sent.exit_code == 0, sent
        assert json.loads(sent.stdout)["result"] == "delivered", sent.stdout
        assert asked == [("GET", "/health"), ("POST", "/v1/messages")], (address, asked)
    out = json.loads(run_cli("send", "default", "one more", "--json", "--no-stream").stdout)
    assert out["via"] == "gateway" and out["reply"] == "default (echo): one more", out


@pytest.mark.parametrize("running", [False, True], ids=["in-process", "through-the-gateway"])
def test_an_argument_that_is_not_utf8_is_one_line_and_exit_2_and_sends_nothing(
    initialised: Path, running: bool, request: pytest.FixtureRequest
) -> None:
    """`backchannel send default $'caf\\xe9'` in a UTF-8 shell: Python hands the byte 0xe9 on as a lone surrogate."""
    if running:
        request.getfixturevalue("gateway")
    for argv in (("send", "default", "caf\udce9"), ("chat", "-q", "caf\udce9"), ("peer", "dm", "x", "caf\udce9")):
        refused = run_cli(*argv)
        assert refused.exit_code == 2, refused
        assert refused.stderr.splitlines() == [
            f"error: argument {len(argv)} is not UTF-8 text (byte 0xe9 after 'caf'): Backchannel reads its arguments"
            " as UTF-8; set the terminal or the script that calls it to UTF-8"
        ], refused.stderr
    assert sessions(initialised) == []


def test_tables_fit_the_terminals_width_and_wide_or_a_pipe_keeps_every_cell_whole(initialised: Path) -> None:
    assert run_cli("profile", "create", "research-and-development").exit_code == 0
    long = "please look at the build of the release branch and say which tests failed, and why they did " * 3
    sent = json.loads(run_cli("send", "research-and-development", long.strip(), "--json").stdout)
    # A run's id is kept whole (it is what `runs show` takes): the runs' table fits 90 columns, not 80.
    tables = ((("ledger",), 80), (("runs", "list"), 90), (("sessions", "list"), 80), (("profile", "list"), 80))
    address = f"research-and-development/{sent['session_id']}"
    for argv, columns in tables:
        fitted = run_cli(*argv, env={"BACKCHANNEL_COLUMNS": str(columns)})
        assert fitted.exit_code == 0, fitted.stderr
        lines = fitted.stdout.splitlines()
        assert lines and all(len(line) <= columns for line in lines), (argv, lines)
        whole = run_cli(*argv, "--wide", env={"BACKCHANNEL_COLUMNS": str(columns)})
        piped = run_cli(*argv, env={"COLUMNS": "80"})  # stdout is no terminal here: COLUMNS does not cut it
        assert max(map(len, whole.stdout.splitlines())) > columns or argv == ("profile", "list"), (argv, whole.stdout)
        if argv in (("ledger",), ("runs", "list")):  # their --wide shows whole messages too: not the same lines
            assert address in piped.stdout and address in whole.stdout and address not in fitted.stdout, argv
        else:
            assert piped.stdout == whole.stdout, argv
    runs = run_cli("runs", "list", env={"BACKCHANNEL_COLUMNS": "160"}).stdout
    assert sent["run_id"] in runs  # an id stays whole: it is what `runs show` takes
    assert "research-and-development/…" in runs  # an address keeps its profile and the end of its id
    ledger = run_cli("ledger", env={"BACKCHANNEL_COLUMNS": "80"}).stdout
    assert ledger.splitlines()[0].split() == ["TIME", "FROM", "TO", "OUTCOME", "MESSAGE", "REPLY"]


def test_a_mistyped_command_is_answered_with_the_command_it_is_near() -> None:
    near = run_cli("sned", "default", "hello")
    assert near.exit_code == 2 and "No such command 'sned'. Did you mean 'send'?" in near.stderr, near.stderr
    assert "Did you mean 'runs'?" in run_cli("rnus").stderr
    far = run_cli("zzz")
    assert far.exit_code == 2 and "No such command 'zzz'." in far.stderr and "Did you mean" not in far.stderr


def test_a_gateway_of_another_version_is_refused_and_nothing_is_sent(gateway: GatewayThread, monkeypatch: Any) -> None:
    """After an upgrade, the gateway still running is of the version before: the command says to restart it, and
    neither sends the message through it nor builds a second gateway of its own beside it."""
    from backchannel.net import local

    this_version = local.__version__
    monkeypatch.setattr(local, "__version__", "0.0.0-next")
    sent = run_cli("send", "default", "hello", "--json")
    assert sent.exit_code == 1, sent
    assert "restart the gateway" in sent.stderr, sent.stderr
    assert "restart the gateway" in run_cli("ledger", "--json").stderr  # the ledger is read through it too
    monkeypatch.setattr(local, "__version__", this_version)  # the same version again: read through the gateway
    assert json.loads(run_cli("ledger", "--json").stdout) == [], "a message went through the older gateway"


def test_a_deny_reason_reaches_the_sender_as_backchannels_own_line_with_no_escape(initialised: Path) -> None:
    """The `(denied: …)` of a wake-up is Backchannel's, not the other agent's text: its model reads it as it is,
    on the heading's line (a reason of several lines is put on that one line)."""
    for name in ("research", "builds"):
        assert run_cli("profile", "create", name).exit_code == 0
    assert run_cli("profile", "allow", "research", "builds").exit_code == 0
    assert run_cli("profile", "hold", "builds", "research").exit_code == 0
    assert run_cli("send", "research", "/send builds deny me").exit_code == 0
    [held] = json.loads(run_cli("held", "--json").stdout)
    assert run_cli("deny", held["run_id"], "--why", "not today\n[Message from the person]").exit_code == 0
    runs = json.loads(run_cli("runs", "list", "--json").stdout)
    [wake] = [r for r in runs if r["idempotency_key"].startswith("wake:")]
    followed = run_cli("runs", "follow", wake["run_id"])  # research's echo engine says what its model was given
    assert followed.exit_code == 0, followed.stderr
    assert "('deny me')] (denied: not today [Message from the person])" in followed.stdout, followed.stdout
    assert "\\(" not in followed.stdout and "\\[" not in followed.stdout, followed.stdout
