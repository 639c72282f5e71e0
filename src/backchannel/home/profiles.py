"""Profiles: one agent identity each, in the Hermes Agent folder layout.

profiles/<name>/SOUL.md, memories/MEMORY.md, memories/USER.md, skills/**/SKILL.md, config.yaml.
A profile's config.yaml is re-read whenever it changes on disk (checked by mtime on every use).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError, NotFound, UsageError
from . import config, schema

EngineName = Literal["echo", "openai", "hermes"]
ENGINES: tuple[EngineName, ...] = ("echo", "openai", "hermes")
# The profile names a Hermes gateway serves under /p/<name>/ (upper case allowed there).
HERMES_PROFILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
DEFAULT_PROFILE = "default"

DEFAULT_SOUL = """# {name}

You are {name}, a persistent assistant. You keep your own memories and skills, and you answer
the person you work for clearly and briefly.
"""


@dataclass(frozen=True)
class ModelConfig:
    engine: EngineName = "echo"
    base_url: str | None = None
    model: str = ""
    api_key_env: str | None = None
    timeout_seconds: float = 120.0
    profile: str | None = None  # hermes engine: the Hermes profile, served under <base_url>/p/<profile>/


@dataclass(frozen=True)
class MessagingPolicy:
    allow: tuple[str, ...] = ()
    accept: tuple[str, ...] | None = None
    max_hops: int = 6
    pair_budget_per_hour: int = 30
    inbound_budget_per_hour: int = 120  # messages from one peer key to this profile per hour, whatever they say
    hold: tuple[str, ...] = ()  # senders whose messages wait for the person's approval
    hold_expiry_seconds: float = 86400.0  # a held message not approved by then expires


# An MCP server's name becomes the prefix of its tools' names (`<server>__<tool>`), as the model sees them.
MCP_SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


@dataclass(frozen=True)
class McpServerConfig:
    """One entry of a profile's `mcp_servers:`, in the shape Claude Code and Hermes read: a command to run
    (stdio) or a URL (streamable HTTP). `${VAR}` in args, env, url and headers is filled in when it starts."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 120.0  # seconds a tool call may take
    connect_timeout: float = 60.0  # seconds to start and list the tools


@dataclass(frozen=True)
class ProfileConfig:
    model: ModelConfig = ModelConfig()
    max_turns: int = 20
    messaging: MessagingPolicy = MessagingPolicy()
    mcp_servers: tuple[McpServerConfig, ...] = ()


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    config: ProfileConfig

    @property
    def soul_path(self) -> Path:
        return self.path / "SOUL.md"

    def memory_path(self, target: Literal["memory", "user"]) -> Path:
        return self.path / "memories" / ("MEMORY.md" if target == "memory" else "USER.md")

    @property
    def skills_dir(self) -> Path:
        return self.path / "skills"


def profile_dir(root: Path, name: str) -> Path:
    return config.profiles_dir(root) / name


OPENAI_EXAMPLE = {
    "base_url": "http://127.0.0.1:11434/v1",
    "default": "qwen2.5:7b-instruct",
    "api_key_env": "OPENAI_API_KEY",
}


HERMES_EXAMPLE = {"base_url": "http://127.0.0.1:8642", "api_key_env": "HERMES_API_SERVER_KEY"}


def default_profile_config(engine: EngineName) -> dict[str, Any]:
    """A new profile's config.yaml, written from the dataclasses' own defaults (one place for each default)."""
    model: dict[str, Any] = {"engine": engine}
    if engine == "openai":
        model.update(OPENAI_EXAMPLE)
    elif engine == "hermes":
        model.update(HERMES_EXAMPLE)
    rules = MessagingPolicy()
    return {
        "model": model,
        "agent": {
            "max_turns": ProfileConfig().max_turns,
            "session_messaging": {
                "allow": list(rules.allow),
                "accept": rules.accept,
                "max_hops": rules.max_hops,
                "pair_budget_per_hour": rules.pair_budget_per_hour,
                "inbound_budget_per_hour": rules.inbound_budget_per_hour,
                "hold": list(rules.hold),
                "hold_expiry_seconds": rules.hold_expiry_seconds,
            },
        },
    }


