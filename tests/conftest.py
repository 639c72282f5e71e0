"""Shared fixtures: a temporary home for every test, no network but loopback, and helpers to drive the CLI."""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from backchannel.cli import main
from backchannel.cli.gateway_cmd import LOG_FORMAT  # the gateway process's, for the in-process one's log
from backchannel.core.gateway import Gateway
from backchannel.home import config
from postgres import Cluster

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


def run_cli(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> CliResult:
    """Run `backchannel ARGS` in-process through its real entry point (errors → exit codes included), with
    `env` added to the environment for the call."""
    runner = CliRunner()
    saved = sys.argv
    code = 0
    with runner.isolation(input=input, env=env) as (out, err, _):
        sys.argv = ["backchannel", *args]

        def call() -> None:
            nonlocal code
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)

        try:
            if _loop_running():  # a command runs its own event loop, as from a shell: not inside the test's
                worker = threading.Thread(target=call)
                worker.start()
                worker.join()
            else:
                call()
        finally:
            sys.argv = saved
        return CliResult(code, _text(out.getvalue()), _text(err.getvalue()))


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _text(data: bytes) -> str:
    """What the CLI printed, its line ends as '\\n': a Windows text stream writes each as '\\r\\n'."""
    return data.decode().replace("\r\n", "\n") if os.name == "nt" else data.decode()


def is_private(path: Path) -> bool:
    """Whether `path` has mode 0600. On Windows a file's mode is only its read-only bit (the home's privacy
    is its folder's ACL, the user's), so there this holds for any file."""
    return os.name != "posix" or stat.S_IMODE(path.stat().st_mode) == 0o600


def subcommands(group: Any) -> dict[str, Any]:
    """A click group's subcommands by name, each loaded (the root group imports a command's module on first use):
    what `--help` lists, through click's own calls."""
    import click

    ctx = click.Context(group)
    return {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}


@pytest.fixture
def cli() -> Any:
    return run_cli


STORE_VAR = "BACKCHANNEL_TEST_STORE"  # `postgresql`: every test's home keeps its state in the cluster (make test-pg)


@pytest.fixture
def initialised(home: Path, request: pytest.FixtureRequest) -> Path:
    result = run_cli("init")
    assert result.exit_code == 0, result.stderr
    if os.environ.get(STORE_VAR) == "postgresql":
        cluster: Cluster = request.getfixturevalue("postgres_cluster")
        use_shared_store(home, cluster.new_database())
    return home


def use_shared_store(root: Path, url: str) -> None:
    """Point the home at a PostgreSQL store: its URL in config.yaml without the password, which goes to .env."""
    parts = urllib.parse.urlsplit(url)
    plain = urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}@{parts.hostname}:{parts.port}"))
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["store"] = {**(data.get("store") or {}), "url": plain}
    config.write_yaml(path, data)
    config.set_env_value(root, "BACKCHANNEL_STORE_PASSWORD", urllib.parse.unquote(parts.password or ""))


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


STARTUP_SECONDS = 180  # how long a gateway may take to answer /health: a start on a loaded machine is slow


PORTS_PER_WORKER = 2500
FIRST_PORT = 10000  # below the kernel's ephemeral range (32768 up): a port handed out here is never one it picks
# Ports browsers refuse to load a page from (ERR_UNSAFE_PORT): the web view's tests would meet one in the blocks.
BROWSER_UNSAFE = frozenset({10080, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6697})


