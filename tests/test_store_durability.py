"""gateway.durability in config.yaml reaches the store's connection as PRAGMA synchronous.

Contract (README "Reliability"): the default `normal` is synchronous=NORMAL (1: nothing lost on a
process crash, the last commits may be lost on a power loss); `full` is synchronous=FULL (2: every
commit synced); any other value is a config error that names the file and the key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backchannel.core.gateway import Gateway
from backchannel.home import config
from conftest import run_cli, with_gateway

pytestmark = pytest.mark.sqlite  # the home's own state.db


def set_durability(root: Path, value: object) -> None:
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["gateway"]["durability"] = value
    config.write_yaml(path, data)


def synchronous_of(root: Path) -> int:
    seen: list[int] = []

    async def body(gw: Gateway) -> None:
        seen.append(int(gw.db.conn.execute("PRAGMA synchronous").fetchone()[0]))

    with_gateway(root, body)
    return seen[0]


def test_the_default_durability_is_synchronous_normal(initialised: Path) -> None:
    assert synchronous_of(initialised) == 1


def test_durability_full_reaches_the_connection_as_synchronous_full(initialised: Path) -> None:
    set_durability(initialised, "full")
    assert synchronous_of(initialised) == 2


def test_an_unknown_durability_is_a_config_error_naming_the_key(initialised: Path) -> None:
    set_durability(initialised, "paranoid")
    result = run_cli("chat", "-q", "hello")
    assert result.exit_code == 2, result
    assert "gateway.durability" in result.stderr and "paranoid" in result.stderr, result.stderr
    assert "config.yaml" in result.stderr
