"""Broken inputs in the home's files, through the real CLI: a clear error, exit 2, nothing changed.

Contract: DESIGN.md section 5 ("Bad input": every malformed file gets a clear error, CLI exit 2, and
changes nothing; "Secrets": keys never in logs or output) and section 9 (the files of a home).
Covers an unreadable config.yaml, an .env with a bad line, a state.db from a newer schema, locked or
not a database at all, a profile config.yaml with a wrong type, and that no command prints a key.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backchannel.home import config
from conftest import CliResult, api_key, free_port, is_private, run_cli

GATEWAY_EXIT_WITHIN = 20.0  # seconds; a gateway that refuses its home must exit at once, not serve


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file of the home (bytes and mode) except the store, whose schema-only creation is no change."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("state.db"):
            continue
        if path.is_dir():
            out[rel + "/"] = f"dir {path.stat().st_mode:o}"
        else:
            out[rel] = path.read_bytes() + f"\0mode {path.stat().st_mode:o}".encode()
    return out


def stored_rows(root: Path) -> dict[str, int]:
    """How many sessions, messages and runs state.db holds (an absent store holds none)."""
    path = config.db_path(root)
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("sessions", "messages", "runs")}
    finally:
        db.close()


def assert_refused(result: CliResult, *fragments: str) -> None:
    """Exit 2, one clear `error:` line naming what is wrong, and no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert "Traceback" not in result.stdout, result.stdout
    assert "error:" in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


def run_gateway(root: Path) -> tuple[int, str, float]:
    """`backchannel gateway` as a real process: (exit code, output, seconds); killed if it starts serving."""
    env = {**os.environ, "BACKCHANNEL_HOME": str(root)}
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "backchannel", "gateway", "--port", str(free_port())],
            env=env,
            capture_output=True,
            timeout=GATEWAY_EXIT_WITHIN,
        )
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode() + (exc.stderr or b"").decode()
        raise AssertionError(f"the gateway started serving a broken home instead of exiting 2:\n{output}") from None
    output = proc.stdout.decode() + proc.stderr.decode()
    return proc.returncode, output, time.monotonic() - started


def assert_gateway_refuses(root: Path, *fragments: str) -> None:
    code, output, _took = run_gateway(root)
    assert code == 2, (code, output)
    assert "Traceback" not in output, output
    for fragment in fragments:
        assert fragment in output, (fragment, output)


def make_store(root: Path) -> Path:
    """Create state.db the ordinary way (a read-only command opens and migrates it), then return its path."""
    result = run_cli("sessions", "list")
    assert result.exit_code == 0, result.stderr
    path = config.db_path(root)
    assert path.is_file()
    return path


