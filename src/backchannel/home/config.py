"""Where files live and what the home's config.yaml and .env say.

One function knows the home (`home()`); every path is derived from it, so `BACKCHANNEL_HOME`
moves the whole installation.
"""

from __future__ import annotations

import errno
import io
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import yaml
from dotenv.parser import parse_stream

from ..errors import ConfigError, DiskFull, UsageError
from . import files, schema
from .push_settings import PushSettings, parse_push_settings

# Names Windows keeps for its devices: a file or folder named so (in any case, with any extension) is the
# device, so none of them may name anything that becomes a path, on any platform (a home may move). The other
# rules Windows has for a name (no dot or space at its end, no `<>:"|?*`) the characters allowed already keep.
DEVICE_NAMES = ("con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10)))
_DEVICE = "|".join(DEVICE_NAMES)
DEVICE_NAME_RE = re.compile(rf"^(?:{_DEVICE})(?:\..*)?\Z", re.IGNORECASE)
NAME_RE = re.compile(rf"^(?!(?:{_DEVICE})\Z)[a-z0-9][a-z0-9_-]{{0,63}}\Z")  # profile, peer and key names
NAME_RULE = "1-64 characters a-z, 0-9, '-' or '_', starting with a letter or digit"
DEVICE_RULE = "con, prn, aux, nul, com0-com9 and lpt0-lpt9 name devices on Windows, never a file or folder"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8377
API_KEY_VAR = "API_SERVER_KEY"
Durability = Literal["normal", "full"]  # gateway.durability: PRAGMA synchronous NORMAL or FULL
DURABILITIES: tuple[Durability, ...] = ("normal", "full")


def home() -> Path:
    raw = os.environ.get("BACKCHANNEL_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".backchannel"


def config_path(root: Path) -> Path:
    return root / "config.yaml"


def env_path(root: Path) -> Path:
    return root / ".env"


def db_path(root: Path) -> Path:
    return root / "state.db"


def web_secret_path(root: Path) -> Path:
    """The key the web view signs its session cookies with (made on the gateway's first start, 0600)."""
    return root / "web.secret"


def profiles_dir(root: Path) -> Path:
    return root / "profiles"


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a profile, a peer or a key (None when it can)."""
    if DEVICE_NAME_RE.match(name):
        return f"{DEVICE_RULE}: choose another name"
    if not NAME_RE.match(name):
        return f"use {NAME_RULE}"
    return None


def check_name(name: str, *, what: str = "profile") -> str:
    problem = name_problem(name)
    if problem is not None:
        raise UsageError(f"invalid {what} name {name!r}: {problem}")
    return name


def require_home(root: Path) -> None:
    if not config_path(root).exists():
        raise UsageError(f"no Backchannel home at {str(root)!r}: run `backchannel init` first")


def load_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file is empty, a broken one names the file and line."""
    return load_yaml_text(files.read_text(path, missing_ok=True), path)


def load_yaml_text(text: str, path: Path) -> dict[str, Any]:
    """A YAML mapping from the text of `path` (named in the error when it is broken)."""
    if not text:
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{str(path)!r}{where}: {exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{str(path)!r}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{str(path)!r}: expected a mapping at the top, got {type(data).__name__}")
    return data


def write_yaml(path: Path, data: dict[str, Any], *, mode: int = 0o600) -> None:
    write_atomic(path, yaml.safe_dump(data, sort_keys=False), mode=mode)


def write_atomic(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Replace `path` with `text` at once (a temporary file beside it, then a rename): whatever fails, a
    full disk included, the old file is left as it was and the error names the file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise _write_error(path, exc) from exc
    try:
        if hasattr(os, "fchmod"):  # POSIX; on Windows a file's mode is only its read-only bit
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())  # the new text is on disk before it replaces the old
        _replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _write_error(path, exc) from exc
        raise


# Windows refuses to replace a file that another process holds open (PermissionError, WinError 5 or 32): another
# backchannel reading config.yaml or .env at that moment, an editor, a virus scan. That lasts a moment: retried
# for this long, then reported. POSIX replaces an open file at once, so a PermissionError there is final.
REPLACE_RETRY_SECONDS = 2.0 if os.name == "nt" else 0.0


def _replace(tmp: str, path: Path) -> None:
    deadline = time.monotonic() + REPLACE_RETRY_SECONDS
    delay = 0.01
    while True:
        try:
            os.replace(tmp, path)
            return
        except PermissionError:
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _write_error(path: Path, exc: OSError) -> ConfigError | DiskFull:
    if exc.errno == errno.ENOSPC:
        return DiskFull(f"cannot write {str(path)!r}: the disk is full; free some space and try again (unchanged)")
    return ConfigError(f"cannot write {str(path)!r}: {exc.strerror or type(exc).__name__} (unchanged)")


# --- .env ------------------------------------------------------------------------------------


def read_env(root: Path) -> dict[str, str]:
    """The home's .env as a dict; a line that does not parse is an error naming the line."""
    path = env_path(root)
    text = files.read_text(path, missing_ok=True)
    values: dict[str, str] = {}
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            raise ConfigError(
                f"{str(path)!r} line {binding.original.line}: cannot parse "
                f"{binding.original.string.strip()[:40]!r} (expected NAME=value)"
            )
        if binding.key is not None and binding.value is not None:
            values[binding.key] = binding.value
    return values


def set_env_value(root: Path, name: str, value: str | None) -> None:
    """Set (or with None remove) one variable in .env, keeping the other lines; mode 0600."""
    path = env_path(root)
    read_env(root)  # refuse to rewrite a file we cannot parse
    lines = files.read_text(path, missing_ok=True).splitlines()
    pattern = re.compile(rf"^\s*(export\s+)?{re.escape(name)}\s*=")
    kept = [line for line in lines if not pattern.match(line)]
    if value is not None:
        if any(c in value for c in "\r\n\0"):
            raise UsageError(f"the value of {name} may not contain line breaks")
        kept.append(f"{name}={_quote(value)}")
    write_atomic(path, "\n".join(kept) + "\n", mode=0o600)


def _quote(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./:@+-]*", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def secret_value(root: Path, name: str) -> str | None:
    """A secret by variable name: the home's .env first, then the process environment."""
    return read_env(root).get(name) or os.environ.get(name) or None


def new_api_key() -> str:
    return "bc_" + secrets.token_urlsafe(32)


# --- the home's config.yaml --------------------------------------------------------------------


PEER_TIMEOUT_SECONDS = 30.0  # a peer that accepts and says nothing is given up on after this (outcome unknown)


@dataclass(frozen=True)
class PeerEntry:
    url: str
    note: str = ""
    gateway_id: str | None = None
    timeout_seconds: float = PEER_TIMEOUT_SECONDS
    dialect: str = "hermes"  # how it is spoken to: the Hermes API-server dialect, or A2A (`a2a_url`, from its card)
    a2a_url: str | None = None


PEER_DIALECTS = ("hermes", "a2a")


@dataclass(frozen=True)
class GatewayConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    gateway_id: str = ""
    dedup_window_seconds: int = 900
    max_concurrent_turns: int = 32
    run_ttl_seconds: int = 3600
    max_attempts: int = 3
    http_wait_seconds: float = 600.0
    max_body_bytes: int = 1_048_576
    durability: Durability = "normal"
    # Limits no sender can exhaust (README "Limits"); the HTTP ones bound every connection.
    max_header_bytes: int = 65_536
    max_headers: int = 100
    header_timeout_seconds: int = 10
    body_timeout_seconds: int = 30
    keepalive_timeout_seconds: int = 5
    max_connections: int = 1024
    max_queued_per_session: int = 100
    max_runs_per_sender_per_minute: int = 120
    max_turns_per_profile: int = 0  # 0: half of max_concurrent_turns (at least 1)
    max_sessions_per_profile: int = 10_000
    peers: dict[str, PeerEntry] = field(default_factory=dict)
    push: PushSettings = field(default_factory=PushSettings)  # gateway.a2a: A2A push notifications

    @property
    def turns_per_profile(self) -> int:
        """The turn slots one profile may hold at once, so another profile's turns always find one."""
        total = max(1, self.max_concurrent_turns)
        share = self.max_turns_per_profile or total // 2
        return max(1, min(share, total))


def load_gateway_config(root: Path) -> GatewayConfig:
    """The home's config.yaml; an unknown key is logged as a warning (once), a missing gateway id is an error."""
    path = config_path(root)
    data = load_yaml(path)
    settings = parse_gateway_config(data, path, exists=path.exists())
    schema.warn_stray(data, "home", path)
    return settings


REPAIR_HINT = (
    "run `backchannel init --repair` to rewrite it (it keeps the gateway id and the peers it can read; "
    ".env and state.db are not touched)"
)


def parse_gateway_config(data: dict[str, Any], path: Path, *, exists: bool = True) -> GatewayConfig:
    """Read the home config's keys; values of the wrong type, and (in a file that exists) no gateway id, are errors."""
    gw = data.get("gateway") or {}
    if not isinstance(gw, dict):
        raise ConfigError(f"{str(path)!r}: 'gateway' must be a mapping")
    if exists and not gw.get("id"):
        state = "it is empty" if not data else "it has no gateway.id (truncated, or edited by hand?)"
        raise ConfigError(f"{str(path)!r} is not a usable home config: {state}; {REPAIR_HINT}")
    peers_raw = data.get("peers") or {}
    if not isinstance(peers_raw, dict):
        raise ConfigError(f"{str(path)!r}: 'peers' must be a mapping")
    peers: dict[str, PeerEntry] = {}
    for name, entry in peers_raw.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise ConfigError(f"{str(path)!r}: peer {name!r} needs a 'url'")
        timeout = entry.get("timeout_seconds", PEER_TIMEOUT_SECONDS)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(
                f"{str(path)!r}: peer {name!r}: timeout_seconds must be a positive number, got {timeout!r}"
            )
        dialect = entry.get("dialect") or "hermes"  # a peer file from before A2A: the Hermes dialect
        a2a_url = entry.get("a2a_url")
        if dialect not in PEER_DIALECTS:
            raise ConfigError(
                f"{str(path)!r}: peer {name!r}: dialect must be one of {', '.join(PEER_DIALECTS)}, got {dialect!r}"
            )
        if dialect == "a2a" and not (isinstance(a2a_url, str) and a2a_url):
            raise ConfigError(
                f"{str(path)!r}: peer {name!r}: an a2a peer needs its a2a_url (run `backchannel peer add` again)"
            )
        peers[str(name)] = PeerEntry(
            url=entry["url"],
            note=str(entry.get("note") or ""),
            gateway_id=entry.get("gateway_id") or None,
            timeout_seconds=float(timeout),
            dialect=str(dialect),
            a2a_url=str(a2a_url) if dialect == "a2a" else None,
        )
    defaults = GatewayConfig()
    durability = gw.get("durability", defaults.durability)
    if durability not in DURABILITIES:
        raise ConfigError(
            f"{str(path)!r}: gateway.durability must be one of {', '.join(DURABILITIES)}, got {durability!r}"
        )
    try:
        return GatewayConfig(
            host=str(gw.get("host", defaults.host)),
            port=_int(gw, "port", defaults.port, path),
            gateway_id=str(gw.get("id", "")),
            dedup_window_seconds=_int(gw, "dedup_window_seconds", defaults.dedup_window_seconds, path),
            max_concurrent_turns=_int(gw, "max_concurrent_turns", defaults.max_concurrent_turns, path),
            run_ttl_seconds=_int(gw, "run_ttl_seconds", defaults.run_ttl_seconds, path),
            max_attempts=_int(gw, "max_attempts", defaults.max_attempts, path),
            http_wait_seconds=float(_int(gw, "http_wait_seconds", int(defaults.http_wait_seconds), path)),
            max_body_bytes=_int(gw, "max_body_bytes", defaults.max_body_bytes, path),
            durability=cast(Durability, durability),
            **cast(
                dict[str, Any],
                {name: _int(gw, name, getattr(defaults, name), path, positive=name not in _ZERO_OK) for name in LIMITS},
            ),
            peers=peers,
            push=parse_push_settings(gw, path),
        )
    except ValueError as exc:
        raise ConfigError(f"{str(path)!r}: {exc}") from exc


LIMITS = schema.GATEWAY_LIMITS
_ZERO_OK = {"max_turns_per_profile"}


def _int(section: dict[str, Any], key: str, default: int, path: Path, *, positive: bool = False) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        kind = "positive" if positive else "non-negative"
        raise ConfigError(f"{str(path)!r}: gateway.{key} must be a {kind} integer, got {value!r}")
    return value


def default_home_config() -> dict[str, Any]:
    """A new home's config.yaml, written from GatewayConfig's own defaults, with a fresh gateway id."""
    defaults = GatewayConfig()
    return {
        "gateway": {
            "host": defaults.host,
            "port": defaults.port,
            "id": "gw-" + secrets.token_hex(4),
            "dedup_window_seconds": defaults.dedup_window_seconds,
            "max_concurrent_turns": defaults.max_concurrent_turns,
        },
        "peers": {},
    }
