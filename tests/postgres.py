"""A throwaway PostgreSQL cluster for the tests and the benches: Debian's server binaries (`make postgres`), a data
directory in a temporary folder, a Unix socket in that folder and a free loopback port, stopped and removed at the end.

PostgreSQL refuses to run as root. When the tests run as root (a developer's machine here, CI), `initdb`, `pg_ctl`
and so the server run as the unprivileged user BACKCHANNEL_PG_OS_USER (default `nobody`) through `runuser`, and
the temporary folder is given to that user; an ordinary user runs them as itself. Connections over the socket are
trusted (the folder is private to the cluster's user, and root); over TCP they need the cluster's password, made
anew for each cluster.

Missing binaries skip the tests that need a cluster, with the reason, unless BACKCHANNEL_REQUIRE_POSTGRES=1 (then
they fail). BACKCHANNEL_PG_BIN names another folder of server binaries. Linux (and POSIX) only: on Windows the
PostgreSQL tests skip.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

PG_VERSION = "15"
DEFAULT_BIN = Path(f"/usr/lib/postgresql/{PG_VERSION}/bin")
BIN_VAR = "BACKCHANNEL_PG_BIN"
REQUIRE_VAR = "BACKCHANNEL_REQUIRE_POSTGRES"
OS_USER_VAR = "BACKCHANNEL_PG_OS_USER"
DEFAULT_OS_USER = "nobody"
SUPERUSER = "backchannel"  # the cluster's database superuser
START_SECONDS = 60  # how long `pg_ctl start` may wait for the server to accept connections (a loaded machine)

# The tests' cluster skips the disk flushes: the tests are about what a commit means, not about power losses.
TEST_SETTINGS: Mapping[str, str] = {"fsync": "off", "full_page_writes": "off"}


@dataclass(frozen=True)
class Cluster:
    """A running throwaway cluster: where it lives, how to reach it, and as whom it runs."""

    base: Path  # the temporary folder: data/, the socket, the log
    bin_dir: Path
    port: int
    password: str
    os_user: str | None  # the user it runs as when the tests run as root (None: the tests' own user)

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def socket_dir(self) -> Path:
        return self.base

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    def url(self, database: str = "postgres") -> str:
        """A URL over TCP on the loopback port, with the password (what a gateway's config would name)."""
        return f"postgresql://{SUPERUSER}:{quote(self.password, safe='')}@127.0.0.1:{self.port}/{database}"

    def socket_url(self, database: str = "postgres") -> str:
        """A URL over the Unix socket (no password: the socket's folder is private)."""
        return f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.socket_dir), safe='')}&port={self.port}"

    def psql(self, sql: str, *, database: str = "postgres") -> str:
        """Run SQL through psql over the socket; its output unaligned, without headers. Raises on an error."""
        done = subprocess.run(
            [str(self.bin_dir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", str(self.socket_dir), "-p", str(self.port), "-U", SUPERUSER, "-d", database, "-c", sql],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"psql on the test cluster failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout.strip()

    def new_database(self, prefix: str = "test") -> str:
        """A new empty database under a name of its own; returns its TCP URL."""
        name = f"{prefix}_{secrets.token_hex(6)}"
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError as exc:
            return f"(no server log: {exc})"


def bin_dir() -> Path:
    return Path(os.environ.get(BIN_VAR) or DEFAULT_BIN)


def missing_reason() -> str | None:
    """Why no cluster can be started here (None: it can)."""
    if sys.platform == "win32":
        return "the PostgreSQL tests run on Linux (Debian's server binaries)"
    where = bin_dir()
    for tool in ("initdb", "pg_ctl", "postgres", "psql"):
        if not (where / tool).is_file():
            return f"no PostgreSQL {PG_VERSION} server: {where / tool} is missing (run `make postgres`)"
    if _is_root() and _os_user() is None:
        name = os.environ.get(OS_USER_VAR) or DEFAULT_OS_USER
        return f"running as root, and there is no user {name!r} to run PostgreSQL as (set {OS_USER_VAR})"
    if _is_root() and shutil.which("runuser") is None:
        return "running as root, and no `runuser` to run PostgreSQL as an unprivileged user"
    return None


def require() -> None:
    """Skip the calling test (fail it under BACKCHANNEL_REQUIRE_POSTGRES=1) when no cluster can be started."""
    why = missing_reason()
    if why is None:
        return
    if os.environ.get(REQUIRE_VAR) == "1":
        pytest.fail(f"{REQUIRE_VAR}=1 but {why}")
    pytest.skip(why)


@contextmanager
def cluster(settings: Mapping[str, str] = TEST_SETTINGS, *, port: int | None = None) -> Iterator[Cluster]:
    """Start a cluster (see the module's docstring), yield it, stop it and remove its folder."""
    base = Path(tempfile.mkdtemp(prefix="backchannel-pg-"))
    try:
        running = _start(base, settings, port)
        try:
            yield running
        finally:
            _stop(running)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _start(base: Path, settings: Mapping[str, str], port: int | None) -> Cluster:
    os_user = _os_user() if _is_root() else None
    password = secrets.token_urlsafe(18)
    pwfile = base / "pwfile"
    pwfile.write_text(password + "\n")
    if os_user is not None:
        _give(base, os_user)
    data = base / "data"
    _run(
        os_user,
        [str(bin_dir() / "initdb"), "-D", str(data), "-U", SUPERUSER, f"--pwfile={pwfile}", "--auth-local=trust",
         "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
        "initdb",
    )  # fmt: skip
    pwfile.unlink()
    port = port or _free_port()  # the tests pass one of their process's own (conftest.free_port)
    conf = {
        "listen_addresses": "'127.0.0.1'",
        "port": str(port),
        "unix_socket_directories": f"'{base}'",
        "max_connections": "100",
        **settings,
    }
    with (data / "postgresql.conf").open("a", encoding="utf-8") as f:  # the file stays its owner's
        f.write("\n# the Backchannel tests' throwaway cluster\n")
        f.writelines(f"{key} = {value}\n" for key, value in conf.items())
    running = Cluster(base=base, bin_dir=bin_dir(), port=port, password=password, os_user=os_user)
    _run(
        os_user,
        [str(bin_dir() / "pg_ctl"), "start", "-D", str(data), "-l", str(running.log), "-w", "-t", str(START_SECONDS)],
        "pg_ctl start",
        log=running.log,
    )
    return running


def stop_server(running: Cluster) -> None:
    """Stop the cluster's server (fast: its connections are cut), keeping its data for `start_server`."""
    _stop(running)


def start_server(running: Cluster) -> None:
    """Start a stopped cluster's server again, on the same port and data."""
    _run(
        running.os_user,
        [str(running.bin_dir / "pg_ctl"), "start", "-D", str(running.data), "-l", str(running.log), "-w", "-t",
         str(START_SECONDS)],
        "pg_ctl start",
        log=running.log,
    )  # fmt: skip


def _stop(running: Cluster) -> None:
    _run(
        running.os_user,
        [str(running.bin_dir / "pg_ctl"), "stop", "-D", str(running.data), "-m", "fast", "-w", "-t", "60"],
        "pg_ctl stop",
        log=running.log,
    )


def _run(os_user: str | None, argv: list[str], what: str, *, log: Path | None = None) -> None:
    if os_user is not None:
        argv = ["runuser", "-u", os_user, "--", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = ""
        if log is not None:
            with suppress(OSError):
                tail = "\nserver log:\n" + log.read_text(errors="replace")[-4000:]
        raise RuntimeError(f"{what} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}{tail}")


def _is_root() -> bool:
    geteuid = getattr(os, "geteuid", None)  # POSIX only
    return geteuid is not None and geteuid() == 0


def _os_user() -> str | None:
    """The unprivileged user the cluster runs as under root, when it exists."""
    name = os.environ.get(OS_USER_VAR) or DEFAULT_OS_USER
    try:
        import pwd  # POSIX only
    except ImportError:
        return None
    try:
        pwd.getpwnam(name)
    except KeyError:
        return None
    return name


def _give(base: Path, os_user: str) -> None:
    """Hand the temporary folder (and what is in it) to the cluster's user; it stays private to that user."""
    shutil.chown(base, user=os_user)
    for path in base.iterdir():
        shutil.chown(path, user=os_user)
    base.chmod(0o700)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
