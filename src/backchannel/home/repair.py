"""Rewriting a broken home config.yaml from what can still be read of it (`backchannel init --repair`).

The gateway id (peers know this gateway by it) and the peers are kept when they can be read, each
gateway setting that still parses is kept, and everything else starts from the defaults. The broken
file is kept beside the new one; .env (the key) and state.db are never touched.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, UsageError
from . import config, files, peers, schema

_ID_LINE = re.compile(r"^\s+id:\s*['\"]?([A-Za-z0-9_.:-]+)", re.MULTILINE)


@dataclass(frozen=True)
class Repaired:
    """What `repair_home_config` kept of the old file, what it could not keep, and where the old file went."""

    path: Path
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    backup: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "kept": self.kept,
            "dropped": self.dropped,
            "backup": str(self.backup) if self.backup else None,
        }


def repair_home_config(root: Path) -> Repaired | None:
    """Rewrite the home's config.yaml when it cannot be loaded; None when it loads (nothing to repair)."""
    path = config.config_path(root)
    text = files.read_text(path, missing_ok=True)
    try:
        old: dict[str, Any] | None = config.load_yaml(path)
    except ConfigError:
        old = None  # not YAML any more: only the gateway id can be picked out of the text
    if old is not None and path.exists():
        try:
            config.parse_gateway_config(old, path)
            return None
        except ConfigError:
            pass
    fresh = config.default_home_config()
    kept: list[str] = []
    dropped: list[str] = []
    if old is None:
        found = _ID_LINE.search(text)
        if found:
            fresh["gateway"]["id"] = found.group(1)
            kept.append(f"gateway id {found.group(1)}")
        dropped.append("the rest of the file (it is not YAML)")
    else:
        _keep_gateway(old.get("gateway"), fresh, path, kept, dropped)
        _keep_store(old.get("store"), fresh, path, kept, dropped)
        _keep_peers(old.get("peers"), fresh, kept, dropped)
        dropped.extend(f"key {k!r}" for k in old if k not in schema.tree("home"))
    if not any(item.startswith("gateway id") for item in kept):
        dropped.append(f"a gateway id (none could be read; the new one is {fresh['gateway']['id']})")
    config.parse_gateway_config(fresh, path)  # what is written loads
    backup = _set_aside(path, text) if text.strip() else None
    config.write_yaml(path, fresh)
    return Repaired(path, kept, dropped, backup)


def _set_aside(path: Path, text: str) -> Path:
    """A copy of the broken file beside it, under a name no earlier repair used."""
    stem = f"{path.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}"
    backup, n = path.with_name(stem), 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{stem}-{n}")
    config.write_atomic(backup, text, mode=0o600)
    return backup


def _keep_gateway(old: Any, fresh: dict[str, Any], path: Path, kept: list[str], dropped: list[str]) -> None:
    if not isinstance(old, dict):
        if old is not None:
            dropped.append("the gateway section (not a mapping)")
        return
    known = schema.tree("home")["gateway"] or {}
    for key, value in old.items():
        if key not in known:
            dropped.append(f"gateway.{key} (not a setting)")
            continue
        if key == "id":
            if isinstance(value, str) and value.strip():
                fresh["gateway"]["id"] = value.strip()
                kept.append(f"gateway id {value.strip()}")
            else:
                dropped.append(f"gateway.id {value!r}")
            continue
        trial = {"gateway": {"id": "trial", key: value}}
        try:
            config.parse_gateway_config(trial, path)
        except ConfigError:
            dropped.append(f"gateway.{key} {value!r} (not a valid value)")
            continue
        fresh["gateway"][key] = value
        kept.append(f"gateway.{key}")


def _keep_store(old: Any, fresh: dict[str, Any], path: Path, kept: list[str], dropped: list[str]) -> None:
    """The store section's valid settings: a shared store's URL above all (without it the home would start on a
    new, empty state.db of its own)."""
    if not isinstance(old, dict):
        if old is not None:
            dropped.append("the store section (not a mapping)")
        return
    known = schema.tree("home")["store"] or {}
    for key, value in old.items():
        if key not in known:
            dropped.append(f"store.{key} (not a setting)")
            continue
        try:
            config.parse_gateway_config({"gateway": {"id": "trial"}, "store": {key: value}}, path)
        except ConfigError:
            dropped.append(f"store.{key} (not a valid value)")
            continue
        fresh.setdefault("store", {})[key] = value
        kept.append(f"store.{key}")


def _keep_peers(old: Any, fresh: dict[str, Any], kept: list[str], dropped: list[str]) -> None:
    if not isinstance(old, dict):
        if old is not None:
            dropped.append("the peers section (not a mapping)")
        return
    for name, entry in old.items():
        try:
            config.check_name(str(name), what="peer")
            if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
                raise UsageError("no url")
            url = peers.check_url(entry["url"])
        except UsageError:
            dropped.append(f"peer {name!r} (no valid name and url)")
            continue
        keep: dict[str, Any] = {"url": url, "note": str(entry.get("note") or "")}
        if isinstance(entry.get("gateway_id"), str) and entry["gateway_id"]:
            keep["gateway_id"] = entry["gateway_id"]
        more = entry.get("failover_urls")
        if isinstance(more, list):
            try:
                keep["failover_urls"] = [peers.check_url(str(u)) for u in more]
            except UsageError:
                dropped.append(f"the failover URLs of peer {name!r} (not all valid)")
        fresh["peers"][str(name)] = keep
        kept.append(f"peer {name}")