def checkpoint(path: Path) -> None:
    """Fold the WAL into the main file, so the file's bytes are the whole database."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


# --- (a) an unreadable config.yaml --------------------------------------------------------------

CONFIG_COMMANDS = [
    ("init",),
    ("chat", "-q", "hi"),
    ("sessions", "list"),
    ("peer", "list"),
]  # (`profile list` reads only the profiles' files: it may work without the home's config.yaml)


def _break_config_bytes(path: Path) -> None:
    path.write_bytes(b"gateway:\n  host: \xff\xfe\x80 not utf-8\n")


def _break_config_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _break_config_yaml(path: Path) -> None:
    path.write_text("gateway:\n  host: [127.0.0.1\n  port: 8377\n", encoding="utf-8")


@pytest.mark.parametrize(
    "breaker", [_break_config_bytes, _break_config_dir, _break_config_yaml], ids=["bytes", "directory", "yaml"]
)
@pytest.mark.parametrize("args", CONFIG_COMMANDS, ids=lambda a: " ".join(a))
def test_unreadable_config_yaml_is_refused_naming_the_file(
    initialised: Path, breaker: object, args: tuple[str, ...]
) -> None:
    cfg = config.config_path(initialised)
    breaker(cfg)  # type: ignore[operator]
    before = snapshot(initialised)
    result = run_cli(*args)
    assert_refused(result, "config.yaml")
    if breaker is _break_config_yaml:  # a file that is no longer YAML: the way back
        assert "run `backchannel init --repair` to rewrite it" in result.stderr, result.stderr
    assert snapshot(initialised) == before
    assert stored_rows(initialised) in ({}, {"sessions": 0, "messages": 0, "runs": 0})


def test_gateway_refuses_an_unreadable_config_yaml(initialised: Path) -> None:
    _break_config_bytes(config.config_path(initialised))
    before = snapshot(initialised)
    assert_gateway_refuses(initialised, "config.yaml")
    assert snapshot(initialised) == before


def test_wrong_type_in_home_config_is_refused_naming_the_key(initialised: Path) -> None:
    cfg = config.config_path(initialised)
    data = config.load_yaml(cfg)
    data["gateway"]["port"] = "eighty"
    config.write_yaml(cfg, data)
    before = snapshot(initialised)
    for args in (("sessions", "list"), ("chat", "-q", "hi")):
        result = run_cli(*args)
        assert_refused(result, "config.yaml", "gateway.port")
    assert snapshot(initialised) == before
    assert stored_rows(initialised) in ({}, {"sessions": 0, "messages": 0, "runs": 0})


# --- (b) an .env with a bad line ----------------------------------------------------------------


@pytest.fixture
def bad_env(initialised: Path) -> Path:
    env = config.env_path(initialised)
    env.write_text(env.read_text(encoding="utf-8") + "this line is not an assignment\n", encoding="utf-8")
    return initialised


@pytest.mark.sqlite  # the .env line numbers and state.db of the home as init makes them
@pytest.mark.parametrize("args", [("init",), ("chat", "-q", "hi"), ("send", "default", "hi")], ids=" ".join)
def test_env_with_a_bad_line_is_refused_and_nothing_changes(bad_env: Path, args: tuple[str, ...]) -> None:
    before = snapshot(bad_env)
    result = run_cli(*args)
    assert_refused(result, ".env", "line 2")
    assert snapshot(bad_env) == before
    # Refused means refused before anything was stored: no session, no run, no message.
    assert stored_rows(bad_env) in ({}, {"sessions": 0, "messages": 0, "runs": 0}), stored_rows(bad_env)


@pytest.mark.sqlite  # the .env line numbers and state.db of the home as init makes them
def test_gateway_refuses_an_env_with_a_bad_line_at_once(bad_env: Path) -> None:
    before = snapshot(bad_env)
    code, output, _took = run_gateway(bad_env)
    assert code == 2, (code, output)  # refused, before it served anything
    assert "Traceback" not in output, output
    assert ".env" in output and "line 2" in output, output
    assert snapshot(bad_env) == before


# --- (c) a state.db from a newer schema ---------------------------------------------------------


@pytest.fixture
def future_store(initialised: Path) -> Path:
    path = make_store(initialised)
    db = sqlite3.connect(path)
    try:
        db.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_future', 0)")
        db.commit()
    finally:
        db.close()
    checkpoint(path)
    return path


@pytest.mark.sqlite  # the .env line numbers and state.db of the home as init makes them
@pytest.mark.parametrize(
    "args", [("chat", "-q", "hi"), ("sessions", "list"), ("sessions", "show", "nope"), ("ledger",)], ids=" ".join
)
def test_state_db_from_a_newer_schema_is_refused_and_left_alone(
    initialised: Path, future_store: Path, args: tuple[str, ...]
) -> None:
    before = future_store.read_bytes()
    files = snapshot(initialised)
    result = run_cli(*args)
    assert_refused(result, "newer", "state.db")
    assert future_store.read_bytes() == before
    assert snapshot(initialised) == files


@pytest.mark.sqlite  # the .env line numbers and state.db of the home as init makes them
def test_gateway_refuses_a_state_db_from_a_newer_schema(initialised: Path, future_store: Path) -> None:
    before = future_store.read_bytes()
    assert_gateway_refuses(initialised, "newer")
    assert future_store.read_bytes() == before


# --- (d) a locked state.db ----------------------------------------------------------------------


@pytest.mark.sqlite  # the .env line numbers and state.db of the home as init makes them
@pytest.mark.faults  # waits out the store's busy timeout (5 s)
def test_locked_state_db_is_refused_after_the_busy_timeout(initialised: Path) -> None:
    path = make_store(initialised)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        result = run_cli("sessions", "list")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert_refused(result, "locked", "state.db")  # given up on, not waited on until the lock went
    # Once the lock is gone the same command works: nothing was damaged.
    assert run_cli("sessions", "list").exit_code == 0


# --- (e) a state.db that is not a database ------------------------------------------------------


@pytest.mark.sqlite  # the .env line numbers and state.db of the home as init makes them
@pytest.mark.parametrize("args", [("chat", "-q", "hi"), ("sessions", "list"), ("ledger",)], ids=" ".join)
def test_state_db_that_is_not_a_database_is_refused_and_left_alone(initialised: Path, args: tuple[str, ...]) -> None:
    path = config.db_path(initialised)
    garbage = b"this is not SQLite\n" + bytes(range(256)) * 64
    path.write_bytes(garbage)
    result = run_cli(*args)
    assert_refused(result, "state.db", "is damaged", "not a database")  # as the gateway says it
    assert path.read_bytes() == garbage


@pytest.mark.sqlite  # the .env line numbers and state.db of the home as init makes them
def test_gateway_refuses_a_state_db_that_is_not_a_database(initialised: Path) -> None:
    path = config.db_path(initialised)
    garbage = b"\x00garbage\xff" * 512
    path.write_bytes(garbage)
    assert_gateway_refuses(initialised, "state.db")
    assert path.read_bytes() == garbage


# --- (f) a profile config.yaml with a wrong type ------------------------------------------------


@pytest.mark.parametrize(
    "args", [("chat", "-q", "hi"), ("profile", "show", "default"), ("send", "default", "hi")], ids=" ".join
)
def test_profile_config_with_a_wrong_type_is_refused_naming_the_key(initialised: Path, args: tuple[str, ...]) -> None:
    cfg = config.profiles_dir(initialised) / "default" / "config.yaml"
    data = config.load_yaml(cfg)
    data["agent"]["max_turns"] = "twenty"
    config.write_yaml(cfg, data)
    before = snapshot(initialised)
    result = run_cli(*args)
    assert_refused(result, "agent.max_turns", "config.yaml")
    assert snapshot(initialised) == before
    assert stored_rows(initialised) in ({}, {"sessions": 0, "messages": 0, "runs": 0}), stored_rows(initialised)


# --- secrets never leak -------------------------------------------------------------------------

PEER_KEY = "SOMEKEY123456"


def test_secrets_never_leak_into_any_output(home: Path) -> None:
    results: list[tuple[tuple[str, ...], CliResult]] = []

    def run(*args: str, ok: bool = True) -> CliResult:
        result = run_cli(*args)
        results.append((args, result))
        if ok:
            assert result.exit_code == 0, (args, result.stdout, result.stderr)
        return result

    run("init")
    key = api_key(home)
    assert len(key) >= 16
    run("init", "--json")  # a second init keeps the key: and must not print it either
    run("chat", "-q", "hi")
    run("chat", "-q", "hi again", "--json")
    run("sessions", "list")
    run("sessions", "list", "--json")
    run("profile", "show", "default")
    run("profile", "show", "default", "--json")
    run("peer", "add", "x", "--url", "http://127.0.0.1:9", "--key", PEER_KEY)
    run("peer", "list")
    run("peer", "list", "--json")
    run("peer", "dm", "x", "hello", "--wait", "1", ok=False)  # nobody listens on port 9: an error, keyless
    run("ledger", "--json")

    assert PEER_KEY in config.env_path(home).read_text(encoding="utf-8")  # it was stored ...
    assert PEER_KEY not in config.config_path(home).read_text(encoding="utf-8")  # ... only in .env
    assert is_private(config.env_path(home))
    for args, result in results:
        for secret in (key, PEER_KEY):
            assert secret not in result.stdout, (args, result.stdout)
            assert secret not in result.stderr, (args, result.stderr)
