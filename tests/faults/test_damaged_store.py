"""A damaged state.db: a page in the middle of a real store overwritten, then a gateway started on it.

Contract (issue 11 item 5, README "Reliability"): a gateway runs PRAGMA quick_check before it starts;
on a damaged store it refuses to start (exit 2, nothing written) with a message that names the file
and the commands that back it up and recover it; typed as printed, those commands give a store the
gateway starts on again. `store.integrity.problems(deep=True)` (doctor --deep) finds the damage too.
Every command that opens the store refuses it the same way (issue 38 item 8): exit 2, the gateway's message,
one JSON error object under --json, nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from backchannel.home import config
from backchannel.store import integrity
from conftest import GatewayProcess, free_port, run_cli


@pytest.fixture
def gateway(gateway_process: GatewayProcess) -> GatewayProcess:
    """A gateway process of its own: the test stops it cleanly, damages its store and starts it again."""
    return gateway_process


pytestmark = pytest.mark.faults

MESSAGES = 120
PAGE = 4096


def fill_store(gw: GatewayProcess) -> None:
    with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=10, trust_env=False) as c:
        sid = c.post("/api/sessions", json={"title": "pages"}).json()["session"]["id"]
        for i in range(MESSAGES):
            r = c.post(f"/api/sessions/{sid}/chat", json={"message": f"page-filler-{i} " + "y" * 1500})
            assert r.status_code == 200, r.text


def damage_middle_page(path: Path) -> None:
    pages = path.stat().st_size // PAGE
    assert pages > 20, f"the store has only {pages} pages"
    with path.open("r+b") as fh:
        fh.seek((pages // 2) * PAGE)
        fh.write(bytes(range(256)) * (PAGE // 256))


def start_gateway(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backchannel", "gateway", "--port", str(free_port())],
        env={**os.environ, "BACKCHANNEL_HOME": str(root)},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_damaged_store_is_refused_on_start_with_the_commands_that_recover_it(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    fill_store(gateway)
    assert gateway.terminate() == 0  # a clean stop: everything checkpointed into state.db
    db = config.db_path(gateway.root)
    assert integrity.problems(db) == [] and integrity.problems(db, deep=True) == []

    damaged = tmp_path / "state-copy.db"
    shutil.copyfile(db, damaged)
    damage_middle_page(damaged)
    assert integrity.problems(damaged, deep=True), "the damage went unnoticed by integrity_check"
    for leftover in (db.with_name("state.db-wal"), db.with_name("state.db-shm")):
        leftover.unlink(missing_ok=True)
    shutil.copyfile(damaged, db)
    before = db.read_bytes()

    refused = start_gateway(gateway.root)
    assert refused.returncode == 2, (refused.returncode, refused.stderr[-2000:])
    err = refused.stderr
    assert "Traceback" not in err, err
    assert err.startswith("error: ") and str(db) in err, err
    assert "is damaged (PRAGMA quick_check" in err, err
    assert ".recover" in err and "integrity_check" in err, err
    assert db.read_bytes() == before, "a refused start wrote to the damaged store"
    for deep in ([], ["--deep"]):  # doctor says so too, and names the check that found it
        report = run_cli("doctor", *deep, "--json")
        assert report.exit_code == 1, report.stdout
        found = [c for c in json.loads(report.stdout)["checks"] if c["check"] == "state.db"]
        assert found[0]["status"] == "fail" and "is damaged" in found[0]["detail"], found
        assert ("integrity_check" if deep else "quick_check") in found[0]["detail"] and ".recover" in found[0]["fix"]
    assert db.read_bytes() == before, "doctor wrote to the damaged store"

    if shutil.which("sqlite3") is None or os.name != "posix":
        pytest.skip("the sqlite3 shell is not installed: the printed recovery was not run")
    commands = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert len(commands) == 4, err
    for command in commands:  # typed as printed
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (command, done.stderr)
    assert db.with_name("state.db.damaged").read_bytes() == before  # the backup is the damaged store
    assert integrity.problems(db, deep=True) == []
    gw = GatewayProcess(gateway.root, free_port()).start()  # the recovered store serves again
    try:
        with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=10, trust_env=False) as c:
            assert c.get("/api/sessions").status_code == 200
    finally:
        assert gw.terminate() == 0


def test_every_command_that_opens_a_damaged_store_refuses_it_as_the_gateway_does(gateway: GatewayProcess) -> None:
    fill_store(gateway)
    assert gateway.terminate() == 0
    db = config.db_path(gateway.root)
    for leftover in (db.with_name("state.db-wal"), db.with_name("state.db-shm")):
        leftover.unlink(missing_ok=True)
    damage_middle_page(db)
    before = db.read_bytes()
    refused = start_gateway(gateway.root)
    assert refused.returncode == 2 and "is damaged (PRAGMA quick_check" in refused.stderr, refused.stderr[-2000:]
    said = refused.stderr[refused.stderr.index("error: ") :]

    commands = [
        ["send", "default", "written into a damaged store", "--json"],  # in-process: no gateway runs
        ["key", "create", "spark", "--json"],
        ["runs", "list", "--json"],
        ["sessions", "list"],
        ["store", "copy", "--to", str(gateway.root.parent / "copy.db"), "--json"],
    ]
    for args in commands:
        done = run_cli(*args)
        assert done.exit_code == 2, (args, done.stdout, done.stderr)
        assert done.stderr == said, (args, done.stderr)
        if "--json" in args:
            body = json.loads(done.stdout)  # exactly one JSON object: anything more would not parse
            assert body["error"]["code"] == "store_damaged" and body["error"]["message"] in said, (args, body)
        else:
            assert done.stdout == "", (args, done.stdout)
        assert db.read_bytes() == before, f"{args} wrote to the damaged store"
