"""Where this home's gateway listens: a lock one gateway holds while it runs, and a runtime file beside it.

`gateway.lock` is locked by the running gateway (released by the OS when the process ends, whatever
ends it), so a second gateway on the same home refuses to start. `gateway.json` says where it listens
and its pid, so the CLI finds it whatever port it was started on, and a public fingerprint (`instance`,
random at each start, also answered by `/health` without a key): the CLI sends the key only to a port
whose `/health` names this instance, never to whatever else listens there.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from .. import procs
from ..errors import UsageError
from .config import write_atomic

RUNTIME_FILE = "gateway.json"
LOCK_FILE = "gateway.lock"


@dataclass(frozen=True)
class Listening:
    """A running gateway of this home: its process and the address it serves."""

    pid: int
    host: str
    port: int
    gateway_id: str
    started_at: float
    instance: str = ""

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"


def listening(root: Path) -> Listening | None:
    """The gateway this home's runtime file names, if its process is alive; None otherwise."""
    try:
        data: Any = json.loads((root / RUNTIME_FILE).read_text(encoding="utf-8"))
        found = Listening(
            pid=int(data["pid"]),
            host=str(data["host"]),
            port=int(data["port"]),
            gateway_id=str(data.get("gateway_id") or ""),
            started_at=float(data.get("started_at") or 0),
            instance=str(data.get("instance") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, or left half-written by a crash: as good as none
    return found if procs.alive(found.pid) else None


class GatewayLock:
    """Held by the one gateway of a home from before it binds until it has stopped."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._file: IO[str] | None = None
        self._published = False

    def acquire(self) -> None:
        path = self.root / LOCK_FILE
        handle = path.open("a+", encoding="utf-8")
        try:
            _lock(handle)
        except OSError:
            handle.close()
            other = listening(self.root)
            where = f" (pid {other.pid}, {other.url})" if other is not None else ""
            raise UsageError(
                f"another gateway is already running on the home {str(self.root)!r}{where}; "
                "stop it first, or give this one its own BACKCHANNEL_HOME"
            ) from None
        self._file = handle

    def publish(self, *, host: str, port: int, gateway_id: str, instance: str = "") -> None:
        """Say where this gateway listens (once it is bound), and the instance its /health names."""
        record = Listening(
            pid=os.getpid(), host=host, port=port, gateway_id=gateway_id, started_at=time.time(), instance=instance
        )
        write_atomic(self.root / RUNTIME_FILE, json.dumps(asdict(record)) + "\n", mode=0o600)
        self._published = True

    def release(self) -> None:
        if self._published:
            # A CLI reading it this moment keeps it on Windows: a runtime file left behind names a pid that
            # is gone, which `listening` takes for none.
            with contextlib.suppress(OSError):
                (self.root / RUNTIME_FILE).unlink(missing_ok=True)
            self._published = False
        if self._file is not None:
            self._file.close()  # closing the file releases the lock
            self._file = None


def held(root: Path) -> bool:
    """Whether a gateway holds this home's lock now (one is running, or still stopping).

    It is asked by taking the lock and letting it go at once: a gateway starting in that instant would find
    it taken and refuse to start, as it would beside a running one."""
    path = root / LOCK_FILE
    try:
        handle = path.open("r+", encoding="utf-8")
    except FileNotFoundError:
        return False  # no gateway ever ran on this home
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc.strerror or type(exc).__name__}") from exc
    with handle:
        try:
            _lock(handle)
        except OSError:
            return True
        _unlock(handle)
        return False


def _lock(handle: IO[str]) -> None:
    """Lock the file without waiting; OSError when another process holds it."""
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def _unlock(handle: IO[str]) -> None:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
