"""Doctor's checks of the home on disk: the folder, .env (its key and its mode), state.db, profiles/."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import ConfigError, StoreError
from ..home import config, profiles
from ..store import integrity
from ..store.db import Database
from .report import Check, fail, ok


def home(root: Path) -> Check:
    if root.exists() and not root.is_dir():
        return fail("home", f"{str(root)!r} is a file, not a folder", "point BACKCHANNEL_HOME at a folder")
    if not config.config_path(root).exists():
        return fail("home", f"no Backchannel home at {str(root)!r} (no config.yaml)", "backchannel init")
    return ok("home", str(root))


def env_file(root: Path) -> tuple[Check, str | None]:
    """.env parses, holds API_SERVER_KEY, and (on POSIX) only its owner may read it. Returns the key too."""
    path = config.env_path(root)
    if not path.exists():
        return fail(".env", f"{str(path)!r} is missing: the home has no API key", "backchannel init"), None
    try:
        key = config.read_env(root).get(config.API_KEY_VAR)
    except ConfigError as exc:
        return fail(".env", exc.message, f"correct or remove that line of {str(path)!r}"), None
    if not key:
        return fail(".env", f"{str(path)!r} has no {config.API_KEY_VAR}", "backchannel init (adds one)"), None
    if os.name != "posix":  # a Windows file's mode is only its read-only bit: the folder's ACL guards it
        return ok(".env", f"{config.API_KEY_VAR} set (file mode not checked on Windows)"), key
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return (
            fail(".env", f"{str(path)!r} has mode {mode:04o}: others may read the keys in it", f"chmod 600 {path}"),
            key,
        )
    return ok(".env", f"{config.API_KEY_VAR} set, mode {mode:04o}"), key


def store(root: Path, *, deep: bool = False) -> Check:
    """state.db opens (and is of a schema this Backchannel knows) and SQLite finds it intact (`quick_check`, or
    with `deep` the slower `integrity_check`); a home that never ran anything has none yet."""
    path = config.db_path(root)
    if not path.exists():
        return ok("state.db", "not created yet: the first command that needs it creates it")
    try:
        found = integrity.problems(path, deep=deep)
        if not found:
            Database(path).close()
    except StoreError as exc:
        return fail("state.db", exc.message, "stop the process that holds it, or restore it from a backup")
    check = "integrity_check" if deep else "quick_check"
    if found:
        steps = "; then ".join(integrity.recovery_commands(path))
        return fail("state.db", f"{str(path)!r} is damaged (PRAGMA {check}: {found[0]})", f"stop the gateway; {steps}")
    return ok("state.db", f"{str(path)!r} opens; PRAGMA {check}: ok")


def profiles_folder(root: Path) -> tuple[Check, list[str]]:
    base = config.profiles_dir(root)
    if not base.is_dir():
        what = "is not a folder" if base.exists() else "is missing"
        return fail("profiles", f"{str(base)!r} {what}", "backchannel init (creates profiles/default)"), []
    names = profiles.list_profiles(root)
    if profiles.DEFAULT_PROFILE not in names:
        fix = "backchannel init (creates it)"
        return fail(
            "profiles", f"no {profiles.DEFAULT_PROFILE!r} profile among: {', '.join(names) or 'none'}", fix
        ), names
    return ok("profiles", f"{len(names)}: {', '.join(names)}"), names
