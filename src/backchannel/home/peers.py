"""The peer registry: name, URL, note and dialect in the home's config.yaml; the key in .env (0600), never elsewhere.

A peer is spoken to in the Hermes API-server dialect (`hermes`, Backchannel and Hermes gateways), or over
A2A (`a2a`: an agent found by its agent card, at the card's JSON-RPC interface, `a2a_url`). A peer file
from before A2A has no dialect: the Hermes dialect."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NotFound, UsageError
from . import config


@dataclass(frozen=True)
class Peer:
    name: str
    url: str
    note: str
    key: str | None
    gateway_id: str | None = None
    timeout_seconds: float = config.PEER_TIMEOUT_SECONDS  # each request's bound (a chat: its wait plus this)
    dialect: str = "hermes"
    a2a_url: str | None = None  # an A2A peer's JSON-RPC endpoint, from its agent card
    failover_urls: tuple[str, ...] = ()  # more URLs of the same gateway, tried in order when one cannot be reached

    @property
    def is_a2a(self) -> bool:
        return self.dialect == "a2a"

    @property
    def urls(self) -> tuple[str, ...]:
        """Where the peer is, first URL first."""
        return (self.url, *self.failover_urls)

    def to_dict(self) -> dict[str, Any]:
        """What may be shown: never the key, only whether there is one."""
        return {
            "name": self.name,
            "url": self.url,
            "note": self.note,
            "key": "set" if self.key else "missing",
            "gateway_id": self.gateway_id,
            "timeout_seconds": self.timeout_seconds,
            "dialect": self.dialect,
            "a2a_url": self.a2a_url,
            "failover_urls": list(self.failover_urls),
        }


def key_var(name: str) -> str:
    return "BACKCHANNEL_PEER_" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_KEY"


def check_url(url: str) -> str:
    parsed = urllib.parse.urlsplit(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"invalid peer URL {url!r}: expected http(s)://host[:port][/path]")
    if parsed.query or parsed.fragment:
        raise UsageError(f"invalid peer URL {url!r}: no query or fragment")
    try:
        parsed.port  # noqa: B018 (raises on a bad port)
    except ValueError as exc:
        raise UsageError(f"invalid peer URL {url!r}: {exc}") from exc
    return url.strip().rstrip("/")


def _peers_section(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    path = config.config_path(root)
    data = config.load_yaml(path)
    config.parse_gateway_config(data, path, exists=path.exists())  # never rewrite a file we could not load
    peers = data.setdefault("peers", {}) or {}
    data["peers"] = peers
    return data, peers


def load(root: Path, name: str) -> Peer:
    config.check_name(name, what="peer")
    entry = config.load_gateway_config(root).peers.get(name)
    if entry is None:
        known = ", ".join(sorted(config.load_gateway_config(root).peers)) or "none"
        raise UsageError(
            f"unknown peer {name!r} (peers: {known}); add it with `backchannel peer add`", code="unknown_peer"
        )
    key = config.secret_value(root, key_var(name))
    return _peer(name, entry, key)


def _peer(name: str, entry: config.PeerEntry, key: str | None) -> Peer:
    return Peer(
        name,
        entry.url,
        entry.note,
        key,
        entry.gateway_id,
        entry.timeout_seconds,
        entry.dialect,
        entry.a2a_url,
        tuple(entry.failover_urls),
    )


def all_peers(root: Path) -> list[Peer]:
    env = config.read_env(root)
    return [_peer(n, e, env.get(key_var(n))) for n, e in sorted(config.load_gateway_config(root).peers.items())]


def check_key(name: str, key: str) -> str:
    if len(key) < 8 or not all("!" <= c <= "~" for c in key):  # never quoted: a key stays out of every message
        raise UsageError(
            f"the key of peer {name!r} must be at least 8 visible ASCII characters (no spaces, accents or "
            "other symbols); nothing was saved"
        )
    return key


def save(
    root: Path,
    name: str,
    *,
    url: str,
    key: str | None,
    note: str | None,
    timeout_seconds: float | None = None,
    a2a_url: str | None = None,
    failover_urls: tuple[str, ...] = (),
) -> bool:
    """Add or update a peer; returns True when it already existed. A None key (or timeout) keeps the existing one.

    `a2a_url` (the JSON-RPC interface its agent card names) makes it an A2A peer; None, a Hermes-dialect one.
    `failover_urls`: more URLs of the same gateway (replacing any it had)."""
    config.check_name(name, what="peer")
    url = check_url(url)
    more = [u for u in dict.fromkeys(check_url(u) for u in failover_urls) if u != url]
    if a2a_url is not None:
        a2a_url = check_url(a2a_url)
    data, peers = _peers_section(root)
    for other in peers:
        if other != name and key_var(other) == key_var(name):
            raise UsageError(f"peer {name!r} would share the key variable {key_var(name)} with peer {other!r}")
    existed = name in peers
    if key is None and not config.read_env(root).get(key_var(name)):
        raise UsageError(f"peer {name!r} needs a key: give --key, or type it when asked, or pipe it on stdin")
    if key is not None:
        config.set_env_value(root, key_var(name), check_key(name, key))
    previous = peers.get(name) or {}
    entry: dict[str, Any] = {"url": url, "note": note if note is not None else previous.get("note", "")}
    if previous.get("gateway_id") and previous.get("url") == url:
        entry["gateway_id"] = previous["gateway_id"]
    if timeout_seconds is not None or "timeout_seconds" in previous:
        entry["timeout_seconds"] = timeout_seconds if timeout_seconds is not None else previous["timeout_seconds"]
    if a2a_url is not None:
        entry.update(dialect="a2a", a2a_url=a2a_url)
    if more:
        entry["failover_urls"] = more
    peers[name] = entry
    config.write_yaml(config.config_path(root), data)
    return existed


def remember_gateway_id(root: Path, name: str, gateway_id: str) -> None:
    data, peers = _peers_section(root)
    if name in peers and peers[name].get("gateway_id") != gateway_id:
        peers[name]["gateway_id"] = gateway_id
        config.write_yaml(config.config_path(root), data)


def remove(root: Path, name: str) -> None:
    config.check_name(name, what="peer")
    data, peers = _peers_section(root)
    if name not in peers:
        raise NotFound(f"unknown peer {name!r}", code="unknown_peer")
    del peers[name]
    config.write_yaml(config.config_path(root), data)
    config.set_env_value(root, key_var(name), None)


def name_of_gateway(root: Path, gateway_id: str) -> str | None:
    for name, entry in config.load_gateway_config(root).peers.items():
        if entry.gateway_id == gateway_id:
            return name
    return None
