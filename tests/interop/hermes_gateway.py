"""A real Hermes Agent gateway (API server platform only) on a loopback port, for interop tests.

    with ScriptedModel(["hello from hermes"]) as model, HermesGateway(model.base_url, api_key=KEY) as hermes:
        httpx.post(hermes.url + "/api/sessions", json={"title": "Bot Chat"}, headers=hermes.headers)

Hermes lives in its own venv (`python3 -m venv .venv-hermes && .venv-hermes/bin/pip install
hermes-agent==0.19.0 aiohttp`); HERMES_PYTHON is None when it is missing, so tests can skip. Each gateway
gets a fresh temporary HOME and HERMES_HOME, a clean environment (only PATH is inherited) and a config that
keeps it on loopback: the custom provider points at `model_base_url`; what would reach the internet at
startup, or call the model unscripted, is turned off; proxies point at a dead loopback port.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Self

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1,localhost,::1"
DEAD_PROXY = "http://127.0.0.1:9"  # a client that ignores NO_PROXY fails here instead of leaving the machine


def _find_python() -> str | None:
    python = Path(os.environ.get("BACKCHANNEL_HERMES_PYTHON") or ROOT / ".venv-hermes" / "bin" / "python")
    if python.is_file() and any(python.parent.parent.glob("lib/python3*/site-packages/hermes_cli/__init__.py")):
        return str(python)
    return None


HERMES_PYTHON = _find_python()

# `make interop` sets BACKCHANNEL_REQUIRE_HERMES: there a missing Hermes is a failure, not a skip.
needs_hermes = pytest.mark.skipif(
    HERMES_PYTHON is None and not os.environ.get("BACKCHANNEL_REQUIRE_HERMES"),
    reason="no Hermes venv: run `make interop`",
)


def base_config(model_base_url: str) -> dict[str, Any]:
    """The config.yaml that keeps a Hermes gateway on loopback, its model the scripted one at `model_base_url`."""
    return {
        # context_length: no context-window probes (one of them asks openrouter.ai)
        "model": dict(provider="custom", default="scripted", base_url=model_base_url, context_length=65536),
        "security": {"tirith_enabled": False},  # else it downloads the tirith binary from GitHub
        "model_catalog": {"enabled": False},
        "curator": {"enabled": False},
        "auxiliary": {"title_generation": {"enabled": False}},  # no model calls the script did not ask for
        "memory": {"nudge_interval": 0},
        "skills": {"creation_nudge_interval": 0},
    }


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HermesGateway:
    """`hermes gateway run` as a subprocess; a context manager that starts it and stops it on exit.

    `config` is merged into the generated config.yaml (e.g. {"platform_toolsets": {"api_server": [...]}});
    `files` are written into HERMES_HOME before it starts (SOUL.md, .env). With `home`, that folder is HERMES_HOME
    as it is (its config.yaml and .env made beforehand, `port` its API_SERVER_PORT), and it is left in place.
    """

    def __init__(
        self,
        model_base_url: str,
        *,
        api_key: str,
        python: str = ".venv-hermes/bin/python",
        config: dict[str, Any] | None = None,
        files: dict[str, str] | None = None,
        expect_version: str | None = "0.19.0",
        start_timeout: float = 60.0,
        home: Path | None = None,
        port: int | None = None,
    ) -> None:
        if len(api_key) < 16:
            raise ValueError("Hermes refuses to start its API server with a key under 16 characters")
        self.api_key = api_key
        self.python = python if os.path.isabs(python) else str(ROOT / python)
        self.config = _merge(base_config(model_base_url), config or {})
        self.files = dict(files or {})  # written into HERMES_HOME: SOUL.md, .env (the plugin's settings) ...
        self.expect_version, self.start_timeout = expect_version, start_timeout
        self.url = self.version = ""
        self.start_seconds = 0.0  # from spawn to the first good /health
        self.home: Path | None = home  # HERMES_HOME (state.db, logs/), removed on exit unless given
        self._given_home, self._port = home is not None, port
        self._tmp: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def log(self) -> str:
        """The gateway's stdout and stderr so far (still there after it stopped)."""
        if self._tmp is not None and (self._tmp / "gateway.out").exists():
            self._log = (self._tmp / "gateway.out").read_text(errors="replace")
        return self._log

    def start(self) -> Self:
        self._tmp = Path(tempfile.mkdtemp(prefix="hermes-gw-"))
        if not self._given_home:
            self.home = self._tmp / ".hermes"
            self.home.mkdir()
            (self.home / "config.yaml").write_text(json.dumps(self.config, indent=2))  # JSON is YAML
            for name, text in self.files.items():
                (self.home / name).write_text(text)
        assert self.home is not None
        port = self._port or _free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = dict(PATH=os.environ.get("PATH", "/usr/bin:/bin"), LANG="C.UTF-8", PYTHONUNBUFFERED="1")
        env.update(HOME=str(self._tmp), HERMES_HOME=str(self.home), API_SERVER_ENABLED="true")
        env.update(API_SERVER_KEY=self.api_key, API_SERVER_HOST="127.0.0.1", API_SERVER_PORT=str(port))
        env.update(HTTP_PROXY=DEAD_PROXY, HTTPS_PROXY=DEAD_PROXY, ALL_PROXY=DEAD_PROXY, NO_PROXY=LOOPBACK)
        started = time.monotonic()
        with open(self._tmp / "gateway.out", "wb") as out:
            self._proc = subprocess.Popen(
                [self.python, "-m", "hermes_cli.main", "gateway", "run", "-v"],
                cwd=self._tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # close() signals the whole group
            )
        try:
            self._wait_healthy(started)
        except BaseException:
            self.close()
            raise
        return self

    def _wait_healthy(self, started: float) -> None:
        assert self._proc is not None
        while time.monotonic() - started < self.start_timeout:
            if self._proc.poll() is not None:
                raise RuntimeError(f"hermes gateway exited with {self._proc.returncode}:\n{self.log()[-3000:]}")
            try:
                health = httpx.get(self.url + "/health", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                time.sleep(0.1)
                continue
            if health.get("platform") != "hermes-agent":
                raise RuntimeError(f"not a Hermes gateway at {self.url}: {health}")
            self.version, self.start_seconds = str(health.get("version")), time.monotonic() - started
            if self.expect_version and self.version != self.expect_version:
                raise RuntimeError(f"Hermes gateway is {self.version}, expected {self.expect_version}")
            return
        raise TimeoutError(f"hermes gateway not healthy after {self.start_timeout}s:\n{self.log()[-3000:]}")

    def close(self, timeout: float = 15.0) -> None:
        """SIGTERM to the gateway's process group, SIGKILL after `timeout`; then removes the temp dirs."""
        if self._proc is not None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
                if self._proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                        os.killpg(self._proc.pid, sig)
                        self._proc.wait(wait)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)  # leftovers of its group (tool subprocesses)
            self._proc = None
        if self._tmp is not None:
            self.log()
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