def _worker_ports() -> Iterator[int]:
    """This test process's own ports, never another's: pytest-xdist's worker N (PYTEST_XDIST_WORKER gwN) gets
    the N-th block of PORTS_PER_WORKER, counted through once and again (a port a gateway just left is only
    handed out again after the whole block)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = FIRST_PORT + PORTS_PER_WORKER * (int(worker) % 8 if worker.isdigit() else 0)
    while True:
        yield from (port for port in range(first, first + PORTS_PER_WORKER) if port not in BROWSER_UNSAFE)


_ports = _worker_ports()


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interruptible(args: list[str], **popen: Any) -> subprocess.Popen[str]:
    """A child process a test stops with SIGINT as Ctrl-C would, started with SIGINT at its default however
    pytest was started: a background job of a non-interactive shell ignores SIGINT, and its children would
    inherit that (Python then installs no KeyboardInterrupt handler). The program itself keeps an ignored
    SIGINT ignored, as programs started in the background should; only the tests ask for Ctrl-C."""
    if sys.platform != "win32":
        popen.setdefault("preexec_fn", _sigint_default)
    return subprocess.Popen(args, text=True, **popen)


def free_port() -> int:
    """A loopback port nothing listens on now, and that no other test process of this run is handed."""
    for port in _ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or still held by a connection closed a moment ago
            return port
    raise AssertionError("unreachable")


@dataclass
class GatewayProcess:
    """A real `backchannel gateway` subprocess on a free loopback port."""

    root: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    log_dir: Path | None = None  # where its log goes (default: the home); a full-disk test keeps it off that disk
    env: dict[str, str] = field(default_factory=dict)  # besides this process's (OTEL_* for the traces' tests)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key(self.root)}", **extra}

    def start(self, *, grace: float = 5.0) -> GatewayProcess:
        self.log_path = (self.log_dir or self.root) / f"gateway-{self.port}.log"
        env = {**os.environ, **self.env, "BACKCHANNEL_HOME": str(self.root)}
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "backchannel", "gateway", "--port", str(self.port), "--grace", str(grace)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + STARTUP_SECONDS
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


_serving: contextvars.ContextVar[GatewayThread | None] = contextvars.ContextVar("serving", default=None)


class _LogFile:
    """An in-process gateway's log file, written by its log handler and its run log (from any thread)."""

    def __init__(self, path: Path) -> None:
        self.lock = threading.Lock()
        self.file = path.open("a", encoding="utf-8")

    def write(self, text: str) -> int:
        with self.lock:
            written = self.file.write(text)
            self.file.flush()
            return written

    def flush(self) -> None:
        pass

    def close(self) -> None:
        with self.lock:
            self.file.close()


class _ThreadLog(logging.Handler):
    """The log lines of one in-process gateway: those logged in its thread, or in a task or thread it started
    (they carry its context), written to its log file as the gateway process writes its own."""

    def __init__(self, owner: GatewayThread, path: Path) -> None:
        super().__init__(logging.INFO)
        self.owner = owner
        self.setFormatter(logging.Formatter(LOG_FORMAT))
        self.file = _LogFile(path)

    def emit(self, record: logging.LogRecord) -> None:
        if _serving.get() is self.owner or record.thread == self.owner.ident:
            self.file.write(self.format(record) + "\n")

    def close(self) -> None:
        self.file.close()
        super().close()


class _Levels:
    """The root logger at INFO while in-process gateways run (as the gateway process logs), and back after."""

    QUIET = ("httpx", "httpcore")  # as the gateway process has them

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.saved: dict[str, int] = {}

    def up(self) -> None:
        with self.lock:
            if self.count == 0:
                self.saved = {name: logging.getLogger(name or None).level for name in ("", *self.QUIET)}
                logging.getLogger().setLevel(logging.INFO)
                for name in self.QUIET:
                    logging.getLogger(name).setLevel(logging.WARNING)
            self.count += 1

    def down(self) -> None:
        with self.lock:
            self.count -= 1
            if self.count == 0:
                for name, level in self.saved.items():
                    logging.getLogger(name or None).setLevel(level)


_levels = _Levels()


