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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DiskFull, UsageError
from . import files, schema

# The home's config.yaml is declared once, in home_file; the rest of the code imports these names from here.
# Its models load (with pydantic, and YAML and .env's parsers in the functions below) when first asked for, so a
# command that reads no config (`--help`, a shell's Tab) never pays for them.
from .defaults import DEFAULT_HOST as DEFAULT_HOST
from .defaults import DEFAULT_PORT as DEFAULT_PORT
from .defaults import DURABILITIES as DURABILITIES
from .defaults import PEER_DIALECTS as PEER_DIALECTS
from .defaults import PEER_TIMEOUT_SECONDS as PEER_TIMEOUT_SECONDS
from .defaults import Durability as Durability

if TYPE_CHECKING:
    from .home_file import GatewayConfig as GatewayConfig
    from .home_file import PeerEntry as PeerEntry

_FROM_HOME_FILE = frozenset({"GatewayConfig", "PeerEntry"})


def __getattr__(name: str) -> Any:
    """The names declared in home_file, imported on first use (PEP 562)."""
    if name in _FROM_HOME_FILE:
        from . import home_file

        return getattr(home_file, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Names Windows keeps for its devices: a file or folder named so (in any case, with any extension) is the
# device, so none of them may name anything that becomes a path, on any platform (a home may move). The other
# rules Windows has for a name (no dot or space at its end, no `<>:"|?*`) the characters allowed already keep.
DEVICE_NAMES = ("con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10)))
_DEVICE = "|".join(DEVICE_NAMES)
DEVICE_NAME_RE = re.compile(rf"^(?:{_DEVICE})(?:\..*)?\Z", re.IGNORECASE)
NAME_RE = re.compile(rf"^(?!(?:{_DEVICE})\Z)[a-z0-9][a-z0-9_-]{{0,63}}\Z")  # profile, peer and key names
NAME_RULE = "1-64 characters a-z, 0-9, '-' or '_', starting with a letter or digit"
DEVICE_RULE = "con, prn, aux, nul, com0-com9 and lpt0-lpt9 name devices on Windows, never a file or folder"
API_KEY_VAR = "API_SERVER_KEY"


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
    import yaml

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
    import yaml

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


_read_envs: dict[Path, tuple[tuple[int, int, int], dict[str, str]]] = {}  # .env as last parsed, by its file's stat


def read_env(root: Path) -> dict[str, str]:
    """The home's .env as a dict; a line that does not parse is an error naming the line. Read again whenever the
    file changed (its size, time or inode: every write here replaces it), else as last parsed."""
    path = env_path(root)
    try:
        st = path.stat()
        seen = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        seen = None
    known = _read_envs.get(path)
    if seen is not None and known is not None and known[0] == seen:
        return dict(known[1])
    values = _parse_env(path)
    if seen is not None:
        _read_envs[path] = (seen, values)
    return dict(values)


def _parse_env(path: Path) -> dict[str, str]:
    from dotenv.parser import parse_stream

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
    set_env_values(root, {name: value})


def set_env_values(root: Path, values: Mapping[str, str | None]) -> None:
    """Set (or with None remove) variables in the .env of the folder `root` (this home's, or a Hermes home's) in
    one write, keeping the other lines; mode 0600."""
    path = env_path(root)
    read_env(root)  # refuse to rewrite a file we cannot parse
    lines = files.read_text(path, missing_ok=True).splitlines()
    for name, value in values.items():
        pattern = re.compile(rf"^\s*(export\s+)?{re.escape(name)}\s*=")
        lines = [line for line in lines if not pattern.match(line)]
        if value is not None:
            if any(c in value for c in "\r\n\0"):
                raise UsageError(f"the value of {name} may not contain line breaks")
            lines.append(f"{name}={_quote(value)}")
    write_atomic(path, "\n".join(lines) + "\n", mode=0o600)


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


def load_gateway_config(root: Path) -> GatewayConfig:
    """The home's config.yaml; an unknown key is logged as a warning (once), a missing gateway id is an error."""
    path = config_path(root)
    text = files.read_text(path, missing_ok=True)
    try:
        data = load_yaml_text(text, path)
    except ConfigError as exc:  # not YAML any more: what can still be read of it is kept by a repair
        raise ConfigError(f"{exc.message}; {REPAIR_HINT}") from exc
    settings = parse_gateway_config(data, path, exists=path.exists())
    schema.warn_stray(data, "home", path)
    return settings


REPAIR_HINT = (
    "run `backchannel init --repair` to rewrite it (it keeps the gateway id and the peers it can read; "
    ".env and state.db are not touched)"
)


def parse_gateway_config(data: dict[str, Any], path: Path, *, exists: bool = True) -> GatewayConfig:
    """The home config's settings (`HomeFile`); a value of the wrong kind, and (in a file that exists) no gateway
    id, are errors naming the file and the key. Unknown keys are left out (`schema` warns about them)."""
    from pydantic import ValidationError

    from .home_file import HomeFile

    gateway = data.get("gateway")
    if exists and (gateway is None or isinstance(gateway, dict)) and not (gateway or {}).get("id"):
        state = "it is empty" if not data else "it has no gateway.id (truncated, or edited by hand?)"
        raise ConfigError(f"{str(path)!r} is not a usable home config: {state}; {REPAIR_HINT}")
    try:
        return HomeFile.model_validate(schema.known(data, "home")).settings()
    except ValidationError as exc:
        raise schema.refusal(exc, data, "home", path) from None


def default_home_config() -> dict[str, Any]:
    """A new home's config.yaml, written from the model's own defaults, with a fresh gateway id."""
    from .home_file import GatewaySettings

    defaults = GatewaySettings()
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
