"""`backchannel store copy`: a home's state.db copied into an empty PostgreSQL store and back, verified (issue 24).

Driven through the CLI as a person would: a home with history (runs and replies, a peer key, a memory), copied
into a database of the tests' throwaway cluster; the home then pointed at it keeps its history, its idempotency
keys and its key, and goes on; copied back into a new state.db, every table has the checksum it had. A copy is
refused while a gateway has the store open (issue 38 item 6: on a shared store, another host's gateway too);
with --while-running it is one snapshot, whole, that says as of when and how many runs came after it.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess, free_port, run_cli, use_shared_store
from gateway_http import gateway_with, in_home
from test_shared_store import deploy


def copied(to: str) -> dict[str, object]:
    done = run_cli("store", "copy", "--to", to, "--json")
    assert done.exit_code == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def checksums(result: dict[str, object]) -> dict[str, tuple[int, str]]:
    tables = result["tables"]
    assert isinstance(tables, list)
    return {t["table"]: (t["rows"], t["checksum"]) for t in tables}


@pytest.mark.sqlite  # the home starts on its own state.db
def test_a_home_moves_onto_a_shared_store_with_its_history_and_back(
    initialised: Path, postgres_url: str, tmp_path: Path
) -> None:
    first = run_cli("send", "default", "before the move", "--idempotency-key", "k-moved", "--json")
    assert first.exit_code == 0, first.stderr
    assert (
        run_cli("send", "default", '/tool memory {"action": "add", "target": "memory", "content": "x"}').exit_code == 0
    )
    key = json.loads(run_cli("key", "create", "spark", "--json").stdout)["key"]
    ledger_before = json.loads(run_cli("ledger", "--json").stdout)

    there = copied(postgres_url)
    assert there["result"] == "copied" and "password" not in json.dumps(there)
    counts = checksums(there)
    assert counts["runs"][0] == 2 and counts["messages"][0] >= 4 and counts["peer_keys"][0] == 1

    use_shared_store(initialised, postgres_url)  # the home now keeps its state in the shared store
    back = copied(str(tmp_path / "back" / "state.db"))  # and back into a new state.db: the same, table by table
    assert checksums(back) == counts
    assert json.loads(run_cli("ledger", "--json").stdout) == ledger_before
    again = run_cli("send", "default", "before the move", "--idempotency-key", "k-moved", "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["replayed"] is True  # the key came along
    assert json.loads(again.stdout)["run_id"] == json.loads(first.stdout)["run_id"]
    later = run_cli("send", "default", "after the move", "--json")  # new ids follow the copied ones
    assert later.exit_code == 0 and json.loads(later.stdout)["reply"] == "default (echo): after the move", later
    with (
        gateway_with(initialised) as gw,
        httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {key}"}) as c,
    ):
        assert c.get("/api/sessions").status_code == 200  # the peer's key came along too


@pytest.mark.parametrize("to", ["mysql://db.lan/backchannel", "sqlite:///tmp/x.db"])
def test_a_copy_to_a_url_of_another_kind_is_refused_and_writes_nothing(
    initialised: Path, to: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)  # where a URL taken for a relative path would be written
    refused = run_cli("store", "copy", "--to", to)
    assert refused.exit_code == 2, refused
    scheme = to.split("://")[0]
    assert refused.stderr.strip() == (
        f"error: {scheme}:// is not a store Backchannel can use: give a postgresql:// URL or the path of a new"
        " state.db file"
    )
    assert list(here.iterdir()) == []


def test_a_copy_goes_only_into_an_empty_store_and_never_while_the_gateway_runs(
    initialised: Path, tmp_path: Path
) -> None:
    assert run_cli("send", "default", "hello").exit_code == 0
    target = tmp_path / "copy.db"
    copied(str(target))
    again = run_cli("store", "copy", "--to", str(target))
    assert again.exit_code == 2 and "not empty" in again.stderr and "nothing was copied" in again.stderr
    folder = run_cli("store", "copy", "--to", str(tmp_path))
    assert folder.exit_code == 2 and "is a folder" in folder.stderr
    with gateway_with(initialised):
        busy = run_cli("store", "copy", "--to", str(tmp_path / "other.db"))
        assert busy.exit_code == 2 and "gateway stop" in busy.stderr and "--while-running" in busy.stderr
        assert not (tmp_path / "other.db").exists()
        snapshot = run_cli("store", "copy", "--to", str(tmp_path / "other.db"), "--while-running", "--json")
    assert snapshot.exit_code == 0, snapshot.stderr
    assert json.loads(snapshot.stdout)["runs_after"] == 0


@contextmanager
def writing(gw: GatewayProcess) -> Iterator[list[tuple[float, str]]]:
    """Runs sent to `gw` one after another for the length of the block: (when each was accepted, its run id)."""
    accepted: list[tuple[float, str]] = []
    stop = threading.Event()

    def write() -> None:
        with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=20, trust_env=False) as c:
            while not stop.is_set():
                r = c.post("/v1/runs", json={"input": f"written meanwhile {len(accepted)}"})
                assert r.status_code == 202, r.text
                accepted.append((time.time(), r.json()["run_id"]))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while not accepted:
            time.sleep(0.01)
        yield accepted
    finally:
        stop.set()
        writer.join()


def runs_of(root: Path) -> dict[str, dict[str, object]]:
    with in_home(root):
        listed = run_cli("runs", "list", "--limit", "10000", "--json")
    assert listed.exit_code == 0, listed.stderr
    return {r["run_id"]: r for r in json.loads(listed.stdout)}


def test_a_shared_store_in_use_by_another_gateway_is_copied_only_as_one_snapshot_that_says_so(
    initialised: Path, postgres_url: str, tmp_path: Path
) -> None:
    """Another host's gateway writes to the shared store: a copy is refused (it would miss what is written
    meanwhile); with --while-running it is the store at one moment, whole and verified, and it says when that was
    and how many runs came after."""
    other = tmp_path / "other-host"
    deploy(initialised, other, postgres_url)  # this home runs no gateway; the other host's does
    gw = GatewayProcess(other, free_port()).start()
    try:
        with httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=20, trust_env=False) as c:
            for n in range(50):
                assert c.post("/v1/runs", json={"input": f"before {n} " + "x" * 500}).status_code == 202
        target = tmp_path / "copy.db"
        refused = run_cli("store", "copy", "--to", str(target))
        assert refused.exit_code == 2, refused.stderr
        assert "1 other process has the store" in refused.stderr and "--while-running" in refused.stderr
        assert not target.exists()

        with writing(gw) as accepted:
            started = time.time()
            done = run_cli("store", "copy", "--to", str(target), "--while-running", "--json")
            returned = time.time()
        assert done.exit_code == 0, done.stderr
        result = json.loads(done.stdout)
        live = runs_of(initialised)
    finally:
        gw.close()

    as_of = dt.datetime.fromisoformat(result["as_of"]).timestamp()
    assert started - 1 <= as_of <= returned, (started, result["as_of"], returned)
    copied_home = tmp_path / "copied"  # a home whose state.db is the copy, read through the CLI
    shutil.copytree(initialised, copied_home, ignore=shutil.ignore_patterns("state.db*", "gateway*"))
    data = config.load_yaml(config.config_path(copied_home))
    del data["store"]
    config.write_yaml(config.config_path(copied_home), data)
    shutil.copyfile(target, config.db_path(copied_home))
    copied = runs_of(copied_home)

    assert set(copied) <= set(live)
    before = {run_id for at, run_id in accepted if at < started}
    assert before and before <= set(copied)  # everything accepted before the copy began is in it
    later = set(live) - set(copied)
    assert 0 <= result["runs_after"] <= len(later)  # counted, and not more than the store holds beyond the copy
    if result["runs_after"]:
        assert f"{result['runs_after']} run" in done.stderr and "not in the copy" in done.stderr
    # One moment of the store, whole: each run the copy holds as answered has its message and reply there too
    # (table by table, a run answered between the copy of runs and that of messages would be half in it).
    with in_home(copied_home):
        sessions = json.loads(run_cli("sessions", "list", "--json").stdout)
        said = [
            m
            for s in sessions
            for m in json.loads(run_cli("sessions", "show", s["id"], "--json").stdout)["messages"]
            if m["role"] == "assistant"
        ]
    answered = [r for r in copied.values() if r["result"] == "delivered"]
    assert len(said) == len(answered) > 0, (len(said), len(answered))