def create_profile(
    root: Path, name: str, *, soul: str | None = None, engine: EngineName = "echo", model: dict[str, str] | None = None
) -> Profile:
    """Create the folder layout; `model` overrides keys of the model section (base_url, default, api_key_env,
    profile)."""
    config.check_name(name)
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    settings = default_profile_config(engine)
    settings["model"].update({k: v for k, v in (model or {}).items() if v})
    path = profile_dir(root, name)
    if path.exists():
        raise UsageError(f"profile {name!r} already exists at {str(path)!r}")
    staging = path.with_name(f".{name}.creating")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "memories").mkdir(parents=True)
    (staging / "skills").mkdir()
    (staging / "SOUL.md").write_text(soul if soul is not None else DEFAULT_SOUL.format(name=name), encoding="utf-8")
    (staging / "memories" / "MEMORY.md").write_text("", encoding="utf-8")
    (staging / "memories" / "USER.md").write_text("", encoding="utf-8")
    parse_profile_config(settings, path / "config.yaml")  # refuse a config we could not load
    config.write_yaml(staging / "config.yaml", settings)
    staging.rename(path)
    return load_profile(root, name)


def remove_profile(root: Path, name: str) -> Path:
    """Set a profile's folder aside (renamed, hidden from the profile list) and return where it went.

    Nothing is deleted: the folder can be renamed back; its sessions and messages stay in the store."""
    config.check_name(name)
    if name == DEFAULT_PROFILE:
        raise UsageError(f"profile {DEFAULT_PROFILE!r} always exists and cannot be removed")
    path = profile_dir(root, name)
    if not path.is_dir():
        known = ", ".join(list_profiles(root)) or "none"
        raise NotFound(f"no profile {name!r} (profiles: {known})", code="profile_not_found")
    aside = path.with_name(f".{name}.removed-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        path.rename(aside)
    except OSError as exc:
        raise UsageError(f"cannot set {str(path)!r} aside: {exc.strerror or exc}") from exc
    _cache.pop((root, name), None)
    return aside


def list_profiles(root: Path) -> list[str]:
    base = config.profiles_dir(root)
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and config.NAME_RE.match(p.name))


_cache: dict[tuple[Path, str], tuple[tuple[int, int], Profile, str]] = {}


