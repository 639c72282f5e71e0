"""Doctor's checks of the config files: the home's config.yaml and each profile's, values and keys alike."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..home import config, profiles, schema
from ..home.profiles import Profile
from .report import Check, fail, ok, warn


def home_config(root: Path) -> tuple[list[Check], config.GatewayConfig | None]:
    """The home's config.yaml: it loads, it has a gateway id, every key is one Backchannel reads."""
    path = config.config_path(root)
    try:
        data = config.load_yaml(path)
        settings = config.parse_gateway_config(data, path)
    except ConfigError as exc:
        return [fail("config.yaml", exc.message, "backchannel init --repair")], None
    checks = [_stray(s, "config.yaml") for s in schema.stray_keys(data, "home", path)]
    peers = len(settings.peers)
    where = f"gateway {settings.gateway_id} on {settings.host}:{settings.port}, {peers} peer{'s' * (peers != 1)}"
    return checks or [ok("config.yaml", where)], settings


def profile_config(root: Path, name: str) -> tuple[list[Check], Profile | None]:
    """One profile's config.yaml: it loads, its values are valid, its keys are Backchannel's (or Hermes')."""
    check = f"profile {name}"
    path = profiles.profile_dir(root, name) / "config.yaml"
    try:
        data = config.load_yaml(path)
        parsed = profiles.parse_profile_config(data, path)
    except ConfigError as exc:
        paused = f"{exc.message}; its queued runs are paused until the file is valid again"
        return [fail(check, paused, f"correct {str(path)!r}")], None
    strays = schema.stray_keys(data, "profile", path)
    checks = [_stray(s, check) for s in strays if not s.hermes]
    ignored = [s.key for s in strays if s.hermes]
    if not data:
        state = "is empty" if path.exists() else "is missing"
        checks.insert(
            0,
            warn(
                check,
                f"{str(path)!r} {state}: the defaults apply (engine echo; messaging allows nothing)",
                f"backchannel profile show {name} shows them; write the keys you want into {str(path)!r}",
            ),
        )
    elif not checks:
        checks.append(ok(check, _summary(parsed) + (f"; ignores Hermes keys: {', '.join(ignored)}" if ignored else "")))
    return checks, Profile(name=name, path=path.parent, config=parsed)


def stray_folders(root: Path) -> list[Check]:
    """Folders under profiles/ that are not profiles (a name Backchannel cannot use): they are ignored."""
    base = config.profiles_dir(root)
    found = []
    for entry in sorted(base.iterdir()) if base.is_dir() else []:
        problem = config.name_problem(entry.name)
        if entry.is_dir() and not entry.name.startswith(".") and problem is not None:
            found.append(
                warn("profiles", f"folder {entry.name!r} is not a valid profile name, so it is ignored", problem)
            )
    return found


def _summary(cfg: profiles.ProfileConfig) -> str:
    model = cfg.model
    engine = f"engine {model.engine}" + (f", model {model.model!r} at {model.base_url}" if model.base_url else "")
    allowed = ", ".join(cfg.messaging.allow) or "nothing"
    return f"{engine}; messaging allows {allowed}"


def _stray(stray: schema.StrayKey, check: str) -> Check:
    where = repr(str(stray.path))
    fix = f"rename it to {stray.closest!r} in {where}" if stray.closest else f"remove it from {where}"
    return fail(check, f"{where}: {stray.what}", fix)
