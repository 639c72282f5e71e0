"""A peer's timeout: set with `peer add --timeout`, kept on update, refused when it is not a positive number."""

from __future__ import annotations

import json
from pathlib import Path

from backchannel.home import config
from conftest import free_port, run_cli


def test_peer_add_timeout_is_kept_shown_and_checked(initialised: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    added = run_cli("peer", "add", "slow", "--url", url, "--key", "slow-key-0123", "--timeout", "2.5")
    assert added.exit_code == 0, added.stderr
    updated = run_cli("peer", "add", "slow", "--url", url, "--note", "kept its timeout")
    assert updated.exit_code == 0, updated.stderr
    listed = json.loads(run_cli("peer", "list", "--json").stdout)
    assert [p["timeout_seconds"] for p in listed] == [2.5], listed

    for bad in ("0", "-1", "soon"):
        refused = run_cli("peer", "add", "slow", "--url", url, "--timeout", bad)
        assert refused.exit_code == 2 and "timeout" in refused.stderr, refused.stderr
    assert json.loads(run_cli("peer", "list", "--json").stdout)[0]["timeout_seconds"] == 2.5  # nothing changed

    path = config.config_path(initialised)
    data = config.load_yaml(path)
    data["peers"]["slow"]["timeout_seconds"] = "soon"
    config.write_yaml(path, data)
    broken = run_cli("peer", "list")
    assert broken.exit_code == 2, broken.stderr
    assert "config.yaml" in broken.stderr and "timeout_seconds" in broken.stderr and "Traceback" not in broken.stderr