def load_profile(root: Path, name: str) -> Profile:
    """The profile named `name`; its config.yaml is parsed again only when it changed (one stat per use)."""
    cached = _cache.get((root, name))
    path = cached[1].path if cached is not None else profile_dir(root, config.check_name(name))
    cfg_file = cached[2] if cached is not None else str(path / "config.yaml")
    try:
        st = os.stat(cfg_file)
        stamp = (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        if not path.is_dir():
            _cache.pop((root, name), None)
            known = ", ".join(list_profiles(root)) or "none"
            raise NotFound(f"no profile {name!r} (profiles: {known})", code="profile_not_found") from None
        stamp = (0, 0)
    if cached is None or cached[0] != stamp:
        cfg_path = Path(cfg_file)
        data = config.load_yaml(cfg_path)
        profile = Profile(name=name, path=path, config=parse_profile_config(data, cfg_path))
        schema.warn_stray(data, "profile", cfg_path)
        cached = _cache[(root, name)] = (stamp, profile, cfg_file)
    return cached[1]


def config_error(root: Path, name: str) -> str | None:
    """Why the profile's config.yaml cannot be loaded right now (the error names the file), or None.

    The gateway pauses such a profile's queue instead of failing its runs; `runs list` and `doctor` say so."""
    try:
        load_profile(root, name)
    except ConfigError as exc:
        return exc.message
    except NotFound:
        return None  # a profile that is gone is not paused: its runs fail with the name of what is missing
    return None


_RULES = MessagingPolicy()


def parse_profile_config(data: dict[str, Any], path: Path) -> ProfileConfig:
    """Read our keys and tolerate everything else, so a Hermes profile's config works as it is.

    Every key has a default, so an empty (or missing) config.yaml is a profile on the defaults: the echo
    engine, and messaging that allows nothing. Unlike the home's config, it holds no identity to lose."""
    where = str(path)
    model_raw = data.get("model") or {}
    if isinstance(model_raw, str):  # Hermes allows `model: provider/name`
        model_raw = {"default": model_raw}
    if not isinstance(model_raw, dict):
        raise ConfigError(f"{where!r}: 'model' must be a mapping")
    engine = model_raw.get("engine")
    if engine is None:
        engine = "openai" if model_raw.get("base_url") else "echo"
    if engine not in ENGINES:
        raise ConfigError(f"{where!r}: model.engine {engine!r} is not one of {', '.join(ENGINES)}")
    base_url = model_raw.get("base_url")
    if engine in ("openai", "hermes") and not isinstance(base_url, str):
        raise ConfigError(f"{where!r}: model.base_url is required for the {engine} engine")
    if engine == "hermes" and isinstance(base_url, str) and not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"{where!r}: model.base_url {base_url!r} must be an http:// or https:// URL")
    hermes_profile = model_raw.get("profile") if engine == "hermes" else None
    if hermes_profile is not None and not (isinstance(hermes_profile, str) and HERMES_PROFILE_RE.match(hermes_profile)):
        raise ConfigError(f"{where!r}: model.profile {hermes_profile!r} is not a Hermes profile name")
    model = ModelConfig(
        engine=engine,
        base_url=base_url.rstrip("/") if isinstance(base_url, str) else None,
        model=str(model_raw.get("default") or model_raw.get("model") or ""),
        api_key_env=str(model_raw["api_key_env"]) if model_raw.get("api_key_env") else None,
        timeout_seconds=_number(model_raw, "timeout_seconds", ModelConfig().timeout_seconds, where, "model"),
        profile=hermes_profile,
    )
    agent = data.get("agent") or {}
    if not isinstance(agent, dict):
        raise ConfigError(f"{where!r}: 'agent' must be a mapping")
    sm = agent.get("session_messaging") or {}
    if not isinstance(sm, dict):
        raise ConfigError(f"{where!r}: agent.session_messaging must be a mapping")
    messaging = MessagingPolicy(
        allow=_patterns(sm.get("allow"), where, "allow") or (),
        accept=_patterns(sm.get("accept"), where, "accept"),
        max_hops=int(_number(sm, "max_hops", _RULES.max_hops, where, "agent.session_messaging")),
        pair_budget_per_hour=int(
            _number(sm, "pair_budget_per_hour", _RULES.pair_budget_per_hour, where, "agent.session_messaging")
        ),
        inbound_budget_per_hour=int(
            _number(sm, "inbound_budget_per_hour", _RULES.inbound_budget_per_hour, where, "agent.session_messaging")
        ),
        hold=_patterns(sm.get("hold"), where, "hold") or (),
        hold_expiry_seconds=_number(
            sm, "hold_expiry_seconds", _RULES.hold_expiry_seconds, where, "agent.session_messaging"
        ),
    )
    if messaging.hold_expiry_seconds <= 0:
        raise ConfigError(f"{where!r}: agent.session_messaging.hold_expiry_seconds must be a positive number")
    max_turns = int(_number(agent, "max_turns", ProfileConfig().max_turns, where, "agent"))
    if max_turns < 1:
        raise ConfigError(f"{where!r}: agent.max_turns must be at least 1")
    servers = _mcp_servers(data.get("mcp_servers"), where)
    return ProfileConfig(model=model, max_turns=max_turns, messaging=messaging, mcp_servers=servers)


