"""A real Hermes Agent gateway (API server platform only) on a loopback port, for interop tests.

    with ScriptedModel(["hello from hermes"]) as model, HermesGateway(model.base_url, api_key=KEY) as hermes:
        httpx.post(hermes.url + "/api/sessions", json={"title": "Bot Chat"}, headers=hermes.headers)

Hermes lives in its own venv (`python3 -m venv .venv-hermes && .venv-hermes/bin/pip install
hermes-agent==0.19.0 aiohttp`); HERMES_PYTHON is None when it is missing, so tests can skip. Each
gateway gets a fresh temporary HOME and HERMES_HOME, a clean environment (nothing inherited but PATH)
and a config that keeps it on loopback: the custom provider points at `model_base_url`, and the
features that would reach the internet at startup or call the model unscripted are turned off.
"""

from __future__ import annotations

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

ROOT = Path(__file__).resolve().parents[2]
_DEAD_PROXY = "http://127.0.0.1:9"  # anything that ignores NO_PROXY and tries to leave the machine fails here


def _find_python() -> str | None:
    python = Path(os.environ.get("BACKCHANNEL_HERMES_PYTHON") or ROOT / ".venv-hermes" / "bin" / "python")
    if python.is_file() and any(python.parent.parent.glob("lib/python3*/site-packages/hermes_cli/__init__.py")):
        return str(python)
    return None


HERMES_PYTHON = _find_python()


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
    """`hermes gateway run` as a subprocess; a context manager that starts it and stops it on exit."""

    def __init__(
        self,
        model_base_url: str,
        *,
        api_key: str,
        python: str = ".venv-hermes/bin/python",
        model: str = "scripted",
        config: dict[str, Any] | None = None,
        expect_version: str | None = "0.19.0",
        start_timeout: float = 60.0,
    ) -> None:
        if len(api_key) < 16:
            raise ValueError("Hermes refuses to start its API server with a key under 16 characters")
        self.api_key = api_key
        self.python = str(ROOT / python) if not os.path.isabs(python) else python
        self.config = _merge(
            {
                "model": {"provider": "custom", "default": model, "base_url": model_base_url,
                          "api_key": "scripted-dummy-key", "context_length": 65536},  # no metadata probes (OpenRouter)
                "security": {"tirith_enabled": False},  # else it downloads the tirith binary from GitHub
                "model_catalog": {"enabled": False},
                "curator": {"enabled": False},
                "auxiliary": {"title_generation": {"enabled": False}},  # no unscripted model calls
                "memory": {"nudge_interval": 0},
                "skills": {"creation_nudge_interval": 0},
            },
            config or {},
        )
        self.expect_version, self.start_timeout = expect_version, start_timeout
        self.url = ""
        self.version = ""
        self.start_seconds = 0.0
        self.home: Path | None = None  # the HERMES_HOME (state.db, logs/); removed on exit
        self._tmp: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_text = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def log(self) -> str:
        """The gateway's stdout and stderr so far (kept after it stopped)."""
        if self._tmp is not None and (self._tmp / "gateway.out").exists():
            self._log_text = (self._tmp / "gateway.out").read_text(errors="replace")
        return self._log_text

    def start(self) -> Self:
        self._tmp = Path(tempfile.mkdtemp(prefix="hermes-gw-"))
        self.home = self._tmp / ".hermes"
        self.home.mkdir()
        (self.home / "config.yaml").write_text(json.dumps(self.config, indent=2))  # JSON is YAML
        port = _free_port()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1",
            "HOME": str(self._tmp), "HERMES_HOME": str(self.home),
            "API_SERVER_ENABLED": "true", "API_SERVER_KEY": self.api_key,
            "API_SERVER_HOST": "127.0.0.1", "API_SERVER_PORT": str(port),
            "HTTP_PROXY": _DEAD_PROXY, "HTTPS_PROXY": _DEAD_PROXY, "ALL_PROXY": _DEAD_PROXY,
            "NO_PROXY": "127.0.0.1,localhost,::1", "no_proxy": "127.0.0.1,localhost,::1",
        }
        self.url = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        with open(self._tmp / "gateway.out", "wb") as out:
            self._proc = subprocess.Popen(
                [self.python, "-m", "hermes_cli.main", "gateway", "run", "-v"], cwd=self._tmp, env=env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
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
                raise RuntimeError(f"not a hermes gateway at {self.url}: {health}")
            self.version, self.start_seconds = str(health.get("version")), time.monotonic() - started
            if self.expect_version and self.version != self.expect_version:
                raise RuntimeError(f"hermes gateway is {self.version}, expected {self.expect_version}")
            return
        raise TimeoutError(f"hermes gateway not healthy after {self.start_timeout}s:\n{self.log()[-3000:]}")

    def close(self, timeout: float = 15.0) -> None:
        """SIGTERM to the gateway's process group, SIGKILL after `timeout`, then removes the temp dirs."""
        if self._proc is not None:
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
                if self._proc.poll() is None:
                    try:
                        os.killpg(self._proc.pid, sig)
                        self._proc.wait(wait)
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        pass
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # stragglers of its group (tool subprocesses)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc = None
        if self._tmp is not None:
            self.log()
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
