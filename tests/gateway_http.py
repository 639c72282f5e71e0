"""Driving a real gateway process over HTTP, for the fault tests: start it with settings, chat, poll a run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from backchannel.home import config
from conftest import GatewayProcess, GatewayThread, free_port, run_cli
from polling import eventually

TERMINAL = {"completed", "failed", "cancelled", "expired"}


@contextmanager
def gateway_with(
    root: Path, *, grace: float = 5.0, process: bool = False, **gateway: Any
) -> Iterator[GatewayProcess | GatewayThread]:
    """A gateway on `root` with these `gateway:` settings in config.yaml, in-process (a `GatewayProcess` with
    `process`: for a signal or a pid); stopped at the end."""
    gw = (GatewayProcess if process else GatewayThread)(root, free_port())
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["gateway"].update(port=gw.port, **gateway)
    config.write_yaml(path, data)
    gw.start(grace=grace)
    try:
        yield gw
    finally:
        gw.close()


def client(gw: GatewayProcess | GatewayThread) -> httpx.Client:
    return httpx.Client(base_url=gw.url, headers=gw.headers(), timeout=httpx.Timeout(10.0), trust_env=False)


def chat(c: httpx.Client, session_id: str, message: str, key: str, wait: float, profile: str = "") -> dict[str, Any]:
    prefix = f"/p/{profile}" if profile else ""
    r = c.post(
        f"{prefix}/api/sessions/{session_id}/chat",
        json={"message": message},
        headers={"Idempotency-Key": key, "X-Hermes-Wait-Seconds": str(wait)},
    )
    assert r.status_code in (200, 202), r.text
    body: dict[str, Any] = r.json()
    return body


def poll(c: httpx.Client, run_id: str, statuses: set[str], within: float) -> dict[str, Any]:
    run: dict[str, Any] = eventually(
        lambda: c.get(f"/v1/runs/{run_id}").json(),
        lambda run: run["status"] in statuses,
        within=within,
        what=lambda run: f"run {run_id} still {run['status']!r}: {run}",
    )
    return run


def set_messaging(root: Path, profile: str, **rules: Any) -> None:
    """Set keys of a profile's agent.session_messaging."""
    path = root / "profiles" / profile / "config.yaml"
    data = config.load_yaml(path)
    data["agent"]["session_messaging"].update(rules)
    config.write_yaml(path, data)


@contextmanager
def in_home(root: Path) -> Iterator[None]:
    """BACKCHANNEL_HOME=root for the block (the CLI of another home)."""
    saved = os.environ.get("BACKCHANNEL_HOME")
    os.environ["BACKCHANNEL_HOME"] = str(root)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("BACKCHANNEL_HOME", None)
        else:
            os.environ["BACKCHANNEL_HOME"] = saved


@contextmanager
def other_home(root: Path, *profiles: str) -> Iterator[GatewayThread]:
    """Another initialised home at `root` (with these profiles besides default) and its gateway running in this
    process, on a free port written into its config.yaml; stopped at the end."""
    with in_home(root):
        assert run_cli("init").exit_code == 0
        for name in profiles:
            assert run_cli("profile", "create", name).exit_code == 0
    with gateway_with(root) as gw:
        assert isinstance(gw, GatewayThread)
        yield gw


def new_home(root: Path) -> GatewayProcess:
    """An initialised home at `root` with a gateway process ready to start on a free port (not started)."""
    with in_home(root):
        result = run_cli("init")
    assert result.exit_code == 0, result.stderr
    gw = GatewayProcess(root, free_port())
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["gateway"].update(port=gw.port)
    config.write_yaml(path, data)
    return gw
