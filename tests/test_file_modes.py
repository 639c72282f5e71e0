"""File modes (DESIGN 5 "Secrets", issue 15 item 6): the home 0700 and every file in it 0600 whatever the umask,
state.db's -wal and -shm, memories, logs and config files included; an existing home tightened when its gateway
starts. POSIX only (on Windows a file's mode is only its read-only bit)."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backchannel.home import config
from conftest import GatewayProcess, free_port, run_cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


@pytest.fixture
def umask_022() -> Iterator[None]:
    saved = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(saved)


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)) or ".": stat.S_IMODE(p.lstat().st_mode) for p in (root, *root.rglob("*"))}


def loose(root: Path) -> dict[str, str]:
    found = {}
    for name, mode in modes(root).items():
        wanted = 0o700 if (root / name).is_dir() else 0o600
        if mode != wanted:
            found[name] = oct(mode)
    return found


def test_every_file_of_the_home_is_private_whatever_the_umask(home: Path, tmp_path: Path, umask_022: None) -> None:
    assert run_cli("init").exit_code == 0
    assert run_cli("profile", "create", "other").exit_code == 0
    assert run_cli("send", "other", "/remember the door code is 1234").exit_code == 0
    os.umask(0o022)  # the gateway process starts under the loose umask too
    gw = GatewayProcess(home, free_port(), log_dir=tmp_path)
    path = config.config_path(home)
    data = config.load_yaml(path)
    data["gateway"]["port"] = gw.port
    config.write_yaml(path, data)
    gw.start()
    try:
        r = httpx.post(f"{gw.url}/api/sessions", json={"id": "s1"}, headers=gw.headers())
        assert r.status_code == 201, r.text
        r = httpx.post(f"{gw.url}/api/sessions/s1/chat", json={"message": "hi"}, headers=gw.headers())
        assert r.status_code == 200, r.text
        files = modes(home)
        assert {"state.db", "state.db-wal", "state.db-shm", ".env", "config.yaml", "gateway.json"} <= set(files)
        assert "profiles/other/memories/MEMORY.md" in files and "profiles/other/SOUL.md" in files
        assert loose(home) == {}
    finally:
        gw.kill()


def test_an_existing_loose_home_is_tightened_when_its_gateway_starts(initialised: Path, tmp_path: Path) -> None:
    soul = initialised / "profiles" / "default" / "SOUL.md"
    soul.chmod(0o644)
    initialised.chmod(0o755)
    (initialised / "profiles").chmod(0o755)
    config.env_path(initialised).chmod(0o644)
    gw = GatewayProcess(initialised, free_port(), log_dir=tmp_path)
    path = config.config_path(initialised)
    data = config.load_yaml(path)
    data["gateway"]["port"] = gw.port
    config.write_yaml(path, data)
    gw.start()
    try:
        assert loose(initialised) == {}
        assert "made" in gw.log() and "private" in gw.log()
    finally:
        gw.kill()
