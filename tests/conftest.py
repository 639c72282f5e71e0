"""Shared fixtures: a temporary home for every test, no network but loopback, and helpers to drive the CLI."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from backchannel.cli import main
from backchannel.core.gateway import Gateway
from backchannel.home import config

pytest_plugins = ["webpage"]  # the web view's browser fixtures (browser, page)


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only reach loopback, not {address!r}")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only reach loopback, not {address!r}")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own BACKCHANNEL_HOME (not yet initialised) and a clean environment."""
    root = tmp_path / "home"
    monkeypatch.setenv("BACKCHANNEL_HOME", str(root))
    for name in list(os.environ):
        if name.startswith("BACKCHANNEL_PEER_") or name in ("API_SERVER_KEY", "OPENAI_API_KEY"):
            monkeypatch.delenv(name)
    return root


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str, input: str | None = None) -> CliResult:
    """Run `backchannel ARGS` in-process through its real entry point (errors → exit codes included)."""
    runner = CliRunner()
    saved = sys.argv
    code = 0
    with runner.isolation(input=input) as (out, err, _):
        sys.argv = ["backchannel", *args]
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv = saved
        return CliResult(code, _text(out.getvalue()), _text(err.getvalue()))


def _text(data: bytes) -> str:
    """What the CLI printed, its line ends as '\\n': a Windows text stream writes each as '\\r\\n'."""
    return data.decode().replace("\r\n", "\n") if os.name == "nt" else data.decode()


def is_private(path: Path) -> bool:
    """Whether `path` has mode 0600. On Windows a file's mode is only its read-only bit (the home's privacy
    is its folder's ACL, the user's), so there this holds for any file."""
    return os.name != "posix" or stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.fixture
def cli() -> Any:
    return run_cli


@pytest.fixture
def initialised(home: Path) -> Path:
    result = run_cli("init")
    assert result.exit_code == 0, result.stderr
    return home


def with_gateway(root: Path, body: Callable[[Gateway], Awaitable[None]], *, grace: float = 1, **options: Any) -> None:
    """Run `body` against a started in-process gateway on `root` (options as `Gateway` takes them)."""

    async def main() -> None:
        gateway = Gateway(root, **options)
        await gateway.start()
        try:
            await body(gateway)
        finally:
            await gateway.stop(grace=grace)

    asyncio.run(main())


def api_key(root: Path) -> str:
    return config.read_env(root)[config.API_KEY_VAR]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class GatewayProcess:
    """A real `backchannel gateway` subprocess on a free loopback port."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    log_dir: Path | None = None  # where its log goes (default: the home); a full-disk test keeps it off that disk

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key(self.root)}", **extra}

    def start(self, *, grace: float = 5.0) -> GatewayProcess:
        self.log_path = (self.log_dir or self.root) / f"gateway-{self.port}.log"
        env = {**os.environ, "BACKCHANNEL_HOME": str(self.root)}
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "backchannel", "gateway", "--port", str(self.port), "--grace", str(grace)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited early:\n{self.log_path.read_text()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()  # a gateway that came up too late would live on after the test, a port and a CPU taken
        raise RuntimeError(f"gateway did not come up:\n{self.log_path.read_text()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 60.0) -> int:
        """`backchannel gateway stop` for its home, as a person stops it on any platform (Windows has no SIGTERM):
        the command must succeed; the process's exit code."""
        assert self.proc is not None
        done: list[CliResult] = []

        def stop() -> None:
            saved = os.environ.get("BACKCHANNEL_HOME")
            os.environ["BACKCHANNEL_HOME"] = str(self.root)
            try:
                done.append(run_cli("gateway", "stop"))
            finally:
                if saved is None:
                    os.environ.pop("BACKCHANNEL_HOME", None)
                else:
                    os.environ["BACKCHANNEL_HOME"] = saved

        # In a thread of its own: the command runs an event loop, and the test's thread may have one running
        # (Playwright's sync API keeps one there). This thread only waits meanwhile.
        worker = threading.Thread(target=stop, name="gateway-stop")
        worker.start()
        worker.join(timeout)
        assert done, f"gateway stop did not return within {timeout} s:\n{self.log()[-3000:]}"
        assert done[0].exit_code == 0, f"gateway stop: {done[0].stderr}\n{self.log()[-3000:]}"
        return self.proc.wait(timeout)

    def close(self) -> None:
        """The end of a test's gateway: stopped with `gateway stop` when it still runs (killed if that fails)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.stop()
        finally:
            self.kill()

    def terminate(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        self.proc.terminate()
        return self.proc.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path and self.log_path.exists() else ""


@pytest.fixture
def gateway(initialised: Path) -> Iterator[GatewayProcess]:
    """A started gateway on the test's home; stopped at the end with `gateway stop` (killed if that fails)."""
    gw = GatewayProcess(initialised, free_port())
    config.write_yaml(
        config.config_path(initialised),
        {
            **config.load_yaml(config.config_path(initialised)),
            "gateway": {**config.load_yaml(config.config_path(initialised))["gateway"], "port": gw.port},
        },
    )
    gw.start()
    try:
        yield gw
    finally:
        gw.close()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `windows` runs on Windows only: what it checks cannot be reproduced elsewhere."""
    marker = item.get_closest_marker("windows")
    if marker is not None and sys.platform != "win32":
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        pytest.skip(f"needs Windows{': ' + reason if reason else ''}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Each phase's report on the test item (`report_call`), for fixtures that act when a test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)
