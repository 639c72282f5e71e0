"""The gateway's log file in the home (`logs/gateway.log`, rotated by size as the home's `logs:` section says) and
`backchannel logs`, which prints it across its rotated files, from a time on, or follows it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from backchannel.home import config
from backchannel.home.gateway_log import STAMP_RE
from conftest import GatewayProcess, free_port, interruptible, run_cli


def _gateway(root: Path, **logs: int) -> GatewayProcess:
    gw = GatewayProcess(root, free_port())
    data = config.load_yaml(config.config_path(root))
    data["gateway"]["port"] = gw.port
    if logs:
        data["logs"] = logs
    config.write_yaml(config.config_path(root), data)
    return gw.start()


def test_the_gateway_writes_its_log_in_the_home_as_on_stderr(initialised: Path) -> None:
    os.umask(0o022) if os.name == "posix" else None  # the file is private whatever the gateway's umask
    gw = _gateway(initialised)
    try:
        with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=10) as c:
            run = c.post("/v1/runs", json={"input": "hello"}).json()["run_id"]
            deadline = time.monotonic() + 10
            while c.get(f"/v1/runs/{run}").json()["status"] != "completed":
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        assert gw.stop() == 0
    path = initialised / "logs" / "gateway.log"
    written = path.read_text(encoding="utf-8").splitlines()
    assert written and [line for line in written if not STAMP_RE.match(line)] == []
    assert [line for line in gw.log().splitlines() if STAMP_RE.match(line)] == written  # stderr's, the run log's too
    assert any(f"run {run} completed" in line for line in written)
    assert any("stop asked over the API" in line for line in written)  # a line when the stop begins
    assert written[-1].endswith("gateway stopped")
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    shown = run_cli("logs")
    assert shown.exit_code == 0 and shown.stdout.splitlines() == written
    assert run_cli("logs", "-n", "2").stdout.splitlines() == written[-2:]


def test_the_log_is_rotated_by_size_and_logs_reads_across_the_files(initialised: Path) -> None:
    gw = _gateway(initialised, max_bytes=600, keep=2)
    try:
        with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=10) as c:
            for i in range(12):
                assert c.post("/v1/runs", json={"input": f"message {i}"}).status_code == 202
            deadline = time.monotonic() + 30
            while "run" not in gw.log() or gw.log().count(" completed") < 12:
                assert time.monotonic() < deadline, gw.log()
                time.sleep(0.1)
    finally:
        assert gw.stop() == 0
    folder = initialised / "logs"
    assert sorted(p.name for p in folder.iterdir()) == ["gateway.log", "gateway.log.1", "gateway.log.2"]
    assert all(p.stat().st_size <= 600 for p in folder.iterdir())
    kept = [
        *(folder / "gateway.log.2").read_text().splitlines(),
        *(folder / "gateway.log.1").read_text().splitlines(),
        *(folder / "gateway.log").read_text().splitlines(),
    ]
    stderr = [line for line in gw.log().splitlines() if STAMP_RE.match(line)]
    assert stderr[-len(kept) :] == kept and len(kept) < len(stderr)  # the oldest files dropped
    assert run_cli("logs").stdout.splitlines() == kept


def _write_log(root: Path, *lines: str) -> Path:
    folder = root / "logs"
    folder.mkdir(exist_ok=True)
    path = folder / "gateway.log"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_logs_since_takes_what_ledger_since_takes(initialised: Path) -> None:
    old = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 3 * 3600))
    new = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 60))
    rotated = initialised / "logs" / "gateway.log.1"
    _write_log(initialised, f"{new},001 INFO backchannel.gateway newer", "Traceback (most recent call last):", "  boom")
    rotated.write_text(f"{old},000 INFO backchannel.gateway older\n  its traceback\n", encoding="utf-8")
    assert run_cli("logs").stdout.splitlines()[0].endswith("older")
    recent = run_cli("logs", "--since", "2h")
    assert recent.exit_code == 0, recent.stderr
    assert recent.stdout.splitlines() == [
        f"{new},001 INFO backchannel.gateway newer",
        "Traceback (most recent call last):",
        "  boom",
    ]
    iso = time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() - 4 * 3600))
    assert len(run_cli("logs", "--since", iso).stdout.splitlines()) == 5
    bad = run_cli("logs", "--since", "yesterday")
    assert bad.exit_code == 2 and "neither a time ago" in bad.stderr


def test_logs_says_when_there_is_no_log_yet(initialised: Path) -> None:
    done = run_cli("logs")
    assert done.exit_code == 0 and done.stdout == ""
    assert "no gateway log yet" in done.stderr and "backchannel gateway" in done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="Ctrl-C is sent as SIGINT")
def test_logs_follow_sees_new_lines_across_a_rotation_until_ctrl_c(initialised: Path) -> None:
    path = _write_log(initialised, "2026-01-01 00:00:00,000 INFO backchannel.gateway first")
    proc = interruptible(
        [sys.executable, "-m", "backchannel", "logs", "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "BACKCHANNEL_HOME": str(initialised)},
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().endswith("first\n")
        time.sleep(1)  # following by now
        with path.open("a", encoding="utf-8") as f:
            f.write("2026-01-01 00:00:01,000 INFO backchannel.gateway second\n")
        assert proc.stdout.readline().endswith("second\n")
        with path.open("a", encoding="utf-8") as f:  # written just before a rotation: read from gateway.log.1
            f.write("2026-01-01 00:00:02,000 INFO backchannel.gateway third\n")
        path.rename(path.with_name("gateway.log.1"))
        path.write_text("2026-01-01 00:00:03,000 INFO backchannel.gateway fourth\n", encoding="utf-8")
        assert proc.stdout.readline().endswith("third\n")
        assert proc.stdout.readline().endswith("fourth\n")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
