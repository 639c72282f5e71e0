"""`backchannel store copy`: a home's state.db copied into an empty PostgreSQL store and back, verified (issue 24).

Driven through the CLI as a person would: a home with history (runs and replies, a peer key, a memory), copied
into a database of the tests' throwaway cluster; the home then pointed at it keeps its history, its idempotency
keys and its key, and goes on; copied back into a new state.db, every table has the checksum it had.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from conftest import run_cli, use_shared_store
from gateway_http import gateway_with


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
    assert busy.exit_code == 2 and "gateway stop" in busy.stderr
    assert not (tmp_path / "other.db").exists()