@dataclass
class GatewayThread:
    """A gateway served in a thread of the test process, on a free loopback port: what `backchannel gateway`
    runs (`api.server.serve`: the app, the store, the home's lock and runtime file), without a Python started
    per test. The CLI finds it as it finds a gateway process. Stopped (and restarted) over its API; what needs
    a process boundary (SIGKILL, SIGTERM, a pid that ends) uses GatewayProcess."""

    root: Path
    port: int
    log_path: Path | None = None
    log_dir: Path | None = None
    thread: threading.Thread | None = None
    error: BaseException | None = None
    _handler: _ThreadLog | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ident(self) -> int | None:
        return None if self.thread is None else self.thread.ident

    @property
    def pid(self) -> int:
        return os.getpid()

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key(self.root)}", **extra}

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, *, grace: float = 5.0) -> GatewayThread:
        from backchannel.api.server import serve

        self.log_path = (self.log_dir or self.root) / f"gateway-{self.port}.log"
        self.error = None
        handler = self._handler = _ThreadLog(self, self.log_path)
        logging.getLogger().addHandler(handler)
        _levels.up()

        def run() -> None:
            _serving.set(self)
            try:
                serve(self.root, port=self.port, grace=grace, run_log=handler.file)
            except BaseException as exc:  # kept for the test to see (a thread's exception is otherwise lost)
                self.error = exc
            finally:
                _serving.set(None)

        self.thread = threading.Thread(target=run, name=f"gateway-{self.port}", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if not self.thread.is_alive():
                self._ended()
                raise RuntimeError(f"gateway exited early: {self.error!r}\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=0.5, trust_env=False).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"gateway did not come up:\n{self.log()}")

    def stop(self, timeout: float = 60.0) -> int:
        """Stop it as `backchannel gateway stop` does (POST /v1/gateway/stop) and wait until it has: 0 when it
        ended cleanly, 1 when `serve` raised (the error is in `error`)."""
        assert self.thread is not None
        if self.thread.is_alive():
            answer = httpx.post(f"{self.url}/v1/gateway/stop", headers=self.headers(), timeout=10, trust_env=False)
            assert answer.status_code == 202, answer.text
            self.thread.join(timeout)
            assert not self.thread.is_alive(), f"the gateway did not stop within {timeout} s:\n{self.log()[-3000:]}"
        self._ended()
        return 0 if self.error is None else 1

    def restart(self) -> GatewayThread:
        """A graceful stop, then a start on the same port."""
        assert self.stop() == 0, f"{self.error!r}\n{self.log()[-3000:]}"
        return self.start()

    def close(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            self.stop()
        self._ended()

    def kill(self) -> None:
        raise TypeError("an in-process gateway cannot be killed: use a GatewayProcess (the gateway_process fixture)")

    terminate = kill

    def _ended(self) -> None:
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler.close()
            self._handler = None
            _levels.down()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path and self.log_path.exists() else ""


def _with_port(root: Path, port: int) -> None:
    """config.yaml's gateway.port set to `port` (where the test's gateway listens)."""
    path = config.config_path(root)
    data = config.load_yaml(path)
    data["gateway"] = {**data["gateway"], "port": port}
    config.write_yaml(path, data)


@pytest.fixture
def gateway(initialised: Path) -> Iterator[GatewayThread]:
    """A started in-process gateway on the test's home; stopped at the end over its API."""
    gw = GatewayThread(initialised, free_port())
    _with_port(initialised, gw.port)
    gw.start()
    try:
        yield gw
    finally:
        gw.close()


@pytest.fixture
def gateway_process(initialised: Path) -> Iterator[GatewayProcess]:
    """A started `backchannel gateway` process on the test's home, for what needs a process boundary (SIGKILL,
    SIGTERM); stopped at the end with `gateway stop` (killed if that fails)."""
    gw = GatewayProcess(initialised, free_port())
    _with_port(initialised, gw.port)
    gw.start()
    try:
        yield gw
    finally:
        gw.close()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL cluster for the whole test session (tests/postgres.py: as whom it runs, where it
    listens); the tests that use it skip when PostgreSQL is not installed, unless BACKCHANNEL_REQUIRE_POSTGRES=1."""
    import postgres

    postgres.require()
    with postgres.cluster(port=free_port()) as running:
        yield running


@pytest.fixture
def postgres_url(postgres_cluster: Cluster) -> str:
    """A fresh empty database on the session's cluster, for one test: its TCP URL (with the password)."""
    return postgres_cluster.new_database()


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