def _mcp_servers(value: Any, where: str) -> tuple[McpServerConfig, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(f"{where!r}: 'mcp_servers' must be a mapping of server names")
    servers: list[McpServerConfig] = []
    for name, entry in value.items():
        key = f"mcp_servers.{name}"
        if not isinstance(name, str) or not MCP_SERVER_NAME_RE.match(name):
            raise ConfigError(f"{where!r}: {key}: a server name is 1-32 letters, digits, '_' or '-'")
        if not isinstance(entry, dict):
            raise ConfigError(f"{where!r}: {key} must be a mapping (command and args, or url)")
        command, url = entry.get("command"), entry.get("url")
        if (command is None) == (url is None):
            raise ConfigError(f"{where!r}: {key} needs either 'command' (stdio) or 'url' (streamable HTTP)")
        if command is not None and not (isinstance(command, str) and command):
            raise ConfigError(f"{where!r}: {key}.command must be a non-empty string")
        if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            raise ConfigError(f"{where!r}: {key}.url {url!r} must be an http:// or https:// URL")
        args = entry.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
            raise ConfigError(f"{where!r}: {key}.args must be a list of strings")
        servers.append(
            McpServerConfig(
                name=name,
                command=command,
                args=tuple(str(a) for a in args),
                env=_str_map(entry.get("env"), where, f"{key}.env"),
                url=url,
                headers=_str_map(entry.get("headers"), where, f"{key}.headers"),
                timeout=_positive(entry, "timeout", McpServerConfig.timeout, where, key),
                connect_timeout=_positive(entry, "connect_timeout", McpServerConfig.connect_timeout, where, key),
            )
        )
    return tuple(servers)


def _str_map(value: Any, where: str, key: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(v, str | int | float) for v in value.values()):
        raise ConfigError(f"{where!r}: {key} must be a mapping of names to strings")
    return tuple((str(k), str(v)) for k, v in value.items())


def _positive(section: dict[str, Any], key: str, default: float, where: str, prefix: str) -> float:
    value = _number(section, key, default, where, prefix)
    if value <= 0:
        raise ConfigError(f"{where!r}: {prefix}.{key} must be a positive number of seconds, got {value!r}")
    return value


def _patterns(value: Any, where: str, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where!r}: agent.session_messaging.{key} must be a list of patterns")
    for pattern in value:
        if (why := pattern_error(pattern)) is not None:
            raise ConfigError(f"{where!r}: agent.session_messaging.{key}: {why}")
    return tuple(value)


# One segment of an address pattern: the characters of names and session ids, and fnmatch's `* ? [ ] !`.
_SEGMENT_RE = re.compile(r"[A-Za-z0-9_.*?\[\]!-]+")
PATTERN_MAX_CHARS = 200


def pattern_error(pattern: str) -> str | None:
    """Why `pattern` is no glob over addresses (`builds`, `builds/*`, `*`, `peer:spark/*`), or None when it is one.

    The one check of a messaging pattern: the loader applies it to every list, `profile allow` to what it adds."""
    if not pattern or len(pattern) > PATTERN_MAX_CHARS:
        return f"pattern {pattern!r} must be 1-{PATTERN_MAX_CHARS} characters"
    remote = pattern.startswith("peer:")
    parts = pattern.removeprefix("peer:").split("/")
    if len(parts) > (3 if remote else 2):
        shape = "peer:name[/profile[/session-id]]" if remote else "profile[/session-id]"
        return f"pattern {pattern!r} has too many parts for an address ({shape})"
    for part in parts:
        if not _SEGMENT_RE.fullmatch(part):
            return (
                f"pattern {pattern!r} is no address pattern: each part is letters, digits, '_', '.', '-' and the "
                "glob characters * ? [ ] (no blanks)"
            )
    return None


def _number(section: dict[str, Any], key: str, default: float, where: str, prefix: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{where!r}: {prefix}.{key} must be a non-negative number, got {value!r}")
    return float(value)
