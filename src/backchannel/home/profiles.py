"""Profiles: one agent identity each, in the Hermes Agent folder layout.

profiles/<name>/SOUL.md, memories/MEMORY.md, memories/USER.md, skills/**/SKILL.md, config.yaml.
A profile's config.yaml is re-read whenever it changes on disk (checked by mtime on every use).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, NotFound, UsageError
from . import config, schema

# A profile's config.yaml is declared once, in profile_file; the rest of the code imports these names from here.
# They load (with pydantic) when first asked for, as home.config's do.
from .defaults import ENGINES as ENGINES
from .defaults import EngineName as EngineName

if TYPE_CHECKING:
    from .profile_file import HERMES_PROFILE_RE as HERMES_PROFILE_RE
    from .profile_file import MCP_SERVER_NAME_RE as MCP_SERVER_NAME_RE
    from .profile_file import PATTERN_MAX_CHARS as PATTERN_MAX_CHARS
    from .profile_file import McpServerConfig as McpServerConfig
    from .profile_file import MessagingPolicy as MessagingPolicy
    from .profile_file import ModelConfig as ModelConfig
    from .profile_file import ProfileConfig as ProfileConfig
    from .profile_file import pattern_error as pattern_error

_FROM_PROFILE_FILE = frozenset(
    {
        "HERMES_PROFILE_RE",
        "MCP_SERVER_NAME_RE",
        "PATTERN_MAX_CHARS",
        "McpServerConfig",
        "MessagingPolicy",
        "ModelConfig",
        "ProfileConfig",
        "pattern_error",
    }
)


def __getattr__(name: str) -> Any:
    """The names declared in profile_file, imported on first use (PEP 562)."""
    if name in _FROM_PROFILE_FILE:
        from . import profile_file

        return getattr(profile_file, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_PROFILE = "default"

DEFAULT_SOUL = """# {name}

You are {name}, a persistent assistant. You keep your own memories and skills, and you answer
the person you work for clearly and briefly.
"""


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
    """A new profile's config.yaml, written from the model's own defaults (one place for each default)."""
    model: dict[str, Any] = {"engine": engine}
    if engine == "openai":
        model.update(OPENAI_EXAMPLE)
    elif engine == "hermes":
        model.update(HERMES_EXAMPLE)
    from .profile_file import MessagingPolicy, ProfileConfig

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


def parse_profile_config(data: dict[str, Any], path: Path) -> ProfileConfig:
    """A profile's settings (`ProfileConfig`): our keys are checked, everything else is left out (and warned about
    by `schema`, unless it is a Hermes key), so a Hermes profile's config works as it is. Every key has a default,
    so an empty (or missing) config.yaml is a profile on the defaults; it holds no identity to lose."""
    from pydantic import ValidationError

    from .profile_file import ProfileConfig

    try:
        return ProfileConfig.model_validate(schema.known(data, "profile"))
    except ValidationError as exc:
        raise schema.refusal(exc, data, "profile", path) from None
