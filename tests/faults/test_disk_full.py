"""A full disk: the home on a 2 MB tmpfs, filled up while a real gateway runs, then freed.

Contract (issue 11 item 1, README "Reliability"): nothing is answered before it is saved; a commit that
fails answers every request of its group with 503 `store_full` at once (no hang); a turn whose end
cannot be saved keeps it in memory and saves it when space returns (the turn is not run again); SIGTERM
stops the gateway whatever the disk; the CLI says the disk is full in one line and config writes leave
the old file as it was. After each fault the store holds every accepted message once, with one run
and one reply. Needs root (mount); skipped with the reason where a tmpfs cannot be mounted.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess, free_port, run_cli
from store_audit import audit_texts

pytestmark = pytest.mark.faults

TMPFS_SIZE = "2m"
ANSWER_WITHIN = 10.0  # seconds: every request is answered long before this, or it hangs
FULL_CODES = {"store_full", "store_unavailable"}


@dataclass
class SmallDisk:
    """A tmpfs holding the test's home, and a filler file that takes all its free space when asked."""

    mount: Path
    home: Path

    @property
    def filler(self) -> Path:
        return self.mount / "filler"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for chunk in (1 << 16, 1 << 12, 1 << 9):
                try:
                    while True:
                        os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


def _mount(target: Path) -> str | None:
    """Mount a small tmpfs on `target`; the reason it could not be done, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a small tmpfs needs root (CI runs the fault suite as root)"
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(target)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run mount: {exc}"
    if done.returncode != 0:
        return f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
    return None


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SmallDisk]:
    mount = tmp_path / "small"
    mount.mkdir()
    reason = _mount(mount)
    if reason is not None:
        pytest.skip(reason)
    try:
        home = mount / "home"
        monkeypatch.setenv("BACKCHANNEL_HOME", str(home))
        result = run_cli("init")
        assert result.exit_code == 0, result.stderr
        yield SmallDisk(mount, home)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=10)


@pytest.fixture
def gw(disk: SmallDisk, tmp_path: Path) -> Iterator[GatewayProcess]:
    gateway = GatewayProcess(disk.home, free_port(), log_dir=tmp_path)  # the log stays off the full disk
    gateway.start()
    try:
        yield gateway
    finally:
        gateway.kill()


def client(gw: GatewayProcess) -> httpx.Client:
    return httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=ANSWER_WITHIN, trust_env=False)


def new_session(gw: GatewayProcess) -> str:
    with client(gw) as c:
        r = c.post("/api/sessions", json={"title": "disk"})
        assert r.status_code == 201, r.text
        return str(r.json()["session"]["id"])


def chat(c: httpx.Client, sid: str, text: str, key: str, wait: str = "5") -> httpx.Response:
    return c.post(
        f"/api/sessions/{sid}/chat",
        json={"message": text},
        headers={"Idempotency-Key": key, "X-Hermes-Wait-Seconds": wait},
    )


def run_of(c: httpx.Client, run_id: str) -> dict[str, Any]:
    r = c.get(f"/v1/runs/{run_id}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def wait_completed(c: httpx.Client, run_id: str, within: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        run = run_of(c, run_id)
        if run["status"] == "completed" or time.monotonic() > deadline:
            return run
        time.sleep(0.1)


def stop_cleanly(gw: GatewayProcess) -> None:
    """SIGTERM stops the gateway, exit 0, within its grace and some."""
    try:
        code = gw.terminate(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"SIGTERM did not stop the gateway:\n{gw.log()[-3000:]}")
    assert code == 0, gw.log()[-3000:]
    assert "Traceback" not in gw.log(), gw.log()[-3000:]


def test_a_full_disk_answers_503_store_full_and_nothing_answered_is_unsaved(
    disk: SmallDisk, gw: GatewayProcess
) -> None:
    sid = new_session(gw)
    before = [f"before-{i}" for i in range(3)]
    during = [f"during-{i}" for i in range(5)]
    with client(gw) as c:
        for token in before:
            r = chat(c, sid, token, key=f"k-{token}")
            assert r.status_code == 200, r.text

        disk.fill()
        for token in during:
            started = time.monotonic()
            r = chat(c, sid, token + " " + "x" * 2000, key=f"k-{token}")
            assert r.status_code == 503, (token, r.status_code, r.text)
            assert r.json()["error"]["code"] in FULL_CODES, r.text
            assert time.monotonic() - started < ANSWER_WITHIN
        assert c.get("/health").status_code == 200

        disk.free()
        for token in during:  # the same keys, once space is back: accepted and answered now
            r = chat(c, sid, token + " " + "x" * 2000, key=f"k-{token}")
            assert r.status_code == 200, (token, r.text)
            assert token in r.json()["message"]["content"], r.text
        for token in before:  # what was answered before the fault is still there, once
            r = chat(c, sid, token, key=f"k-{token}")
            assert r.status_code == 200 and r.json().get("replayed") is not False, r.text

    stop_cleanly(gw)
    audit_texts(disk.home, before + during)


def test_a_turn_whose_end_cannot_be_saved_is_saved_when_space_returns_not_run_again(
    disk: SmallDisk, gw: GatewayProcess
) -> None:
    sid = new_session(gw)
    with client(gw) as c:
        r = chat(c, sid, "/sleep 1.0\nslow-one", key="k-slow", wait="0.05")
        assert r.status_code == 202, r.text  # accepted: the run is on disk, its turn running
        run_id = r.json()["run_id"]
        disk.fill()  # while the turn runs: its end (the reply, the state) cannot be saved
        time.sleep(2.0)
        run = run_of(c, run_id)
        assert run["status"] == "running", run  # never told completed before the reply is saved
        disk.free()
        run = wait_completed(c, run_id)
        assert run["status"] == "completed", run
        assert "slow-one" in run.get("output", ""), run
        r = chat(c, sid, "/sleep 1.0\nslow-one", key="k-slow")  # asked again: the one run, not a second turn
        assert r.status_code == 200 and r.json()["run_id"] == run_id, r.text
    stop_cleanly(gw)
    gw.start()  # a restart does not run it again either
    with client(gw) as c:
        assert run_of(c, run_id)["attempts"] == 1
    stop_cleanly(gw)
    audit_texts(disk.home, ["slow-one"])


def test_sigterm_stops_the_gateway_while_the_disk_is_full(disk: SmallDisk, gw: GatewayProcess) -> None:
    sid = new_session(gw)
    with client(gw) as c:
        r = chat(c, sid, "/sleep 0.5\ncut-short", key="k-cut", wait="0.05")
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        disk.fill()
        time.sleep(1.0)  # the turn ended; its end waits for space
        r = chat(c, sid, "refused " + "x" * 2000, key="k-refused")
        assert r.status_code == 503, r.text
    stop_cleanly(gw)
    disk.free()
    gw.start()  # the end was never saved nor answered: the run is requeued and runs once more
    with client(gw) as c:
        run = wait_completed(c, run_id)
        assert run["status"] == "completed", run
    stop_cleanly(gw)
    audit_texts(disk.home, ["cut-short"], attempts=None)


def test_the_cli_on_a_full_disk_says_so_in_one_line_and_changes_no_file(disk: SmallDisk) -> None:
    cfg, env = config.config_path(disk.home), config.env_path(disk.home)
    saved = cfg.read_bytes(), env.read_bytes()
    assert run_cli("chat", "-q", "first").exit_code == 0  # a session and a few pages to grow from
    disk.fill()
    results = {
        "chat": run_cli("chat", "-q", "full " + "x" * 4000),
        "peer add": run_cli("peer", "add", "spark", "--url", "http://127.0.0.1:19399", "--key", "peer-key-123456"),
        "profile create": run_cli("profile", "create", "bob"),
    }
    for name, result in results.items():
        assert result.exit_code != 0, (name, result)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), (name, result.stderr)
        assert "full" in lines[0], (name, lines[0])
        assert "Traceback" not in result.stderr + result.stdout, name
    assert (cfg.read_bytes(), env.read_bytes()) == saved  # the old files, intact
    assert not [p.name for p in disk.home.iterdir() if p.name.startswith((".config.yaml.", ".env."))]
    disk.free()
    after = run_cli("chat", "-q", "after")
    assert after.exit_code == 0 and "after" in after.stdout, after
